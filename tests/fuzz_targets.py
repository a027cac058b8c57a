"""The fuzz targets: each feeds one input (bytes) to a sans-IO decoder or engine in
process and checks what the code promises.

Shared by ``bench/fuzz.py`` (atheris, coverage-guided, a million inputs per target) and
``tests/test_fuzz_targets.py`` (a short deterministic run of each, in the fast tier).
A target returns normally for an input the code handled -- refused bad input included:
a ``ProtocolError`` (or the gateway's own refusal types), a dropped link, a closed
connection -- and raises anything else:

* :class:`InvariantBroken` when the code broke a rule it promises (a state its
  transition table does not reach, output our own decoder cannot read back, output
  after a close, something left behind by a closed connection, an error logged);
* :class:`Hang` (a ``BaseException``, so no ``except Exception`` in the broker swallows
  it) when one input ran longer than the per-input limit (``hang_limit``);
* any other exception: a bug in the code under test.

Every target's input starts with a mode byte the target reads its options from (how to
cut the stream into reads, whether the harness logs in first, ...); ``seeds()`` gives
inputs built from the captured vectors (third_party/openmq/vectors, tests/vectors_cluster).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import os
import shutil
import signal
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from broker.stock_paths import VECTORS

if TYPE_CHECKING:
    from broker.protocol.brokerinfo import BrokerInfo

__all__ = ["TARGETS", "Hang", "InvariantBroken", "Target", "hang_limit", "setup"]

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_VECTORS = ROOT / "tests" / "vectors_cluster"


class InvariantBroken(AssertionError):
    """The code under test broke a rule it promises."""


class Hang(BaseException):
    """One input ran longer than the per-input limit."""


def _check(ok: object, what: str, *args: object) -> None:
    """Raise InvariantBroken unless ``ok``; ``what`` is formatted with ``args`` only then."""
    if not ok:
        raise InvariantBroken(what.format(*args) if args else what)


def setup() -> None:
    """What every target needs before the first input: Django's settings (the broker's
    modules read them; no database is touched) and logging that keeps ERROR records."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    # A refused input is logged once at WARNING by design; an ERROR (log.exception in a
    # catch-all) means the code met something it did not expect.
    logging.disable(logging.WARNING)
    root = logging.getLogger()
    if not any(isinstance(h, _ErrorRecords) for h in root.handlers):
        root.addHandler(ERRORS)


class _ErrorRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def check(self) -> None:
        if self.records:
            rec = self.records[0]
            self.records.clear()
            text = rec.getMessage()
            if rec.exc_info and rec.exc_info[1] is not None:
                exc = rec.exc_info[1]
                raise InvariantBroken(
                    f"{rec.name} logged {rec.levelname}: {text}: {type(exc).__name__}: {exc}"
                ) from exc
            raise InvariantBroken(f"{rec.name} logged {rec.levelname}: {text}")


ERRORS = _ErrorRecords()


# -- the per-input hang limit -------------------------------------------------------


def _on_hang(_sig: int, _frame: object) -> None:
    raise Hang("input ran over the hang limit")


