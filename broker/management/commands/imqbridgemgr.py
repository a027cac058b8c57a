"""``python manage.py imqbridgemgr``: OpenMQ's bridge administration command (list, start,
stop, pause and resume a bridge or a link), for the broker's STOMP bridge.

Thin: the checks, the protocol and the output are broker/admintools/bridgemgr.py; this
command parses the stock tool's options and reads the password.
"""

from __future__ import annotations

import getpass
import logging
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from broker.admintools import bridgemgr
from broker.admintools.broker_handle import admin_ssl_context
from broker.config import ConfigError

from .imqtxn import parse_broker


class Command(BaseCommand):
    help = (
        "imqbridgemgr <subcommand> <argument> [<options>]: list, start, stop, pause or resume "
        "a bridge (argument bridge) or a link of one (argument link)."
    )
    # A command-line client of a running broker: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("subcommand", help="list, pause, resume, start or stop")
        parser.add_argument("argument", help="bridge or link")
        parser.add_argument("-b", dest="broker", default="localhost:7676", help="host:port")
        parser.add_argument("-bn", dest="bridge_name", help="the bridge name")
        parser.add_argument("-t", dest="bridge_type", help="the bridge type (STOMP, JMS)")
        parser.add_argument("-ln", dest="link_name", help="the link name")
        parser.add_argument("-f", dest="force", action="store_true", help="no confirmation")
        parser.add_argument("-s", dest="silent", action="store_true", help="print nothing")
        parser.add_argument("-u", dest="user", default="admin", help="administrator user")
        parser.add_argument(
            "-passfile", dest="passfile", help="file with imq.imqbridgemgr.password=..."
        )
        parser.add_argument(
            "-rtm", dest="timeout", type=float, default=10.0, help="reply timeout (s)"
        )
        parser.add_argument("-rtr", dest="retries", type=int, help="accepted; not used")
        parser.add_argument(
            "-secure", dest="secure", action="store_true", help="over the ssladmin service"
        )
        parser.add_argument(
            "-truststore", dest="truststore", help="with -secure: PEM certificates to trust"
        )

    def handle(self, *args, **opts) -> None:
        # The client library's warnings would repeat the error the command prints.
        logging.getLogger("openmq_client").addHandler(logging.NullHandler())
        logging.getLogger("openmq_client").propagate = False
        host, port = parse_broker(opts["broker"])
        password = None
        if opts["passfile"]:
            try:
                text = Path(opts["passfile"]).read_text()
            except OSError as exc:
                raise CommandError(
                    f"Error: cannot read passfile {opts['passfile']}: {exc}"
                ) from None
            password = bridgemgr.read_passfile(text)
            if password is None:
                raise CommandError(
                    f"Error: passfile {opts['passfile']} has no {bridgemgr.PASSFILE_KEY}=... line"
                )
        try:
            context = admin_ssl_context(opts["truststore"]) if opts["secure"] else None
        except ConfigError as exc:
            raise CommandError(f"Error: {exc}") from exc
        run = bridgemgr.Options(
            opts["subcommand"],
            opts["argument"],
            host=host,
            port=port,
            bridge_name=opts["bridge_name"],
            bridge_type=opts["bridge_type"],
            link_name=opts["link_name"],
            force=opts["force"],
            silent=opts["silent"],
            user=opts["user"],
            password="",
            timeout=opts["timeout"],
            ssl=context,
        )
        problem = bridgemgr.check(run)
        if problem is None and password is None:
            try:
                password = getpass.getpass(f"Password for {opts['user']}: ")
            except (EOFError, KeyboardInterrupt):
                raise CommandError("Error: no password given (use -passfile FILE)") from None
        run.password = password or ""

        def ask(question: str) -> str:
            self.stdout.write(question)
            self.stdout.flush()
            return sys.stdin.readline()

        # The tool writes whole lines itself.
        self.stdout.ending = self.stderr.ending = ""
        code = bridgemgr.run(run, self.stdout, self.stderr, ask)
        if code:
            sys.exit(code)
