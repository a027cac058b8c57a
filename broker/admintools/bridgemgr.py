"""``imqbridgemgr``: OpenMQ's bridge administration tool, for our broker's STOMP bridge (and
the stock broker's, which answers the same protocol).

:func:`run` is the whole tool without a terminal: it checks a parsed command line as the
stock ``BridgeMgr`` does, talks to the broker (:class:`BridgeSession`: HELLO on
``__JMQBridgeAdmin``, then one command on the queue the HELLO reply names; the protocol
is :mod:`broker.protocol.bridge_admin`) and writes what the stock tool writes, to the
same streams, with its exit status.  ``python manage.py imqbridgemgr`` is the command-line
front (broker/management/commands/imqbridgemgr.py).
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from broker.protocol import bridge_admin as ba
from broker.protocol.javaser import JavaSerializationError, decode_object
from broker.protocol.jtypes import JInt
from broker.protocol.names import JMQ_ERROR_STRING, JMQ_MESSAGE_TYPE, JMQ_STATUS

COMMANDS = ("list", "pause", "resume", "start", "stop")
ARGUMENTS = ("bridge", "link")
PASSFILE_KEY = "imq.imqbridgemgr.password"
_TYPES = {"list": ba.LIST, "pause": ba.PAUSE, "resume": ba.RESUME, "start": ba.START}
_TYPES["stop"] = ba.STOP


class BridgeMgrError(Exception):
    """The broker refused the command or could not be reached: what to print."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass
class Options:
    """A parsed command line (the stock tool's option names in the comments)."""

    command: str
    argument: str
    host: str = "localhost"  # -b host:port
    port: int = 7676
    bridge_name: str | None = None  # -bn
    bridge_type: str | None = None  # -t
    link_name: str | None = None  # -ln
    force: bool = False  # -f
    silent: bool = False  # -s
    user: str = "admin"  # -u
    password: str = ""  # from -passfile
    timeout: float = 10.0  # -rtm (seconds)
    ssl: _ssl.SSLContext | None = None  # -secure


def check(opts: Options) -> str | None:
    """The stock tool's refusal of a command line (before any connection), or None."""
    if opts.command not in COMMANDS:
        return (
            f"Error [A3001]: Unrecognized command line option: {opts.command}.\n"
            'Please type "imqbridgemgr -h" for help.'
        )
    if opts.argument not in ARGUMENTS:
        return (
            f"Error [A3101]: Bad argument specified for the {opts.command} command: "
            f"{opts.argument}\nThe valid command arguments for the {opts.command} command are:"
            "\n\tbridge\n\tlink"
        )
    if opts.argument == "link":
        if not opts.bridge_name:
            return "Error [BA3000]: The bridge name needs to be specified with the -bn option."
        if opts.command != "list" and not opts.link_name:
            return "Error [BA3001]: The link name needs to be specified with the -ln option."
    elif opts.link_name is not None:
        return f"Error [BA3002]: The -ln option is not allowed for {opts.command} bridge "
    return None