@contextlib.contextmanager
def hang_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the code under test after ``seconds`` of CPU time (the
    virtual timer: a sans-IO hang is a loop, and libFuzzer keeps SIGALRM for its own
    -timeout, which catches a hang inside C code)."""
    if seconds <= 0:
        yield
        return
    old = signal.signal(signal.SIGVTALRM, _on_hang)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


# -- input helpers ------------------------------------------------------------------


class Cursor:
    """Reads an input front to back; past its end every read gives zeros/empty."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def u16(self) -> int:
        return (self.byte() << 8) | self.byte()

    def take(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def line(self) -> bytes:
        end = self.data.find(b"\n", self.pos)
        end = len(self.data) if end < 0 else end
        out = self.data[self.pos : end]
        self.pos = end + 1
        return out

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out


def _reads(stream: bytes, size: int) -> list[bytes]:
    """``stream`` cut into reads of ``size`` bytes (0: one read)."""
    if size <= 0 or not stream:
        return [stream] if stream else []
    return [stream[i : i + size] for i in range(0, len(stream), size)]


def _hex(path: Path) -> bytes:
    return bytes.fromhex("".join(path.read_text().split()))


def _sessions() -> list[list[bytes]]:
    """The client's packets of each captured connection, in wire order."""
    out = []
    for d in sorted(VECTORS.rglob("c2b-01-HELLO.hex")):
        files = sorted(d.parent.glob("c2b-*.hex"))
        out.append([_hex(f) for f in files])
    return out


def _reachable(transitions: dict) -> dict:
    """state -> every state the transition table reaches from it (itself included)."""
    states = {s for s, _e in transitions} | set(transitions.values())
    reach = {s: {s} for s in states}
    changed = True
    while changed:
        changed = False
        for (s, _e), t in transitions.items():
            for src in states:
                if s in reach[src] and t not in reach[src]:
                    reach[src].add(t)
                    changed = True
    return reach


class Target:
    """One fuzz target: ``seeds()``, ``__call__(data)``, the modules it exercises."""

    name = ""
    modules: tuple[str, ...] = ()
    max_len = 4096

    def seeds(self) -> list[bytes]:
        raise NotImplementedError

    def __call__(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the target holds (a broker, an event loop, a directory)."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    # The broker around an engine schedules on the running loop (a delayed delivery, a
    # cluster flush), as its drivers run there: inputs run on one loop of the target's.
    _loop: asyncio.AbstractEventLoop | None = None
    _loop_errors: list[dict]

    def in_loop(self, one: Callable[[], object]) -> None:
        """Run ``one()`` (a coroutine function) on the target's loop; what failed in a
        callback of the loop's is a failure of this input."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop_errors = []
            self._loop.set_exception_handler(lambda _loop, ctx: self._loop_errors.append(ctx))
        self._loop.run_until_complete(one())  # type: ignore[arg-type]
        if self._loop_errors:
            ctx = self._loop_errors[0]
            self._loop_errors.clear()
            exc = ctx.get("exception")
            raise InvariantBroken(f"event loop error: {ctx.get('message')}: {exc!r}") from exc


# -- JMQ packets ----------------------------------------------------------------------


class JmqPacketTarget(Target):
    """The JMQ packet reader, fields and properties, and encoding what it decoded."""

    name = "jmq-packet"
    modules = ("broker.protocol",)

    def seeds(self) -> list[bytes]:
        return [b"\x00" + b"".join(s) for s in _sessions()] + [
            bytes([7]) + p for s in _sessions() for p in s
        ]

    def __call__(self, data: bytes) -> None:
        from broker.protocol.errors import ProtocolError
        from broker.protocol.packet import (
            HEADER_SIZE,
            BadPacket,
            OversizedPacket,
            Packet,
            PacketReader,
            build_packet,
            parse_packet,
        )
        from broker.protocol.properties import encode_properties

        c = Cursor(data)
        mode = c.byte()
        stream = c.rest()
        reader = PacketReader(4096, skip_oversized=bool(mode & 1))
        packets: list = []
        try:
            for chunk in _reads(stream, (mode >> 1) * 3):
                packets.extend(reader.feed(chunk))
        except ProtocolError:
            pass
        framed = sum(len(p.raw) for p in packets if type(p) is not OversizedPacket)
        _check(framed <= len(stream), "the reader gave more bytes than it was fed")
        for pkt in packets:
            if type(pkt) is not Packet:
                _check(isinstance(pkt, BadPacket), "the reader gave a {}", type(pkt))
                _check(len(pkt.raw) >= HEADER_SIZE, "a bad packet shorter than a header")
                continue
            _check(pkt.size == len(pkt.raw), "a packet whose size is not its length")
            try:
                fields = pkt.fields
                props = pkt.properties
            except ProtocolError:
                continue
            body = pkt.body
            _check(len(body) == pkt.body_size, "body length and body_size differ")
            # What we decoded encodes, and decodes to the same again (as a forwarded or
            # stored message is).
            try:
                raw_props = encode_properties(props)
            except ProtocolError:
                continue
            again = parse_packet(
                build_packet(
                    pkt.type,
                    raw_props=raw_props,
                    body=body,
                    flags=pkt.flags,
                    consumer_id=pkt.consumer_id,
                    fields=fields,
                    timestamp=pkt.timestamp,
                )
            )
            # Compared as bytes: a NaN property is not equal to itself.
            _check(
                encode_properties(again.properties) == raw_props,
                "properties do not round-trip: {!r}",
                props,
            )
            # The writer leaves out zero longs and a delivery count below 1.
            kept = {
                k: v
                for k, v in fields.items()
                if not ((k in (8, 9, 10) and v == 0) or (k == 11 and v <= 0))  # type: ignore[operator]
            }
            _check(
                again.fields == kept,
                "fields do not round-trip: {!r} -> {!r}",
                fields,
                again.fields,
            )
            _check(again.body == body, "the body does not round-trip")


# -- the connection engine ------------------------------------------------------------


class EngineTarget(Target):
    """A client connection's engine on a real (never started) Broker, from HELLO on.

    Mode byte: bit 0 -- the harness logs in first (HELLO, basic AUTHENTICATE as guest)
    and the input is what follows; bits 1-7 -- the read size in 8-byte steps (0: the
    whole input in one read).  Timers the engine arms fire at the end of the input (the
    login deadline, a delayed refusal), then the transport goes away."""

    name = "jmq-engine"
    modules = ("broker.protocol", "broker.engine", "broker.core", "broker.security")
    max_len = 8192
    fresh_every = 1000

    def __init__(self) -> None:
        self._broker = None
        self._runs = 0
        self._login: tuple[bytes, bytes] | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="fuzz-engine-"))
        from broker.engine.states import TRANSITIONS

        self._reach = _reachable(TRANSITIONS)

    def seeds(self) -> list[bytes]:
        out = []
        for s in _sessions():
            out.append(b"\x00" + b"".join(s))
            out.append(bytes([2 * 9]) + b"".join(s))
            rest = [p for p in s if p[8:10] not in (b"\x00\x0a", b"\x00\x0c")]
            out.append(b"\x01" + b"".join(rest))
            for p in rest:
                out.append(b"\x01" + p)
        return out

    def broker(self):  # noqa: ANN201 - broker.server.broker.Broker
        from broker.config import BrokerConfig
        from broker.security.digest import md5str
        from broker.security.filerepo import FileUserRepository
        from broker.server.broker import Broker

        if self._broker is None or self._runs >= self.fresh_every:
            if self._broker is not None:
                self._broker.executor.shutdown(wait=False)
            passwd = self._tmp / "passwd"
            passwd.write_text(
                f"guest:{md5str('guest:guest')}:anonymous:1\n"
                f"admin:{md5str('admin:admin')}:admin:1\n"
            )
            config = BrokerConfig(
                {"imq.varhome": str(self._tmp / "var"), "imq.accesscontrol.enabled": "false"}
            )
            b = Broker(config, FileUserRepository(passwd))
            b.router.observers.remove_transaction_observer(b.txn_records)
            self._broker = b
            self._runs = 0
        self._runs += 1
        return self._broker

    def close(self) -> None:
        if self._broker is not None:
            self._broker.executor.shutdown(wait=False)
            self._broker = None
        shutil.rmtree(self._tmp, ignore_errors=True)
        super().close()

    def __call__(self, data: bytes) -> None:
        async def one() -> None:
            self._one(data)
            await asyncio.sleep(0)

        self.in_loop(one)

    def _one(self, data: bytes) -> None:
        from broker.engine import Close, ConnectionEngine, ConnState, RunBlocking, StartTimer
        from broker.engine.effects import CancelTimer, TransactionTimer
        from broker.protocol.errors import ProtocolError
        from broker.protocol.jtypes import JInt
        from broker.protocol.packet import Packet, PacketReader, build_packet
        from broker.protocol.types import FLAG_A, PacketType, is_reply
        from broker.server.services import Service

        broker = self.broker()
        c = Cursor(data)
        mode = c.byte()
        stream = c.rest()
        service = Service("jms", "NORMAL", "tcp", None, 0, "basic", -1)
        broker.service_repositories[service.name] = broker.user_repository
        e = ConnectionEngine(broker, service)
        e.peer = "127.0.0.1:40000"
        timers: dict[str, Callable] = {}
        closes = 0
        # Correlation ids of what the client sent: a reply names one of them.
        ids: set[int] = {0}
        id_reader = PacketReader(broker.max_packet_size, skip_oversized=True)
        state = e.state

        def run(effects) -> None:
            nonlocal closes
            for eff in effects:
                t = type(eff)
                if t is RunBlocking:
                    try:
                        result, error = eff.fn(*eff.args), None
                    except Exception as exc:  # the driver hands it back the same way
                        result, error = None, exc
                    run(eff.done(result, error))
                elif t is StartTimer:
                    timers[eff.name] = eff.callback
                elif t is CancelTimer:
                    timers.pop(eff.name, None)
                elif t is Close:
                    closes += 1
                    _check(e.state is ConnState.CLOSED, "Close asked in state " + e.state.name)
                elif t is not TransactionTimer:
                    raise InvariantBroken(f"unknown effect {eff!r}")

        def output() -> list[Packet]:
            data = b"".join(e.data_to_send())
            if not data:
                return []
            reader = PacketReader(1 << 30)
            try:
                pkts = reader.feed(data)
            except ProtocolError as exc:
                raise InvariantBroken(
                    f"the engine wrote bytes that are not packets: {exc}"
                ) from exc
            _check(reader.buffered == 0, "the engine wrote a partial packet")
            for p in pkts:
                _check(type(p) is Packet, "the engine wrote a malformed packet: {!r}", p)
                try:
                    props = p.properties
                    p.fields  # noqa: B018 - decoded to see that it decodes
                except ProtocolError as exc:
                    raise InvariantBroken(f"the engine wrote unreadable {p!r}: {exc}") from exc
                if is_reply(p.type) and p.type != PacketType.AUTHENTICATE_REQUEST:
                    status = props.get("JMQStatus")
                    _check(isinstance(status, int), "reply {!r} without a JMQStatus", p)
                    reason = props.get("JMQReason")
                    _check(
                        not (isinstance(reason, str) and reason.startswith("internal error")),
                        "reply {!r} says internal error: {}",
                        p,
                        props,
                    )
                    _check(p.consumer_id in ids, "reply {!r} to a request never sent", p)
            return pkts

        def step(chunk: bytes) -> None:
            nonlocal state
            was_closed = e.state is ConnState.CLOSED
            try:
                for p in id_reader.feed(chunk):
                    ids.add(p.consumer_id)
            except ProtocolError:
                pass
            effects = e.receive_data(chunk)
            if was_closed:
                _check(effects == (), "effects from a closed connection")
            run(effects)
            out = output()
            if was_closed:
                _check(not out, "output from a closed connection")
            _check(e.state in self._reach[state], "state {} -> {}", state.name, e.state.name)
            state = e.state

        run(e.start())
        if mode & 1:
            if self._login is None:
                auth = struct.pack(">H", 5) + b"guest" + struct.pack(">H", 8) + b"Z3Vlc3Q="
                self._login = (
                    build_packet(
                        PacketType.HELLO,
                        props={"JMQProtocolLevel": JInt(500)},
                        flags=FLAG_A,
                        consumer_id=7,
                    ),
                    build_packet(
                        PacketType.AUTHENTICATE,
                        props={"JMQAuthType": "basic"},
                        body=auth,
                        flags=FLAG_A,
                        consumer_id=8,
                    ),
                )
            for pkt in self._login:
                step(pkt)
            _check(e.state is ConnState.READY, "the harness's login failed")
        for chunk in _reads(stream, (mode >> 1) * 8):
            step(chunk)
        # Time passes: the timers fire (login deadline, delayed refusal).
        for _ in range(3):
            if not timers:
                break
            pending = list(timers.values())
            timers.clear()
            for cb in pending:
                run(cb())
            output()
        _check(closes <= 1, "{} Close effects", closes)
        if e.state is ConnState.CLOSED:
            _check(closes == 1, "closed without a Close effect")
        e.connection_lost()
        _check(e.state is ConnState.CLOSED, "not closed after connection_lost")
        ERRORS.check()
        router = broker.router
        _check(e.id not in broker.connections, "the broker still lists the connection")
        _check(not router.sessions, "sessions left behind: {}", router.sessions)
        _check(not router.producers, "producers left behind: {}", router.producers)
        _check(not router.consumers, "consumers left behind: {}", router.consumers)
        _check(
            not any(d.temporary_owner == e.id for d in router.each_destination()),
            "a temporary destination outlived its connection",
        )


# -- GPackets -------------------------------------------------------------------------


def _cluster_packets() -> list[bytes]:
    """The stock broker's GPackets of tests/vectors_cluster (the .txt captures)."""
    out = []
    for f in sorted(CLUSTER_VECTORS.glob("*.txt")):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2:
                out.append(bytes.fromhex(parts[-1]))
    return out


def _cluster_streams() -> list[bytes]:
    return [_hex(f) for f in sorted(CLUSTER_VECTORS.glob("*.hex"))]


class GPacketTarget(Target):
    """The cluster reader (link packets and GPackets), the bodies OpenMQ's packets carry
    (LINK_INIT, BrokerInfo, interest records, durable names), and re-encoding."""

    name = "gpacket"
    modules = ("broker.protocol",)

    def seeds(self) -> list[bytes]:
        return [b"\x00" + s for s in _cluster_streams()] + [b"\x00" + p for p in _cluster_packets()]

    def __call__(self, data: bytes) -> None:
        from broker.protocol import gpacket as gp
        from broker.protocol.brokerinfo import BrokerInfo
        from broker.protocol.errors import ProtocolError

        c = Cursor(data)
        mode = c.byte()
        stream = c.rest()
        reader = gp.GPacketReader()
        packets: list = []
        try:
            for chunk in _reads(stream, mode * 5):
                packets.extend(reader.feed(chunk))
        except ProtocolError:
            pass
        for pkt in packets:
            if isinstance(pkt, gp.LinkPacket):
                for decode in (gp.LinkInit.decode, BrokerInfo.decode):
                    with contextlib.suppress(ProtocolError):
                        decode(pkt.body)
                _check(gp.decode_link(gp.encode_link(pkt)) == pkt, "link packet round trip")
                continue
            _check(isinstance(pkt, gp.GPacket), "the reader gave {!r}", pkt)
            # Re-encoding is stable, compared as bytes (a NaN property is not equal to
            # itself).
            first = gp.encode(pkt, stamp=False)
            again = gp.decode(first)
            _check(
                again.type == pkt.type and gp.encode(again, stamp=False) == first,
                "GPacket does not round-trip: {!r} -> {!r}",
                pkt,
                again,
            )
            with contextlib.suppress(ProtocolError):
                gp.read_interest(gp.BodyReader(pkt.payload))
            with contextlib.suppress(ProtocolError):
                gp.read_durable_names(pkt.payload, pkt.props.get("C"))
            with contextlib.suppress(ProtocolError):
                gp.LinkInit.decode(pkt.payload)
            with contextlib.suppress(ProtocolError):
                BrokerInfo.decode(pkt.payload)


class _Wire:
    """A link's transport that keeps what is written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.lost = False  # connection_lost was called

    def writelines(self, data: list[bytes]) -> None:
        _check(not self.closed, "written to a closed transport")
        self.written.extend(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("198.18.0.2", 40000) if name == "peername" else default


class LinkTarget(Target):
    """A cluster link (BrokerLink and its LinkEngine) on a real ClusterService and router,
    as the stock broker s2 of tests/vectors_cluster dials us (s1), from its LINK_INIT on.

    Mode byte: bit 0 -- the harness does the peer's handshake (the captured one) and the
    input is the GPackets after it; bits 1-7 -- the read size in 4-byte steps."""

    name = "link-engine"
    modules = ("broker.protocol", "broker.cluster", "broker.core")
    max_len = 8192
    fresh_every = 100

    def __init__(self) -> None:
        from broker.cluster.linkengine import TRANSITIONS

        self._reach = _reachable(TRANSITIONS)
        self._svc = None
        self._runs = 0
        stream = _cluster_streams()
        # The dialler's capture: LINK_INIT, BROKER_INFO, G_BROKER_INFO_REPLY, GOODBYE...
        from broker.protocol import gpacket as gp

        dialler = _hex(CLUSTER_VECTORS / "stock_dialler_to_acceptor.hex")
        pkts = gp.GPacketReader().feed(dialler)
        self._handshake = b"".join(
            gp.encode_link(p) if isinstance(p, gp.LinkPacket) else gp.encode(p, stamp=False)
            for p in pkts[:3]
        )
        self._peer_init = gp.LinkInit.decode(pkts[0].body)
        del stream
        # The captured BROKER_INFO (a Java-serialised object, most of a handshake's cost)
        # decodes once per process: every input has a handshake, and the same bytes give
        # the same (never modified) BrokerInfo.  Other bytes go to the real decoder.
        from broker.cluster import linkengine

        self._real_info = real = linkengine.BrokerInfo
        known = {pkts[1].body: real.decode(pkts[1].body)}

        class _KnownInfo(real):  # type: ignore[misc, valid-type]
            @classmethod
            def decode(cls, body: bytes) -> BrokerInfo:  # type: ignore[override]
                hit = known.get(bytes(body))
                return hit if hit is not None else real.decode(body)

        linkengine.BrokerInfo = _KnownInfo  # type: ignore[misc]

    def seeds(self) -> list[bytes]:
        out = [b"\x00" + s for s in _cluster_streams()]
        packets = _cluster_packets()
        out.append(b"\x01" + b"".join(packets))
        out += [b"\x01" + p for p in packets]
        out += [b"\x00" + self._handshake + p for p in packets]
        return out

    def service(self):  # noqa: ANN201 - broker.cluster.service.ClusterService
        from broker.cluster.config import ClusterConfig
        from broker.cluster.service import ClusterService
        from broker.core.router import MessageRouter
        from broker.protocol import gpacket as gp

        if self._svc is None or self._runs >= self.fresh_every:
            init = self._peer_init
            cfg = ClusterConfig(
                me=gp.BrokerAddress("198.18.0.1", "s1", 27676),
                peers=[(init.host, init.port)],
                match=dict(init.match),
            )
            svc = ClusterService(cfg, MessageRouter(), session_id=1)
            # Our own BROKER_INFO body, the same every time: encoded once (the Java
            # serialisation is most of a link's start otherwise).
            svc.broker_info = functools.lru_cache(maxsize=1)(svc.broker_info)  # type: ignore[method-assign]
            self._svc = svc
            self._runs = 0
        self._runs += 1
        return self._svc

    def close(self) -> None:
        from broker.cluster import linkengine

        linkengine.BrokerInfo = self._real_info  # type: ignore[misc]
        super().close()

    def __call__(self, data: bytes) -> None:
        self.in_loop(lambda: self._one(data))

    async def _one(self, data: bytes) -> None:
        from broker.cluster.link_driver import BrokerLink
        from broker.cluster.linkengine import LinkState
        from broker.protocol import gpacket as gp
        from broker.protocol.errors import ProtocolError

        svc = self.service()
        c = Cursor(data)
        mode = c.byte()
        stream = c.rest()
        link = BrokerLink(svc)
        wire = _Wire()
        link.connection_made(wire)  # type: ignore[arg-type]
        engine = link.engine
        state = engine.state
        seen = 0

        def check_output() -> None:
            nonlocal seen
            written = b"".join(wire.written[seen:])
            seen = len(wire.written)
            if not written:
                return
            reader = gp.GPacketReader()
            try:
                pkts = reader.feed(written)
            except ProtocolError as exc:
                raise InvariantBroken(f"the link wrote bytes that are not packets: {exc}") from exc
            _check(not reader.pending, "the link wrote a partial packet")
            for p in pkts:
                if isinstance(p, gp.GPacket):
                    _check(p.type in gp.KNOWN_TYPES, "the link wrote unknown {!r}", p)

        async def feed(chunk: bytes) -> None:
            nonlocal state
            was_closed = engine.state is LinkState.CLOSED
            link.data_received(chunk)
            await asyncio.sleep(0)
            if wire.closed and not wire.lost:
                # asyncio calls connection_lost once the closed transport is gone.
                wire.lost = True
                link.connection_lost(None)
            _check(
                engine.state in self._reach[state],
                "link {} -> {}",
                state.name,
                engine.state.name,
            )
            state = engine.state
            if was_closed:
                _check(len(wire.written) == seen, "the link wrote after it closed")
            check_output()

        await asyncio.sleep(0)
        check_output()
        if mode & 1:
            await feed(self._handshake)
            _check(engine.state is LinkState.UP, "the harness's handshake failed")
        for chunk in _reads(stream, (mode >> 1) * 4):
            if engine.state is LinkState.CLOSED:
                break
            await feed(chunk)
        if not wire.lost:
            wire.lost = True
            link.connection_lost(None)
        await asyncio.sleep(0)
        ERRORS.check()
        _check(engine.state is LinkState.CLOSED, "the link is not closed")
        _check(link not in svc.links.values(), "a closed link is still listed as up")
        remotes = svc.delivery.consumers.remotes
        _check(not any(k[0] is link for k in remotes), "remote consumers outlived the link")
        _check(
            not any(k[0] is link for k in svc.delivery.inbound), "inbound origins outlived the link"
        )


# -- the HTTP tunnel ------------------------------------------------------------------


def _tunnel_data_packets(conn_id: int = 7) -> list[bytes]:
    """The captured client packets carried as the stock client carries them: DATA
    packets with sequence numbers from 0."""
    from broker.protocol.httptunnel import TunnelPacket, TunnelType

    out = []
    for s in _sessions()[:3]:
        stream = b"".join(s)
        out.append(
            b"".join(
                TunnelPacket(TunnelType.DATA, conn_id, i, 64, stream[pos : pos + 8192]).encode()
                for i, pos in enumerate(range(0, len(stream), 8192))
            )
        )
    return out


class TunnelHttpTarget(Target):
    """The tunnel service's HTTP/1.1 request reader, its query strings and the tunnel
    packets in request bodies, as ``broker/server/tunnel.py`` reads them.

    Mode byte: the read size in 3-byte steps (0: one read)."""

    name = "tunnel-http"
    modules = ("broker.protocol",)

    def seeds(self) -> list[bytes]:
        from broker.protocol.httptunnel import TunnelPacket, TunnelType

        def post(query: str, body: bytes) -> bytes:
            return (
                f"POST /imqTunnel?{query} HTTP/1.1\r\nUser-Agent: Java/17\r\nHost: h:7675\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body

        connect = post("Type=connect", TunnelPacket(TunnelType.CONN_INIT, 0, 0, 0).encode())
        pull = b"GET /imqTunnel?Type=pull&ConnId=7&ServerName=h:imqbroker HTTP/1.1\r\n\r\n"
        pushes = [post("Type=push", body) for body in _tunnel_data_packets()]
        return [b"\x00" + connect, b"\x00" + pull, b"\x05" + connect + pull] + [
            b"\x00" + p for p in pushes
        ]

    def __call__(self, data: bytes) -> None:
        from broker.protocol.errors import ProtocolError
        from broker.protocol.http1 import REASONS, HttpError, RequestReader, response
        from broker.protocol.httptunnel import decode_packets, parse_request

        c = Cursor(data)
        mode = c.byte()
        stream = c.rest()
        reader = RequestReader(64 * 1024)
        got = 0
        try:
            for chunk in _reads(stream, mode * 3):
                for req in reader.feed(chunk):
                    got += len(req.body)
                    _check(
                        len(req.body) == int(req.headers.get("content-length") or 0),
                        "a body that is not its Content-Length",
                    )
                    req.keep_alive  # noqa: B018 - read as the service reads it
                    try:
                        treq = parse_request(req.query)
                    except ProtocolError:
                        continue
                    if treq.type in ("connect", "push"):
                        with contextlib.suppress(ProtocolError):
                            for p in decode_packets(req.body):
                                # What we write back keeps the window within a short.
                                p.winsize = max(min(p.winsize, 32767), 0)
                                _check(
                                    decode_packets(p.encode()) == [p], "{!r} does not round-trip", p
                                )
        except HttpError as exc:
            _check(exc.status in REASONS, "HTTP status {} has no reason phrase", exc.status)
            response(exc.status, str(exc).encode())
        _check(got <= len(stream), "bodies longer than the input")


class TunnelPacketTarget(Target):
    """One tunnel connection's reliable stream (broker/engine/tunnel.py) driven by a
    script: pushes of client packets, the engine's output, pulls, time passing, pauses
    and closes.

    Each step is an op byte and its operands: 0 push (u16 length, that many bytes of
    tunnel packets), 1 send (u16 length of engine output), 2 pull (u16 budget), 3 time
    passes (byte / 4 s) and the retransmission timer ticks, 4 take the inbox, 5 pause or
    resume reading, 6 the engine closes.  What it checks: the client gets the engine's
    bytes in order, once each in first transmissions, with consecutive sequence numbers
    and nothing after CONN_CLOSE; the engine gets the client's DATA in sequence order;
    every packet round-trips; windows stay within their bounds."""

    name = "tunnel-packets"
    modules = ("broker.protocol", "broker.engine.tunnel")

    def seeds(self) -> list[bytes]:
        from broker.protocol.httptunnel import TunnelPacket, TunnelType

        def push(body: bytes) -> bytes:
            return b"\x00" + struct.pack(">H", len(body)) + body

        out = []
        for body in _tunnel_data_packets():
            acks = TunnelPacket(TunnelType.ACK, 7, 0, 64).encode()
            script = (
                b"\x02\x40\x00"  # the CONN_INIT_ACK
                + b"\x02\x40\x00"  # the options
                + push(acks)
                + push(body)
                + b"\x04"
                + b"\x01\x00\x10"
                + bytes(16)
                + b"\x02\x40\x00"
                + b"\x03\xff\x03\xff\x02\x40\x00"
                + push(TunnelPacket(TunnelType.CONN_CLOSE, 7, 99, 64).encode())
                + b"\x06\x02\x40\x00"
            )
            out.append(script)
        return out

    def __call__(self, data: bytes) -> None:
        from broker.engine.tunnel import RX_WINDOW, TunnelConnection
        from broker.protocol.errors import ProtocolError
        from broker.protocol.httptunnel import (
            MAX_DATA,
            SEQ_MOD,
            TunnelType,
            decode_packets,
        )

        sequenced = (TunnelType.DATA, TunnelType.CONN_CLOSE, TunnelType.CONN_OPTION)
        c = Cursor(data)
        now = 1000.0
        conn = TunnelConnection(7, now)
        sent = bytearray()  # what the engine gave, to come out in order
        out_data = bytearray()  # DATA bodies in first transmissions
        first_seq = 0  # the next sequence number a first transmission must have
        closed_at: int | None = None
        pulls = 0
        got = bytearray()
        # seq -> the (type, body) pairs pushed with it (for the in-order check).
        pushed: dict[int, set[tuple[int, bytes]]] = {}
        while c.left:
            op = c.byte() % 7
            if op == 0:
                body = c.take(c.u16())
                try:
                    packets = decode_packets(body)
                except ProtocolError:
                    continue
                for p in packets:
                    if p.type in sequenced:
                        pushed.setdefault(p.seq, set()).add((p.type, p.body))
                    conn.receive(p, now)
            elif op == 1:
                chunk = c.take(c.u16())
                if not (conn.closing or conn.peer_closed):
                    sent += chunk
                conn.send(chunk)
            elif op == 2:
                pkts = conn.take_pull(now, c.u16())
                pulls += 1
                if pulls == 1:
                    _check(
                        [p.type for p in pkts] == [TunnelType.CONN_INIT_ACK],
                        "the first pull is not CONN_INIT_ACK alone: {}",
                        pkts,
                    )
                for p in pkts:
                    _check(p.conn_id == 7, "{!r} names another connection", p)
                    _check(decode_packets(p.encode()) == [p], "{!r} does not round-trip", p)
                    if p.type == TunnelType.ACK:
                        _check(0 <= p.winsize <= RX_WINDOW, "ACK window {}", p.winsize)
                        _check(p.seq == (conn.next_recv - 1) % SEQ_MOD, "ACK of the wrong seq")
                    if p.type not in sequenced:
                        continue
                    if _seq_new(p.seq, first_seq):
                        _check(p.seq == first_seq, "sequence {} sent before {}", p.seq, first_seq)
                        _check(closed_at is None, "{!r} sent after CONN_CLOSE", p)
                        first_seq = (first_seq + 1) % SEQ_MOD
                        if p.type == TunnelType.DATA:
                            _check(0 < len(p.body) <= MAX_DATA, "DATA of {} bytes", len(p.body))
                            out_data += p.body
                        elif p.type == TunnelType.CONN_CLOSE:
                            closed_at = p.seq
            elif op == 3:
                now += c.byte() / 4
                conn.tick(now)
                conn.expired(now)
            elif op == 4:
                got += conn.take_inbox()
            elif op == 5:
                conn.reading_paused = not conn.reading_paused
            else:
                conn.close()
            _check(len(conn._out_of_order) <= RX_WINDOW, "more held than the window")
            _check(conn.unacked_bytes >= 0, "negative unacknowledged bytes")
        if not conn.peer_closed:
            _check(bytes(sent).startswith(bytes(out_data)), "DATA sent is not the engine's bytes")
        conn.reading_paused = False
        got += conn.take_inbox()
        # The inbox is the client's DATA in sequence order, when each accepted sequence
        # number was pushed with one content only.
        expected = bytearray()
        for seq in range(conn.next_recv if conn.next_recv < 1 << 20 else 0):
            kinds = pushed.get(seq, set())
            if len(kinds) != 1:
                return
            ptype, body = next(iter(kinds))
            if ptype == TunnelType.DATA:
                expected += body
        _check(bytes(got) == bytes(expected), "the inbox is not the DATA in sequence order")


def _seq_new(seq: int, first: int) -> bool:
    """Whether ``seq`` was not sent before, when ``first`` is the next new one."""
    from broker.protocol.httptunnel import SEQ_MOD

    return (seq - first) % SEQ_MOD < SEQ_MOD // 2


# -- UMS bodies -----------------------------------------------------------------------

_SOAP = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/">'
    "<SOAP-ENV:Header>"
    '<ums:MessageHeader xmlns:ums="https://mq.java.net/ums" ums:id="1.0" ums:version="1.1">'
    '<ums:Service ums:service="{service}" ums:destination="q1" ums:domain="queue"'
    ' ums:sid="abc" ums:user="guest" ums:password="guest" ums:timeout="100"'
    ' ums:transacted="false"/>'
    "</ums:MessageHeader>"
    '<ums:JMSProperty xmlns:ums="https://mq.java.net/ums">'
    '<ums:StringProperty ums:pname="s" ums:pvalue="v"/>'
    '<ums:IntProperty ums:pname="i" ums:pvalue="7"/>'
    "</ums:JMSProperty>"
    "</SOAP-ENV:Header>"
    "<SOAP-ENV:Body><text>hello</text></SOAP-ENV:Body>"
    "</SOAP-ENV:Envelope>"
)


class UmsTarget(Target):
    """The UMS gateway's request bodies, up to where a request would reach the broker:
    /xml (SOAP 1.1, multipart/related with attachments; what a send stores must read
    back as the SOAP message a receive answers), /simple (query string and text body),
    and a stored BytesMessage read back by a receive.

    Mode byte % 3: 0 /xml (a Content-Type line, then the body), 1 /simple (a query
    line, a Content-Type line, the body), 2 a stored message's bytes."""

    name = "ums"
    modules = ("portal.ums", "broker.protocol")

    def seeds(self) -> list[bytes]:
        out = []
        for service in ("send", "receive", "login", "close"):
            env = _SOAP.format(service=service).encode()
            out.append(b"\x00text/xml; charset=utf-8\n" + env)
        env = _SOAP.format(service="send").encode()
        boundary = b"MIMEBoundary42"
        multi = (
            b"--" + boundary + b"\r\nContent-Type: text/xml; charset=utf-8\r\n"
            b"Content-Id: <root>\r\n\r\n" + env + b"\r\n--" + boundary + b"\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Id: <att1>\r\n"
            b"Content-Transfer-Encoding: base64\r\n\r\n"
            + base64.b64encode(b"attachment bytes")
            + b"\r\n--"
            + boundary
            + b"--\r\n"
        )
        out.append(
            b'\x00multipart/related; type="text/xml"; start="<root>"; boundary="'
            + boundary
            + b'"\n'
            + multi
        )
        out.append(
            b"\x01service=send&destination=q1&domain=queue&sid=abc&timeout=100\n"
            b"text/plain; charset=utf-8\nhello"
        )
        out.append(b"\x01service=receive&destination=t1&domain=topic&user=guest&password=guest\n\n")
        with contextlib.suppress(Exception):
            from portal.ums import soap

            req = soap.parse_request("text/xml", env)
            out.append(b"\x02" + req.jms_body())
        return out

    def __call__(self, data: bytes) -> None:
        from portal.ums import http, soap, transformer
        from portal.ums.services import UmsError, build_request

        c = Cursor(data)
        mode = c.byte() % 3
        if mode == 0:
            ctype = c.line().decode("latin-1")
            try:
                req = http.xml_request(ctype or None, c.rest())
            except (soap.SoapFault, UmsError):
                return
            if req.data is not None:
                # What a send stores, a receive gives back as a SOAP message.
                back = soap.transformed(req.data, {"service": "receive_reply"}, req.properties)
                _check(back is not None, "a stored SOAP message does not read back")
                transformer.decode(req.data)
        elif mode == 1:
            query = c.line()
            ctype = c.line().decode("latin-1") or None
            try:
                req = build_request(http.parse_query(query))
                http.read_simple_body(req, ctype, c.rest())
            except UmsError:
                return
        else:
            soap.transformed(c.rest(), {"service": "receive_reply", "destination": "q"})


class StompFrameTarget(Target):
    """The STOMP frame reader (broker/protocol/stomp.py): the mode byte picks the version
    and how reads are cut; each frame read is encoded again and must read back the same,
    and nothing but StompError may come out."""

    name = "stomp-frames"
    modules = ("broker.protocol.stomp",)

    def seeds(self) -> list[bytes]:
        from broker.protocol.stomp import encode_frame

        frames = [
            b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\nheart-beat:1000,1000\n\n\x00",
            encode_frame("SEND", [("destination", "/queue/a"), ("k", "a:b\\c")], b"x\x00y"),
            b"SEND\r\ndestination:/topic/t\r\nreceipt:7\r\n\r\nhello\x00\r\n\n",
            b"SUBSCRIBE\nid:0\ndestination:/queue/a\nack:client-individual\n\n\x00",
            b"ACK\nid:m-1\ntransaction:t\n\n\x00DISCONNECT\nreceipt:9\n\n\x00",
        ]
        return [bytes([m]) + f for m in (0, 1, 2, 5) for f in frames]

    def __call__(self, data: bytes) -> None:
        from broker.protocol.stomp import VERSIONS, FrameReader, StompError, encode_frame

        c = Cursor(data)
        mode = c.byte()
        version = VERSIONS[mode % 3]
        stream = c.rest()
        reader = FrameReader(version, max_frame=1 << 14, max_headers=64, max_header_line=1024)
        try:
            for chunk in _reads(stream, mode // 3):
                for f in reader.feed(chunk):
                    again = FrameReader(version).feed(
                        encode_frame(f.command, f.headers, f.body, version, content_length=False)
                    )
                    if version == "1.0" or f.command in ("CONNECT", "STOMP", "CONNECTED"):
                        # Unescaped versions cannot carry every value: the body is the check.
                        _check(
                            len(again) == 1 and again[0].body == f.body,
                            "{!r} does not round-trip",
                            f,
                        )
                    else:
                        want = f
                        if version == "1.1":
                            # 1.1 has no escape for CR: the writer makes it a space.
                            cr = [
                                (k.replace("\r", " "), v.replace("\r", " ")) for k, v in f.headers
                            ]
                            want = type(f)(f.command, cr, f.body)
                        _check(again == [want], "{!r} does not round-trip: {!r}", f, again)
        except StompError:
            pass


class JmxRmiTarget(Target):
    """The JMX RMI connector's engine (broker/engine/jmx.py over broker/protocol/jrmp.py):
    the mode byte picks how reads are cut and whether logins succeed; bad input must
    close that connection (a Close effect, nothing after it), never raise."""

    name = "jmx-rmi"
    modules = (
        "broker.protocol.jrmp",
        "broker.protocol.jmxser",
        "broker.engine.jmx",
        "broker.engine.jmx_values",
    )

    def seeds(self) -> list[bytes]:
        from broker.protocol import jmxser
        from broker.protocol.jrmp import encode_call, encode_handshake

        config = "com.sun.messaging.jms.server:type=Broker,subtype=Config"
        srv = self._server()
        calls = [
            encode_call(srv.server_id, -1089742558549201240, [jmxser.string_array(["a", "b"])]),
            encode_call(srv.server_id, -8081107751519807347, []),
            encode_call(
                srv.server_id, -1089783104982388203, [jmxser.object_name(config), "Port", None]
            ),
        ]
        return [
            bytes([m]) + encode_handshake("h", 0) + b"".join(calls) + b"\x52" for m in (0, 1, 7)
        ]

    _srv = None

    def _server(self):  # type: ignore[no-untyped-def]
        import tempfile
        from pathlib import Path

        from broker.engine.jmx import JmxServer
        from broker.engine.jmx_mbeans import Registry
        from broker.protocol.jrmp import ObjID
        from tests.test_jmx_rmi import in_process_broker

        if self._srv is None:
            broker = in_process_broker(Path(tempfile.mkdtemp(prefix="fuzz-jmx-")))
            self._srv = JmxServer(
                Registry(broker), broker, "127.0.0.1", 1, server_id=ObjID(77, 1, 2, 3)
            )
        return self._srv

    def __call__(self, data: bytes) -> None:
        from broker.engine.jmx import Authenticate, Close, JrmpSession

        c = Cursor(data)
        mode = c.byte()
        session = JrmpSession(self._server(), "127.0.0.1", 1)
        closed = False
        for chunk in _reads(c.rest(), mode // 2):
            pending = session.feed(chunk)
            while pending:
                effect = pending.pop(0)
                _check(not closed, "output after a close: {!r}", effect)
                if isinstance(effect, Close):
                    closed = True
                elif isinstance(effect, Authenticate):
                    pending += session.auth_result(effect, bool(mode & 1), "fuzz")
        self._server().clients.clear()


class WebSocketTarget(Target):
    """The WebSocket codec of the wsjms/wssjms services (broker/protocol/websocket.py):
    the mode byte cuts the reads; the upgrade, frames and whatever follows may raise only
    WebSocketError, and a refused connection gets an answer to send."""

    name = "websocket"
    modules = ("broker.protocol.websocket",)

    def seeds(self) -> list[bytes]:
        from wsproto import ConnectionType, WSConnection
        from wsproto.events import Ping, Request, TextMessage

        from broker.protocol.websocket import WebSocketServer

        c = WSConnection(ConnectionType.CLIENT)
        upgrade = c.send(Request(host="h", target="/wsjms/mqstomp", subprotocols=["v12.stomp"]))
        server = WebSocketServer("wsjms", 1 << 14)
        server.receive(upgrade)
        c.receive_data(server.take_outgoing())
        list(c.events())
        frames = c.send(TextMessage("CONNECT\n\n\x00")) + c.send(Ping(b"p"))
        return [bytes([m]) + upgrade + frames for m in (0, 1, 7)]

    def __call__(self, data: bytes) -> None:
        from broker.protocol.websocket import WebSocketError, WebSocketServer

        c = Cursor(data)
        mode = c.byte()
        server = WebSocketServer("wsjms", 1 << 14)
        try:
            for chunk in _reads(c.rest(), mode):
                server.receive(chunk)
                server.take_outgoing()
        except WebSocketError:
            _check(server.closed or not server.open, "an error left the connection open")


TARGETS: dict[str, type[Target]] = {
    t.name: t
    for t in (
        JmqPacketTarget,
        EngineTarget,
        GPacketTarget,
        LinkTarget,
        TunnelHttpTarget,
        TunnelPacketTarget,
        UmsTarget,
        StompFrameTarget,
        JmxRmiTarget,
        WebSocketTarget,
    )
}
