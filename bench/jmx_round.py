"""The broker's CPU for one JMX monitoring poll round, in process (issue 39's polling cost).

    .venv/bin/python bench/jmx_round.py                          # 5 x 50 rounds, CPU per round
    .venv/bin/python bench/jmx_round.py --profile /tmp/jmx.prof  # and a cProfile of them
    .venv/bin/python bench/jmx_round.py --destinations 20 --connections 10
    .venv/bin/python bench/jmx_round.py --traffic    # the counters move between rounds
    .venv/bin/python bench/jmx_round.py --traffic --backlog 5000  # messages wait in each queue
    valgrind --tool=callgrind --toggle-collect=starmap_next .venv/bin/python \
        bench/jmx_round.py --rounds 5 --repeat 1      # instructions: load does not move them

What tests/interop/java/JmxPoll.java asks each second, as JRMP calls fed to the engine
(broker/engine/jmx.py's JrmpSession, the JRMP codec and the Java serialisation both
ways): queryNames of ``com.sun.messaging.jms.server:*``, then getAttributes of every
MBean with every attribute its MBeanInfo declares.  The broker is not started: its router
holds the destinations, connections, consumers and producers the options ask for, so the
connection, destination and manager MBeans have something to read.  Prints the CPU time
(process_time) per round, the calls and reply bytes per round; no sockets, so it is what
the engine costs without the event loop's own share, and load on the machine hardly moves
it.  bench/jmx_poll.py measures the whole broker under the stock client's traffic.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

# The user repository's records are the portal's models.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()

from broker.config import BrokerConfig  # noqa: E402
from broker.engine.jmx import Authenticate, JmxServer, JrmpSession, Send  # noqa: E402
from broker.engine.jmx_mbeans import DOMAIN, Registry  # noqa: E402
from broker.engine.jmx_names import ObjectName  # noqa: E402
from broker.engine.jmx_replies import ReplyMemo  # noqa: E402
from broker.engine.jmx_stockinfo import kind_key, kinds  # noqa: E402
from broker.protocol import jmxser  # noqa: E402
from broker.protocol.javaser import JavaClass, JavaObject, ObjectStreamReader  # noqa: E402
from broker.protocol.jrmp import ObjID, encode_call, encode_handshake  # noqa: E402
from broker.protocol.types import DEST_QUEUE  # noqa: E402

NEW_CLIENT = -1089742558549201240
QUERY_NAMES = 9152567528369059802
GET_ATTRIBUTES = 6285293806596348999
# MarshalledObject(null): the query expression of queryNames(name, null).
MARSHALLED_NULL = JavaObject(
    JavaClass(
        "java.rmi.MarshalledObject",
        8988374069173025854,
        (("[", "objBytes", "[B"), ("[", "locBytes", "[B"), ("I", "hash", None)),
    ),
    {"objBytes": None, "locBytes": None, "hash": 13},
)


def loaded_broker(var: Path, destinations: int, connections: int) -> Any:
    """An unstarted broker whose router has ``destinations`` queues and ``connections``
    connections of its jms service (listed with admin as running), each with a session,
    a consumer and a producer on one of the queues."""
    from broker.engine import ConnectionEngine
    from broker.security.filerepo import FileUserRepository
    from broker.server.broker import Broker, Service

    var.mkdir(parents=True)
    (var / "passwd").write_text("")
    b: Any = Broker(
        BrokerConfig({"imq.varhome": str(var), "imq.accesscontrol.enabled": "false"}),
        FileUserRepository(var / "passwd"),
    )
    for i in range(destinations):
        b.router.create_destination(f"bench{i}", DEST_QUEUE)
    svc = Service("jms", "NORMAL", "tcp", None, 0, "basic", -1)
    # The services a started broker runs (the Service MBeans read their counters).
    b.services += [svc, Service("admin", "ADMIN", "tcp", None, 0, "basic", -1)]
    for i in range(connections):
        conn = ConnectionEngine(b, svc)
        conn.peer = f"127.0.0.1:{20000 + i}"
        conn.user = "guest"
        b.connections[conn.id] = conn
        svc.connections.add(conn)
        session = b.router.create_session(conn, 1)
        conn.sessions[session.id] = session
        if destinations:
            dest = f"bench{i % destinations}"
            b.router.add_consumer(session, dest, DEST_QUEUE)
            b.router.add_producer(session, dest, DEST_QUEUE)
    return b


def queue_backlog(broker: Any, per_queue: int) -> None:
    """``per_queue`` non-persistent 1 KiB messages waiting in each queue (its consumers'
    connections are not started), as a producer ahead of its consumer leaves them."""
    from broker.core.message import Message
    from broker.protocol.packet import build_packet, parse_packet
    from broker.protocol.types import FLAG_Q, PacketType

    now = int(time.time() * 1000)
    for name, dest in broker.router.queues.items():
        if not name.startswith("bench"):
            continue
        raw = build_packet(
            PacketType.BYTES_MESSAGE, body=bytes(1024), flags=FLAG_Q, fields={1: name}
        )
        for _ in range(per_queue):
            dest.publish(Message(parse_packet(raw), name, 0), now)


def login(server: JmxServer) -> tuple[JrmpSession, ObjID]:
    s = JrmpSession(server, "127.0.0.1", 4000)
    s.feed(encode_handshake("127.0.0.1", 0))
    (auth,) = s.feed(encode_call(server.server_id, NEW_CLIENT, [jmxser.string_array(["a", "b"])]))
    assert isinstance(auth, Authenticate)
    s.auth_result(auth, True, "")
    (conn,) = server.clients
    return s, conn


def round_calls(server: JmxServer, conn: ObjID) -> list[bytes]:
    """One poll round's calls as the JDK's client encodes them (the getAttributes calls
    for the MBeans there are now)."""
    pattern = jmxser.object_name(f"{DOMAIN}:*")
    calls = [encode_call(conn, QUERY_NAMES, [pattern, MARSHALLED_NULL, None])]
    table = kinds()
    for name in server.registry.query(ObjectName.parse(f"{DOMAIN}:*")):
        wanted = [a[0] for a in table[kind_key(name)].attributes]
        args = [jmxser.object_name(name.canonical), jmxser.string_array(wanted), None]
        calls.append(encode_call(conn, GET_ATTRIBUTES, args))
    return calls


def run_round(session: JrmpSession, calls: list[bytes]) -> int:
    """Feed one round's calls; the reply bytes."""
    sent = 0
    for call in calls:
        (reply,) = session.feed(call)
        assert isinstance(reply, Send) and reply.data[0] == 0x51, reply
        sent += len(reply.data)
    return sent


