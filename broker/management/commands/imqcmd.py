"""``python manage.py imqcmd``: OpenMQ's broker administration command.

Thin: the grammar, the subcommand table and its handlers are broker/admintools/imqcmd/; this
command parses the options, connects to the broker as the ``-u`` user and runs the
subcommand.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from broker.admintools.broker_handle import BrokerAdmin, admin_ssl_context
from broker.admintools.imqcmd.dispatch import COMMANDS, execute
from broker.admintools.imqcmd.grammar import add_arguments, check, unknown, usage
from broker.admintools.imqcmd.session import Run
from broker.config import ConfigError

from .imqtxn import parse_broker, read_passfile


class HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


class Command(BaseCommand):
    help = usage()
    # A command-line client of a running broker: a portal page under construction (the
    # URL checks) must not stop it.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser) -> None:
        add_arguments(parser)

    def run_from_argv(self, argv) -> None:
        self._cli = True
        super().run_from_argv(argv)

    def execute(self, *args, **options):
        """From the command line an error is one line on stderr and exit status 1."""
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if not getattr(self, "_cli", False) or options.get("traceback"):
                raise
            self.stderr.write(str(exc))
            sys.exit(exc.returncode)

    def handle(self, *args, **opts) -> None:
        # The client library's warnings (a connection lost after a refused login, ...) would
        # repeat the one error line this command prints.
        logging.getLogger("openmq_client").addHandler(logging.NullHandler())
        logging.getLogger("openmq_client").propagate = False
        key = (opts["command"], opts["object"])
        spec = COMMANDS.get(key)
        if spec is None:
            raise CommandError(unknown(key, COMMANDS))
        attrs = check(key, spec, opts)
        host, port = parse_broker(opts["broker"])
        if opts["truststore"] and not opts["secure"]:
            raise CommandError("Error: -truststore goes with -secure (the ssladmin service)")
        try:
            context = admin_ssl_context(opts["truststore"]) if opts["secure"] else None
        except ConfigError as exc:
            raise CommandError(f"Error: {exc}") from exc
        if opts["passfile"]:
            password = read_passfile(opts["passfile"])
        else:
            try:
                password = getpass.getpass(f"Password for {opts['user']}: ")
            except (EOFError, KeyboardInterrupt):
                raise CommandError("Error: no password given (use -passfile FILE)") from None
        admin = BrokerAdmin(
            host, port, opts["user"], password, timeout=opts["timeout"], ssl=context
        )
        try:
            execute(key, Run(opts, attrs, admin, host, port, self.stdout))
        finally:
            admin.close()