def table(
    titles: Sequence[str], rows: Sequence[Sequence[object]], gap: int, border: str | None
) -> list[str]:
    """OpenMQ's MultiColumnPrinter, left-aligned, rows sorted by their first column (one
    per first value, as its TreeMap keeps them), then the blank line of println()."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    n = len(titles)
    widths = [len(t) for t in titles]
    for row in cells:
        for i in range(n):
            widths[i] = max(widths[i], len(row[i]))
    out: list[str] = []
    line = border * (sum(widths) + gap * (n - 1)) if border else None

    def join(items: Sequence[str]) -> str:
        text = ""
        for i, item in enumerate(items):
            text += item
            if i < n - 1:
                text += " " * (widths[i] - len(item) + gap)
        return text

    if line is not None:
        out.append(line)
    out.append(join(titles))
    if line is not None:
        out.append(line)
    by_key = {row[0]: row for row in cells}
    out.extend(join(by_key[k]) for k in sorted(by_key))
    out.append("")
    return out


class BridgeSession:
    """One admin connection speaking the bridge admin protocol."""

    def __init__(self, conn: Any, consumer: Any, reply_queue: Any, producer: Any) -> None:
        self.conn = conn
        self.consumer = consumer
        self.reply_queue = reply_queue
        self.producer = producer

    @classmethod
    async def open(cls, opts: Options) -> BridgeSession:
        """Connect to the ADMIN service and say HELLO; raises BridgeMgrError."""
        from openmq_client import AckMode, Queue, connect

        try:
            conn = await connect(
                opts.host,
                opts.port,
                user=opts.user,
                password=opts.password,
                service_type="ADMIN",
                connect_timeout=max(opts.timeout, 1.0),
                ping_interval=None,
                ssl=opts.ssl or False,
            )
        except Exception as exc:  # refused, unknown host, bad credentials, TLS
            raise BridgeMgrError(
                f"Error while connecting to the broker on host '{opts.host}' and port "
                f"'{opts.port}'.\n{exc}\nPlease verify that there is a broker running on the "
                "specified host and port or\nuse the '-b' option to specify the correct "
                "broker host and port."
            ) from None
        try:
            await conn.start()
            session = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
            hello = await session.create_producer(Queue(ba.BRIDGE_ADMIN_QUEUE), persistent=False)
            reply_queue = await session.create_temporary_queue()
            consumer = await session.create_consumer(reply_queue)
            self = cls(conn, consumer, reply_queue, hello)
            reply = await self._ask(ba.HELLO, {}, opts.timeout)
            if reply.reply_to is None:
                raise BridgeMgrError(
                    "Error while performing this operation on the broker.\n"
                    "HELLO_REPLY protocol error: no JMSReplyTo"
                )
            self.producer = await session.create_producer(reply.reply_to, persistent=False)
            return self
        except BaseException:
            await conn.close()
            raise

    async def close(self) -> None:
        if not self.conn.is_closed:
            await self.conn.close()

    async def _ask(self, msg_type: int, props: dict[str, object], timeout: float) -> Any:
        from openmq_client import ObjectMessage

        msg = ObjectMessage(
            None,
            properties={JMQ_MESSAGE_TYPE: JInt(msg_type), **props},
            reply_to=self.reply_queue,
        )
        await self.producer.send(msg, persistent=False)
        while True:
            reply = await self.consumer.receive(timeout=timeout)
            if reply is None:
                why = (
                    "the connection closed before the broker replied"
                    if self.conn.is_closed
                    else f"no reply from the broker within {timeout:g} s"
                )
                raise BridgeMgrError(f"Error while performing this operation on the broker.\n{why}")
            await reply.acknowledge()
            rprops = reply.properties
            if rprops.get(JMQ_MESSAGE_TYPE) not in (msg_type + 1, None):
                continue  # a late reply to an earlier request
            status = int(rprops.get(JMQ_STATUS, ba.ERROR))
            if status != ba.OK:
                raise BridgeMgrError(
                    "Error while performing this operation on the broker.\n"
                    f"{rprops.get(JMQ_ERROR_STRING) or f'status {status}'}"
                )
            return reply

    async def command(self, opts: Options) -> Any:
        """Send the command; the reply (its properties and body)."""
        props: dict[str, object] = {}
        if opts.bridge_name is not None:
            props[ba.BRIDGE_NAME] = opts.bridge_name
        if opts.bridge_type is not None:
            props[ba.BRIDGE_TYPE] = opts.bridge_type
        if opts.link_name is not None and opts.argument == "link":
            props[ba.LINK_NAME] = opts.link_name
        if opts.command == "list":
            props[ba.DEBUG_MODE] = False
        props.update({ba.LOCALE_LANG: "en", ba.LOCALE_COUNTRY: "", ba.LOCALE_VARIANT: ""})
        return await self._ask(_TYPES[opts.command], props, opts.timeout)


def list_tables(data: bytes | None) -> list[list[str]]:
    """The lines of each table a LIST reply carries."""
    if not data:
        return []
    try:
        value = decode_object(data, generic=True)
    except JavaSerializationError as exc:
        raise BridgeMgrError(
            f"Error while performing this operation on the broker.\nbad LIST reply: {exc}"
        ) from None
    out = []
    for t in value if isinstance(value, list) else []:
        if not isinstance(t, dict):
            continue
        titles = (t.get("titleTable") or [[]])[0]
        rows = t.get("table") or []
        out.append(table(titles, rows, int(t.get("gap") or 4), t.get("border")))
    return out


def run(
    opts: Options,
    stdout: IO[str],
    stderr: IO[str],
    ask: Callable[[str], str] | None = None,
) -> int:
    """Run one command as the stock tool does; its exit status.  ``ask`` shows a
    question and returns the answer (no -f; EOF: the default, no)."""
    problem = check(opts)
    if problem is not None:
        if not opts.silent:
            stderr.write(problem + "\n")
        return 1

    def say(text: str = "") -> None:
        if not opts.silent:
            stdout.write(text + "\n")
            stdout.flush()

    def warn(text: str = "") -> None:
        if not opts.silent:
            stderr.write(text + "\n")
            stderr.flush()

    cmd, on_link = opts.command, opts.argument == "link"
    single = on_link or bool(opts.bridge_name and opts.bridge_name.strip())
    what = "link" if on_link else "bridge" if single else "bridge(s)"
    if on_link:
        say(f"Perform operation [{cmd}] on the link where:\n")
        for line in table(
            ["Bridge Name", "Link Name "], [[opts.bridge_name, opts.link_name]], 4, "-"
        ):
            say(line)
        say("On the broker specified by:\n")
    elif single:
        say(f"Perform operation [{cmd}] on the bridge where:\n")
        for line in table(["Bridge Name"], [[opts.bridge_name]], 4, "-"):
            say(line)
        say("On the broker specified by:\n")
    elif opts.bridge_type and opts.bridge_type.strip():
        say(f"Perform operation [{cmd}] on all bridges where:\n")
        for line in table(["Bridge Type "], [[opts.bridge_type]], 4, "-"):
            say(line)
        say("On the broker specified by:\n")
    else:
        say(f"Perform operation [{cmd}] on all bridges on the broker specified by:\n")
    for line in table(["Host", "Primary Port"], [[opts.host, str(opts.port)]], 4, "-"):
        say(line)

    failed = f"\nThe operation [{cmd}] on the {what} failed.\n"
    return asyncio.run(_talk(opts, say, warn, ask, single, what, failed))


async def _talk(
    opts: Options,
    say: Callable[[str], None],
    warn: Callable[[str], None],
    ask: Callable[[str], str] | None,
    single: bool,
    what: str,
    failed: str,
) -> int:
    cmd = opts.command
    session: BridgeSession | None = None
    try:
        session = await BridgeSession.open(opts)
        declined = _declined(opts, say, ask, single, what)
        if declined is not None:
            return declined
        reply = await session.command(opts)
    except BridgeMgrError as exc:
        warn(exc.text)
        warn(failed)
        return 1
    finally:
        if session is not None:
            await session.close()
    if cmd == "list":
        from openmq_client import ObjectMessage

        # The LIST reply's serialised table (none: an ObjectMessage without a body).
        body = reply.data if isinstance(reply, ObjectMessage) else None
        for lines in list_tables(body):
            for line in lines:
                say(line)
            if opts.argument == "bridge":
                say("")
    say(f"The operation [{cmd}] on the {what} was successful.\n")
    return 0


def _declined(
    opts: Options,
    say: Callable[[str], None],
    ask: Callable[[str], str] | None,
    single: bool,
    what: str,
) -> int | None:
    """The stock tool's confirmation of a command that changes something (not with -f):
    None to go on, else the exit status (0: answered no; 1: an answer it does not know)."""
    cmd = opts.command
    if cmd == "list" or opts.force:
        return None
    thing = "link" if opts.argument == "link" else "bridge"
    question = f"Are you sure you want to perform operation [{cmd}] on this {thing} ? (y/n)[n] "
    answer = (ask(question) if ask is not None else "").strip() or "n"
    say("")
    noop = f"The operation [{cmd}] was not performed on the {what if single else 'bridge(s)'}.\n"
    if opts.argument == "link":
        noop = f"The operation [{cmd}] was not performed on the link.\n"
    if answer.lower() in ("n", "no"):
        say(noop)
        return 0
    if answer.lower() not in ("y", "yes"):
        say(f"Unrecognized response: {answer}.")
        say("")
        say(noop)
        return 1
    return None


def read_passfile(text: str) -> str | None:
    """The password of an imqbridgemgr passfile (``imq.imqbridgemgr.password=...``)."""
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and not name.startswith("#") and name.strip() == PASSFILE_KEY:
            return value.strip()
    return None
