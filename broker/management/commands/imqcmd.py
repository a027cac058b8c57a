"""``python manage.py imqcmd``: OpenMQ's broker administration command, over the admin
protocol (admin.md) with :class:`broker.admin.client.AdminClient`.

Supported (OpenMQ syntax)::

    imqcmd query bkr                 imqcmd shutdown bkr
    imqcmd list dst [-tmp]           imqcmd query dst -t q|t -n NAME
    imqcmd purge dst -t q -n NAME    imqcmd destroy dst -t q -n NAME
    imqcmd pause dst -t q -n NAME [-pst CONSUMERS|PRODUCERS|ALL]
    imqcmd resume dst -t q -n NAME
    imqcmd list svc                  imqcmd pause svc -n jms / resume svc -n jms
    imqcmd list cxn [-n SERVICE]     imqcmd destroy dur -n NAME -c CLIENTID

Options: ``-b host:port`` (port mapper, default localhost:7676), ``-u user`` (default
admin), ``-passfile FILE`` (``imq.imqcmd.password=...``; otherwise the password is
prompted for), ``-f`` (no confirmation), ``-rtm SECONDS`` (reply timeout, default 10).
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Sequence

from django.core.management.base import BaseCommand, CommandError

from .imqtxn import parse_broker, read_passfile

DEST_TYPES = {"q": 1, "t": 2}
DEST_STATES = {0: "RUNNING", 1: "CONSUMERS_PAUSED", 2: "PRODUCERS_PAUSED", 3: "PAUSED"}
PAUSE_TYPES = {"CONSUMERS": 1, "PRODUCERS": 2, "ALL": 3}
SERVICE_STATES = {
    -1: "UNKNOWN",
    0: "UNINITIALIZED",
    1: "INITIALIZED",
    2: "STARTED",
    3: "RUNNING",
    4: "PAUSED",
    5: "SHUTTINGDOWN",
    6: "STOPPED",
}
LIMIT_BEHAVIORS = {
    0: "FLOW_CONTROL",
    1: "REMOVE_OLDEST",
    2: "REJECT_NEWEST",
    3: "REMOVE_LOW_PRIORITY",
}

# (command, object) -> handler method name
COMMANDS = {
    ("query", "bkr"): "query_bkr",
    ("shutdown", "bkr"): "shutdown_bkr",
    ("list", "dst"): "list_dst",
    ("query", "dst"): "query_dst",
    ("purge", "dst"): "purge_dst",
    ("destroy", "dst"): "destroy_dst",
    ("pause", "dst"): "pause_dst",
    ("resume", "dst"): "resume_dst",
    ("list", "svc"): "list_svc",
    ("pause", "svc"): "pause_svc",
    ("resume", "svc"): "resume_svc",
    ("list", "cxn"): "list_cxn",
    ("destroy", "dur"): "destroy_dur",
}


def dest_type_name(t: int) -> str:
    return "Topic" if t & 2 else "Queue"


def limit(value: object) -> str:
    return "unlimited" if isinstance(value, int) and value < 0 else str(value)


class Command(BaseCommand):
    help = "Administer a running broker (OpenMQ imqcmd syntax)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("command", choices=sorted({c for c, _ in COMMANDS}))
        parser.add_argument("object", choices=sorted({o for _, o in COMMANDS}))
        parser.add_argument("-t", dest="dest_type", choices=sorted(DEST_TYPES), default="q")
        parser.add_argument("-n", dest="name", help="destination, service or durable name")
        parser.add_argument("-c", dest="client_id", help="client ID (destroy dur)")
        parser.add_argument(
            "-pst", dest="pause_type", type=str.upper, choices=sorted(PAUSE_TYPES), default="ALL"
        )
        parser.add_argument("-tmp", dest="temporary", action="store_true",
                            help="list dst: include temporary destinations")  # fmt: skip
        parser.add_argument("-b", dest="broker", default="localhost:7676", help="host:port")
        parser.add_argument("-u", dest="user", default="admin", help="administrator user")
        parser.add_argument("-passfile", dest="passfile", help="file with imq.imqcmd.password")
        parser.add_argument("-f", dest="force", action="store_true", help="no confirmation")
        parser.add_argument("-rtm", dest="timeout", type=float, default=10.0,
                            help="seconds to wait for each reply")  # fmt: skip

    # -- plumbing ------------------------------------------------------------------------

    def handle(self, *args, **opts) -> None:
        key = (opts["command"], opts["object"])
        method = COMMANDS.get(key)
        if method is None:
            raise CommandError(f"imqcmd {key[0]} {key[1]} is not supported")
        needs_name = key[1] in ("dst", "dur") and key != ("list", "dst")
        if key[1] == "svc" and key[0] != "list":
            needs_name = True
        if needs_name and not opts["name"]:
            raise CommandError(f"imqcmd {key[0]} {key[1]} needs -n <name>")
        if key == ("destroy", "dur") and not opts["client_id"]:
            raise CommandError("imqcmd destroy dur needs -c <client ID>")
        self.opts = opts
        self.host, self.port = parse_broker(opts["broker"])
        password = read_passfile(opts["passfile"]) if opts["passfile"] else None
        if password is None:
            password = getpass.getpass(f"Password for {opts['user']}: ")
        self.password = password
        try:
            asyncio.run(self._run(getattr(self, method)))
        except CommandError:
            raise
        except TimeoutError as exc:
            raise CommandError(f"the broker did not reply: {exc}") from exc
        except Exception as exc:  # AdminError, JMSException, JavaSerializationError
            raise CommandError(self._failure(key, exc)) from exc

    def _failure(self, key: tuple[str, str], exc: Exception) -> str:
        from broker.admin.client import AdminError

        what = f"{key[0]} {key[1]}"
        if isinstance(exc, AdminError):
            return f"Error {what}: {exc.text or 'failed'} (status {exc.status})"
        return f"Error {what}: {exc}"

    async def _run(self, action) -> None:
        from broker.admin.client import AdminClient

        admin = await AdminClient.open(self.host, self.port, self.opts["user"], self.password)
        try:
            await action(admin)
        finally:
            await admin.close()

    @property
    def broker_label(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def rtm(self) -> float:
        return self.opts["timeout"]

    def confirm(self, question: str) -> None:
        if self.opts["force"]:
            return
        self.stdout.write(f"{question} (y/n)[n] ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise CommandError("Cancelled.")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        cells = [[str(c) for c in r] for r in rows]
        widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(header)]
        line = "-" * (sum(widths) + 2 * (len(widths) - 1))
        self.stdout.write(line)
        for i, row in enumerate([list(header), *cells]):
            self.stdout.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )
            if i == 0:
                self.stdout.write(line)
        self.stdout.write(line)

    def pairs(self, items: Sequence[tuple[str, object]]) -> None:
        width = max(len(k) for k, _ in items)
        line = "-" * (width + 30)
        self.stdout.write(line)
        for k, v in items:
            self.stdout.write(f"{k.ljust(width)}  {v}".rstrip())
        self.stdout.write(line)

    def done(self, text: str) -> None:
        if text:
            self.stdout.write(text)
            self.stdout.write("")
        self.stdout.write("Successfully performed the requested operation.")

    def dest(self) -> tuple[str, int, str]:
        t = DEST_TYPES[self.opts["dest_type"]]
        return self.opts["name"], t, dest_type_name(t).lower()

    # -- broker --------------------------------------------------------------------------

    async def query_bkr(self, admin) -> None:
        instance = await admin.hello()
        props = await admin.broker_props()
        self.stdout.write(f"Querying the broker specified by: {self.broker_label}")
        self.stdout.write("")
        keys = [
            ("Version", "imq.product.version"),
            ("Instance Name", None),
            ("Broker ID", "imq.brokerid"),
            ("Primary Port", "imq.portmapper.port"),
            ("Broker is Embedded", "imq.embedded"),
            ("Instance Configuration/Data Root Directory", "imq.varhome"),
            ("Current Number of Messages in System", "imq.system.current_count"),
            ("Max Number of Messages in System", "imq.system.max_count"),
            ("Max Message Size", "imq.message.max_size"),
            ("Auto Create Queues", "imq.autocreate.queue"),
            ("Auto Create Topics", "imq.autocreate.topic"),
            ("Log Level", "imq.log.level"),
        ]
        items: list[tuple[str, object]] = []
        for label, prop in keys:
            if prop is None:
                items.append((label, instance or props.get("imq.instancename", "")))
            elif prop in props:
                items.append((label, props[prop]))
        self.pairs(items)
        self.done("")

    async def shutdown_bkr(self, admin) -> None:
        self.confirm(f"Are you sure you want to shutdown the broker {self.broker_label}?")
        self.stdout.write(f"Shutting down the broker specified by: {self.broker_label}")
        await admin.shutdown(timeout=self.rtm)
        self.done("")

    # -- destinations ----------------------------------------------------------------------

    async def list_dst(self, admin) -> None:
        rows = await admin.destinations()
        if not self.opts["temporary"]:
            rows = [
                r for r in rows if not str(r.get("name", "")).startswith("temporary_destination://")
            ]
        self.stdout.write(
            f"Listing all the destinations on the broker specified by: {self.broker_label}"
        )
        self.stdout.write("")
        self.table(
            (
                "Name",
                "Type",
                "State",
                "Producers",
                "Consumers",
                "Msgs Count",
                "Msgs Total Size (bytes)",
            ),
            [
                (
                    r["name"],
                    dest_type_name(r.get("type", 1)),
                    DEST_STATES.get(r.get("destState", 0), str(r.get("destState"))),
                    r.get("nProducers", 0),
                    r.get("nConsumers", 0),
                    r.get("nMessages", 0),
                    r.get("nMessageBytes", 0),
                )
                for r in sorted(rows, key=lambda r: (r.get("type", 1), r["name"]))
            ],
        )
        self.done("")

    async def query_dst(self, admin) -> None:
        name, t, _ = self.dest()
        (r, *_) = await admin.destinations(name, t)
        self.stdout.write("Querying the destination where:")
        self.pairs([("Destination Name", name), ("Destination Type", dest_type_name(t))])
        self.stdout.write("")
        self.stdout.write(f"On the broker specified by: {self.broker_label}")
        self.stdout.write("")
        self.pairs(
            [
                ("Destination Name", r.get("name")),
                ("Destination Type", dest_type_name(r.get("type", t))),
                ("Destination State", DEST_STATES.get(r.get("destState", 0), r.get("destState"))),
                ("Created Administratively", "false" if r.get("autocreated") else "true"),
                ("Current Number of Messages", ""),
                ("   Actual", r.get("nMessages", 0)),
                ("   Held in Transaction", r.get("nTxnMessages", 0)),
                ("   In Delayed Delivery", r.get("nInDelayMessages", 0)),
                ("Current Message Bytes", ""),
                ("   Actual", r.get("nMessageBytes", 0)),
                ("   Held in Transaction", r.get("nTxnMessageBytes", 0)),
                ("   In Delayed Delivery", r.get("nInDelayMessageBytes", 0)),
                ("Current Number of Producers", r.get("nProducers", 0)),
                ("Current Number of Active Consumers", r.get("naConsumers", 0)),
                ("Current Number of Backup Consumers", r.get("nfConsumers", 0)),
                ("Current Number of Consumers", r.get("nConsumers", 0)),
                ("Max Number of Messages", limit(r.get("maxMessages", -1))),
                ("Max Total Message Bytes", limit(r.get("maxMessageBytes", -1))),
                ("Max Bytes per Message", limit(r.get("maxMessageSize", -1))),
                ("Max Number of Producers", limit(r.get("maxProducers", -1))),
                ("Max Number of Active Consumers", limit(r.get("maxActiveConsumers", -1))),
                ("Max Number of Backup Consumers", limit(r.get("maxFailoverConsumers", -1))),
                ("Consumer Flow Limit", limit(r.get("maxPrefetch", -1))),
                ("Limit Behavior", LIMIT_BEHAVIORS.get(r.get("destLimitBehavior", 0), "")),
                ("Use Dead Message Queue", "true" if r.get("useDMQ") else "false"),
            ]
        )
        self.done("")

    async def purge_dst(self, admin) -> None:
        name, t, kind = self.dest()
        self.confirm(f"Are you sure you want to purge this {kind}: {name}?")
        await admin.purge(name, t)
        self.done(f"Purged the {kind} {name} on the broker specified by: {self.broker_label}")

    async def destroy_dst(self, admin) -> None:
        name, t, kind = self.dest()
        self.confirm(f"Are you sure you want to destroy this {kind}: {name}?")
        await admin.destroy(name, t)
        self.done(f"Destroyed the {kind} {name} on the broker specified by: {self.broker_label}")

    async def pause_dst(self, admin) -> None:
        name, t, kind = self.dest()
        pst = self.opts["pause_type"]
        self.confirm(f"Are you sure you want to pause ({pst}) this {kind}: {name}?")
        await admin.pause_destination(name, t, PAUSE_TYPES[pst])
        self.done(
            f"Paused ({pst}) the {kind} {name} on the broker specified by: {self.broker_label}"
        )

    async def resume_dst(self, admin) -> None:
        name, t, kind = self.dest()
        await admin.resume_destination(name, t)
        self.done(f"Resumed the {kind} {name} on the broker specified by: {self.broker_label}")

    async def destroy_dur(self, admin) -> None:
        name, cid = self.opts["name"], self.opts["client_id"]
        self.confirm(f"Are you sure you want to destroy the durable subscription {name} ({cid})?")
        await admin.destroy_durable(name, cid)
        self.done(f"Destroyed the durable subscription {name} (client ID {cid}).")

    # -- services / connections --------------------------------------------------------------

    async def list_svc(self, admin) -> None:
        rows = await admin.services()
        self.stdout.write(
            f"Listing all the services on the broker specified by: {self.broker_label}"
        )
        self.stdout.write("")
        self.table(
            ("Service Name", "Port Number", "Service State"),
            [
                (
                    r.get("name"),
                    f"{r.get('port')} (dynamic)" if r.get("dynamicPort") else r.get("port"),
                    SERVICE_STATES.get(r.get("state", -1), str(r.get("state"))),
                )
                for r in rows
            ],
        )
        self.done("")

    async def pause_svc(self, admin) -> None:
        name = self.opts["name"]
        self.confirm(f"Are you sure you want to pause the service {name}?")
        await admin.pause_service(name)
        self.done(f"Paused the service {name} on the broker specified by: {self.broker_label}")

    async def resume_svc(self, admin) -> None:
        name = self.opts["name"]
        await admin.resume_service(name)
        self.done(f"Resumed the service {name} on the broker specified by: {self.broker_label}")

    async def list_cxn(self, admin) -> None:
        rows = await admin.connections(self.opts["name"])
        self.stdout.write(
            f"Listing all the connections on the broker specified by: {self.broker_label}"
        )
        self.stdout.write("")
        self.table(
            ("Connection ID", "User", "Service", "Producers", "Consumers", "Host"),
            [
                (
                    r.get("cxnid"),
                    r.get("user", ""),
                    r.get("service", ""),
                    r.get("nproducers", 0),
                    r.get("nconsumers", 0),
                    f"{r.get('host', '')}:{r.get('port', '')}"
                    if r.get("port")
                    else r.get("host", ""),
                )
                for r in rows
            ],
        )
        self.done("")