def traffic_round(broker: Any, session: JrmpSession, calls: list[bytes]) -> int:
    """:func:`run_round` after a second of traffic as the counters see it: every
    destination's and the jms service's message and byte counts move on, and the
    message memory with them."""
    from broker.core.message import BODIES

    for d in (*broker.router.queues.values(), *broker.router.topics.values()):
        d.msgs_in += 1000
        d.msgs_out += 1000
        d.msg_bytes_in += 100_000
        d.msg_bytes_out += 100_000
        d.peak_msgs += 1
    for svc in broker.services[:1]:  # the jms service's traffic counters
        m = svc.metrics
        m.messages_in += 1000
        m.messages_out += 1000
        m.packets_in += 2000
        m.packets_out += 2000
        m.message_bytes_in += 100_000
        m.message_bytes_out += 100_000
        m.packet_bytes_in += 150_000
        m.packet_bytes_out += 150_000
    BODIES.bytes += 1000
    return run_round(session, calls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5, help="times the rounds; the best counts")
    ap.add_argument("--destinations", type=int, default=4)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument(
        "--backlog", type=int, default=0, help="messages waiting in each queue (default none)"
    )
    ap.add_argument("--profile", type=Path, help="write a cProfile of the rounds here")
    ap.add_argument("--check", action="store_true", help="decode every reply (slow)")
    ap.add_argument(
        "--changing",
        action="store_true",
        help="encode every answer, as if every value changed between polls (no reply memo)",
    )
    ap.add_argument(
        "--traffic",
        action="store_true",
        help="as under traffic: the counters move on before each round (the answers of the "
        "destination, manager and JVM MBeans change, the rest do not)",
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jmxround-"))
    try:
        broker = loaded_broker(tmp / "var", args.destinations, args.connections)
        queue_backlog(broker, args.backlog)
        server = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
        if args.changing:
            server.replies = ReplyMemo(limit=0)
        session, conn = login(server)
        calls = round_calls(server, conn)
        if args.check:
            for call in calls:
                (reply,) = session.feed(call)
                assert isinstance(reply, Send)
                ObjectStreamReader(reply.data[1:]).primitive(15)
        sent = run_round(session, calls)  # warm: the first round builds what is kept
        prof = cProfile.Profile(time.process_time) if args.profile else None
        costs = []
        for _ in range(args.repeat):
            start = time.process_time()
            if prof is not None:
                prof.enable()
            # Through starmap: under valgrind --tool=callgrind --toggle-collect=starmap_next
            # only the rounds are counted (nothing else here calls starmap).
            if args.traffic:
                rounds = [(broker, session, calls)] * args.rounds
                list(itertools.starmap(traffic_round, rounds))
            else:
                list(itertools.starmap(run_round, [(session, calls)] * args.rounds))
            if prof is not None:
                prof.disable()
            costs.append((time.process_time() - start) / args.rounds * 1000)
        if prof is not None:
            prof.dump_stats(args.profile)
        print(
            f"{len(calls)} calls per round ({len(calls) - 1} MBeans), {sent:,} reply bytes: "
            f"{min(costs):.2f} ms CPU per round (best of {args.repeat} x {args.rounds} rounds; "
            f"median {statistics.median(costs):.2f})"
            + (" under cProfile" if prof is not None else "")
            + (", every answer encoded" if args.changing else "")
            + (", counters moving" if args.traffic else "")
            + (f", {args.backlog:,} messages waiting per queue" if args.backlog else "")
            + f"; load {os.getloadavg()[0]:.2f}"
        )
        broker.executor.shutdown(wait=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
