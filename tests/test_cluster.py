"""A conventional cluster of three real broker processes on loopback (issue 16)."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest

from broker.protocol import gpacket as gp
from broker.protocol.brokerinfo import BrokerInfo
from broker.protocol.packet import Packet
from broker.protocol.types import PacketType
from openmq_client import AckMode, JMSException, Queue, TextMessage, Topic
from openmq_client.sync import connect
from tests.cluster_procs import links_up, portmapper_table, start_cluster, start_member, wait_for
from tests.manage_fork import run_manage
from tests.vectors import vector
from tests.wire import Peer

pytestmark = pytest.mark.timeout(300)


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# A link has this long to finish its handshake (default 10 s): the wait of
# test_peer_that_never_answers_is_dropped.  The cluster's own links take milliseconds; one
# that took longer on a loaded machine at the start would be dialled again.
HANDSHAKE_TIMEOUT = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    brokers = start_cluster(
        tmp_path_factory.mktemp("cluster"), 3, f"imq.cluster.handshake.timeout={HANDSHAKE_TIMEOUT}"
    )
    yield brokers
    for b in brokers:
        b.stop()


def conn(b, **kw):
    return connect(b.host, b.portmapper_port, request_timeout=20, **kw)


def subscribed(producer, subs) -> None:
    """Publish probes until every subscriber got one (its interest reached the producer's
    broker), then drain the probes: a topic keeps nothing for subscribers it does not know.
    The drain ends at a last message every subscriber gets after its probes (one
    producer's messages reach a subscriber in order), not after a quiet spell."""
    pending = set(range(len(subs)))
    deadline = time.monotonic() + 20
    while pending and time.monotonic() < deadline:
        producer.send(TextMessage("probe"))
        for i in list(pending):
            if subs[i].receive(0.2) is not None:
                pending.discard(i)
    assert not pending, "a subscription never reached the producer's broker"
    producer.send(TextMessage("probes end"))
    for sub in subs:
        while (m := sub.receive(10)) is not None and m.text != "probes end":
            assert m.text == "probe"
        assert m is not None, "the end of the probes never came"


def texts_of(consumers, total: int, timeout: float = 20) -> list[str]:
    """The texts ``consumers`` get until ``total`` have come (or ``timeout`` passes).
    What each has buffered is taken without waiting; only when none had anything does
    the loop wait a little on each (waiting 0.2 s on an idle consumer for each message
    cost seconds when the broker gave most of them to the other)."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < total and time.monotonic() < deadline:
        before = len(got)
        for k in consumers:
            while (m := k.receive_no_wait()) is not None:
                got.append(m.text)
        if len(got) == before:
            for k in consumers:
                if (m := k.receive(0.05)) is not None:
                    got.append(m.text)
    return got


def cluster_port(b) -> int:
    for line in portmapper_table(b).splitlines():
        if " CLUSTER " in f" {line} " and line.startswith("cluster "):
            return int(line.split()[3])
    raise AssertionError("no cluster service in the port mapper")


def test_port_mapper_publishes_the_cluster_service(cluster):
    for b in cluster:
        assert cluster_port(b) > 0
        assert links_up(b) == 2


def test_queue_message_produced_on_a_is_consumed_on_b(cluster):
    a, b, _c = cluster
    q = Queue(name("q"))
    with conn(b) as cb, conn(a) as ca:
        cons = cb.create_session().create_consumer(q)
        cb.start()
        # No wait for the interest to reach A: A's queue keeps the messages until it does.
        prod = ca.create_session().create_producer(q)
        for i in range(20):
            prod.send(TextMessage(f"m{i}"))
        got = [cons.receive(10) for _ in range(20)]
        assert [m.text for m in got if m is not None] == [f"m{i}" for i in range(20)]


def test_topic_message_goes_to_every_subscriber_in_the_cluster(cluster):
    a, b, c = cluster
    t = Topic(name("t"))
    with conn(a) as ca, conn(b) as cb, conn(c) as cc:
        subs = [x.create_session().create_consumer(t) for x in (ca, cb, cc)]
        for x in (ca, cb, cc):
            x.start()
        s = ca.create_session()
        p = s.create_producer(t)
        subscribed(p, subs)
        for i in range(5):
            p.send(TextMessage(f"t{i}"))
        for sub in subs:
            assert [sub.receive(10).text for _ in range(5)] == [f"t{i}" for i in range(5)]
            assert sub.receive(0.3) is None


def test_queue_has_one_consumer_cluster_wide(cluster):
    a, b, c = cluster
    q = Queue(name("q1"))
    with conn(a) as ca, conn(b) as cb, conn(c) as cc:
        cons = [x.create_session().create_consumer(q) for x in (cb, cc)]
        for x in (cb, cc):
            x.start()
        s = ca.create_session()
        p = s.create_producer(q)
        for i in range(30):
            p.send(TextMessage(str(i)))
        got = texts_of(cons, 30)
        assert sorted(got, key=int) == [str(i) for i in range(30)]
        assert all(k.receive(0.3) is None for k in cons)


def test_client_ack_goes_home_and_unacked_come_back_when_the_consumer_closes(cluster):
    a, b, _c = cluster
    q = Queue(name("qa"))
    with conn(a) as ca, conn(b) as cb:
        s = cb.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        k = s.create_consumer(q)
        cb.start()
        sa = ca.create_session()
        p = sa.create_producer(q)
        for i in range(3):
            p.send(TextMessage(str(i)))
        first = [k.receive(10) for _ in range(3)]
        assert [m.text for m in first] == ["0", "1", "2"]
        k.close()  # never acknowledged: all three go back to A's queue
        k2 = ca.create_session().create_consumer(q)
        ca.start()
        again = [k2.receive(10) for _ in range(3)]
        assert sorted(m.text for m in again) == ["0", "1", "2"]
        assert all(m.redelivered for m in again)


def test_client_id_is_unique_across_the_cluster(cluster):
    a, b, _c = cluster
    cid = name("cid")
    with conn(a, client_id=cid):
        with pytest.raises(JMSException):
            conn(b, client_id=cid)
    # Released with the connection: B may have it now (once A has seen it close).
    got = []

    def try_b() -> bool:
        try:
            got.append(conn(b, client_id=cid))
        except JMSException:
            return False
        return True

    wait_for(try_b, 20, "client ID free again")
    with got[0] as cb:
        assert cb.client_id == cid


def test_hello_reply_lists_the_cluster_brokers(cluster):
    a = cluster[0]
    p = Peer(a.host, a.jms_port)
    p.send(vector("hello.hex"))
    reply = p.expect(PacketType.HELLO_REPLY)
    p.close()
    listed = reply.properties["JMQBrokerList"].split(",")
    assert sorted(listed) == sorted(f"mq://127.0.0.1:{b.portmapper_port}/" for b in cluster)


# -- bad input on the cluster port ------------------------------------------------------


# The match properties a stock broker with default settings sends (and ours too).
STOCK_MATCH = {
    "imq.persist.file.newTxnLog.enabled": "true",
    "imq.useFileLockForLockFile.enabled": "true",
    "imq.autocreate.queue": "true",
    "imq.autocreate.topic": "true",
}


def _link_init(host: str, instance: str, port: int, version: int = 500) -> bytes:
    body = gp.LinkInit(
        version,
        host,
        instance,
        port,
        match=dict(STOCK_MATCH),
        session_uid=12345,
    ).encode()
    return gp.encode_link(gp.LinkPacket(gp.LINK_INIT, body))


def _dropped(b, payload: bytes, *, wait_close: float = 15) -> None:
    s = socket.create_connection((b.host, cluster_port(b)), timeout=wait_close)
    try:
        if payload:
            s.sendall(payload)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    finally:
        s.close()


_BAD_LINK_INPUT = [
    ("random bytes", os.urandom(64).replace(b"\x00", b"\x01"), "unknown packet version"),
    (
        "wrong GPacket version",
        struct.pack(">hh", 351, 1) + b"\0" * 40,
        "unknown packet version",
    ),
    ("wrong cluster version", None, "cluster protocol version 300"),
    ("truncated", None, "middle of a packet"),
    ("claims this broker", None, "claims to be this broker"),
    ("not in the list", None, "not in imq.cluster.brokerlist"),
    ("claims a linked broker", None, "already linked"),
]


# Ids by case name: random bytes in an id differ between pytest-xdist's workers.
@pytest.mark.parametrize(
    "case,payload,reason", _BAD_LINK_INPUT, ids=[c[0] for c in _BAD_LINK_INPUT]
)
def test_bad_input_on_the_cluster_port_drops_the_link(cluster, case, payload, reason):
    a, b, c = cluster
    if case == "wrong cluster version":
        payload = _link_init("127.0.0.1", "X", 1, version=300)
    elif case == "truncated":
        payload = _link_init("127.0.0.1", "X", 1)[:20]
    elif case == "claims this broker":
        payload = _link_init("127.0.0.1", "A", a.portmapper_port)
    elif case == "not in the list":
        payload = _link_init("127.0.0.1", "Z", 1)
    elif case == "claims a linked broker":
        payload = _link_init("127.0.0.1", "B", b.portmapper_port)
    before = a.log_text().count(reason)
    if case == "truncated":
        s = socket.create_connection((a.host, cluster_port(a)), timeout=5)
        s.sendall(payload)
        time.sleep(0.3)
        s.close()
    else:
        _dropped(a, payload)
    wait_for(lambda: a.log_text().count(reason) == before + 1, 20, reason)
    # Still serving: the real links are up and a client goes through.
    assert links_up(a) == 2
    with conn(a) as ca:
        s = ca.create_session()
        s.create_producer(Queue(name("alive"))).send(TextMessage("x"))


def test_peer_that_never_answers_is_dropped(cluster):
    a = cluster[0]
    before = a.log_text().count(f"no complete handshake within {HANDSHAKE_TIMEOUT} s")
    s = socket.create_connection((a.host, cluster_port(a)), timeout=30)
    try:
        wait_for(
            lambda: (
                a.log_text().count(f"no complete handshake within {HANDSHAKE_TIMEOUT} s")
                == before + 1
            ),
            30,
            "timeout",
        )
    finally:
        s.close()
    assert links_up(a) == 2


# -- a broker going away ---------------------------------------------------------------------


def test_killed_consumer_broker_messages_redelivered_and_link_comes_back(tmp_path: Path):
    a, b = start_cluster(tmp_path, 2, names=("A", "B"))
    try:
        q = Queue(name("qk"))
        cb = conn(b)
        s = cb.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        k = s.create_consumer(q)
        cb.start()
        with conn(a) as ca:
            sa = ca.create_session()
            p = sa.create_producer(q)
            for i in range(5):
                p.send(TextMessage(str(i)), persistent=True)
            assert [k.receive(10).text for _ in range(5)] == [str(i) for i in range(5)]
            b.proc.send_signal(signal.SIGKILL)
            b.proc.wait(10)
            wait_for(lambda: "B@127.0.0.1" in a.log_text() and " lost: " in a.log_text(), 20)
            # A keeps serving its own clients and still has all five (never acknowledged).
            k2 = ca.create_session().create_consumer(q)
            ca.start()
            again = [k2.receive(10) for _ in range(5)]
            assert sorted(m.text for m in again) == [str(i) for i in range(5)]
            assert all(m.redelivered for m in again)
        # B restarts on the same ports: the link is re-established.
        b2 = start_member(b.varhome.parent, b.extra["brokerlist"], b.portmapper_port, "B")
        try:
            wait_for(lambda: links_up(b2) >= 1, 30, "link after restart")
            wait_for(lambda: links_up(a) == 1, 30, "A relinked")
        finally:
            b2.stop()
        left = f"B@127.0.0.1:{b.portmapper_port} left the cluster"
        wait_for(lambda: left in a.log_text(), 20, "GOODBYE logged")
    finally:
        a.stop()
        b.stop()


# -- administration ----------------------------------------------------------------------


def test_imqcmd_list_and_query_bkr_show_the_cluster(cluster, tmp_path):
    from tests.test_imqcmd import run_imqcmd

    a, b, c = cluster
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    r = run_imqcmd(b, "list", "bkr", passfile=passfile)
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = {
        line.split()[0]: line.split()[1:]
        for line in r.stdout.splitlines()
        if line.startswith("127.0.0.1:")
    }
    assert rows == {f"127.0.0.1:{x.portmapper_port}": [x.instance, "OPERATING"] for x in (a, b, c)}
    r = run_imqcmd(b, "query", "bkr", passfile=passfile)
    assert r.returncode == 0, (r.stdout, r.stderr)
    active = next(
        line for line in r.stdout.splitlines() if line.startswith("Cluster Broker List (active)")
    )
    for x in (a, b, c):
        assert f"127.0.0.1:{x.portmapper_port}" in active


def _admin(b, tmp_path, *args):
    from tests.test_imqcmd import run_imqcmd

    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    r = run_imqcmd(b, *args, passfile=passfile)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def test_admin_destinations_are_created_and_destroyed_cluster_wide(cluster, tmp_path):
    a, b, c = cluster
    q = name("adminq")
    _admin(a, tmp_path, "create", "dst", "-t", "q", "-n", q, "-o", "maxNumMsgs=77")

    def listed(x) -> bool:
        return q in _admin(x, tmp_path, "list", "dst", "-t", "q")

    wait_for(lambda: listed(b) and listed(c), 30, "destination on B and C")
    out = _admin(c, tmp_path, "query", "dst", "-t", "q", "-n", q)
    assert "77" in next(line for line in out.splitlines() if "Max Number of Messages" in line)
    _admin(b, tmp_path, "destroy", "dst", "-t", "q", "-n", q)
    wait_for(lambda: not listed(a) and not listed(c), 30, "destination gone on A and C")


def test_durable_subscriber_on_another_broker_gets_what_was_published_while_away(cluster, tmp_path):
    a, b, _c = cluster
    # Looked for in imqcmd's table: a name the random hex of the topic and client ID
    # cannot contain ("d1" is in one run in twenty of them).
    dname = "away-sub"
    t = Topic(name("dt"))
    cid = name("dcid")
    with conn(b, client_id=cid) as cb:
        s = cb.create_session()
        sub = s.create_durable_subscriber(t, dname)
        cb.start()
        with conn(a) as ca:
            p = ca.create_session().create_producer(t)
            subscribed(p, [sub])
            sub.close()  # the durable stays on A while its consumer is away
            for i in range(5):
                p.send(TextMessage(f"d{i}"), persistent=True)
        sub = s.create_durable_subscriber(t, dname)
        assert [sub.receive(10).text for _ in range(5)] == [f"d{i}" for i in range(5)]
        assert sub.receive(0.3) is None
        assert dname in _admin(a, tmp_path, "list", "dur", "-d", t.name)
        sub.close()
        s.unsubscribe(dname)
    # The unsubscribe reaches A: its copy of the durable goes too.
    wait_for(lambda: dname not in _admin(a, tmp_path, "list", "dur", "-d", t.name), 30, "unsub")


# -- the master broker -----------------------------------------------------------------------


def test_master_broker_change_record(tmp_path):
    """A is the master: changes made on B are recorded by A; with A down they are refused
    (and everything else goes on); C, down while a change was made, gets it from A's
    record when it comes back; runbroker -backup / -restore copy the record."""
    from broker.launcher import free_port

    pms = [free_port() for _ in range(3)]
    master = f"imq.cluster.masterbroker=127.0.0.1:{pms[0]}"
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    a, b, c = (
        start_member(tmp_path / n, brokerlist, pm, n, master)
        for n, pm in zip(("A", "B", "C"), pms, strict=True)
    )
    try:
        wait_for(lambda: all(links_up(x) == 2 for x in (a, b, c)), 30, "links")
        q1 = name("mq1")
        _admin(b, tmp_path, "create", "dst", "-t", "q", "-n", q1)
        record = a.varhome / "instances" / "A" / "cluster" / "changerecord"
        wait_for(lambda: record.exists() and q1.encode() in record.read_bytes(), 20, "recorded")

        # Master down: recorded changes refused with a clear error, the rest goes on.
        a.stop()
        wait_for(lambda: links_up(b) == 1, 20, "B sees A gone")
        from tests.test_imqcmd import run_imqcmd

        passfile = tmp_path / "passfile"
        r = run_imqcmd(b, "create", "dst", "-t", "q", "-n", name("refused"), passfile=passfile)
        assert r.returncode != 0 and "master broker" in r.stderr, (r.stdout, r.stderr)
        with conn(b, client_id=name("mcid")) as cb:
            s = cb.create_session()
            with pytest.raises(JMSException, match="master broker"):
                s.create_durable_subscriber(Topic(name("mt")), "dur")
            q = Queue(name("plain"))
            s.create_producer(q).send(TextMessage("still works"))
            cb.start()
            assert s.create_consumer(q).receive(10).text == "still works"

        # Master back: C is down while B records a change; C learns it from A on return.
        a2 = start_member(a.varhome.parent, brokerlist, pms[0], "A", master)
        try:
            c.stop()
            wait_for(lambda: links_up(b) == 1 and links_up(a2) == 1, 30, "A back, C gone")
            q2 = name("mq2")
            _admin(b, tmp_path, "create", "dst", "-t", "q", "-n", q2)
            wait_for(lambda: q2.encode() in record.read_bytes(), 20, "recorded by A")
            c2 = start_member(c.varhome.parent, brokerlist, pms[2], "C", master)
            try:
                wait_for(lambda: "synchronised with master broker" in c2.log_text(), 30, "sync")
                listed = _admin(c2, tmp_path, "list", "dst", "-t", "q")
                assert q1 in listed and q2 in listed
            finally:
                c2.stop()
        finally:
            a2.stop()
        # Backup and restore of the (stopped) master's record.
        backup = tmp_path / "record.backup"
        env = a.extra["env"]
        run = ["runbroker", "-name", "A", "-varhome", str(a.varhome)]
        done = run_manage([*run, "-backup", str(backup)], env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "backed up 2 change record(s)" in done.stdout
        record.write_bytes(b"")
        done = run_manage([*run, "-restore", str(backup)], env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert record.read_bytes() == backup.read_bytes()
        backup.write_bytes(b"garbage")
        done = run_manage([*run, "-restore", str(backup)], env=env, timeout=120)
        assert done.returncode != 0 and "not a change record" in done.stderr
    finally:
        for x in (a, b, c):
            x.stop()


def test_sigkill_under_load_loses_nothing_acknowledged(tmp_path: Path):
    """A producer on A sends persistent messages without pause; the consumer is on B.  B is
    killed with SIGKILL midway; the consumer reconnects to A (the address HELLO_REPLY's
    JMQBrokerList gave it) and goes on.  Every message whose send was acknowledged is
    received; a message seen twice is one B had not acknowledged home, flagged redelivered."""
    import threading

    a, b = start_cluster(tmp_path, 2, names=("A", "B"))
    try:
        q = Queue(name("load"))
        total = 1500
        sent: list[str] = []
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                with conn(a) as ca:
                    p = ca.create_session().create_producer(q)
                    for i in range(total):
                        p.send(TextMessage(str(i)), persistent=True)
                        sent.append(str(i))
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        cb = conn(b)
        k = cb.create_session().create_consumer(q)
        cb.start()
        producer = threading.Thread(target=produce)
        producer.start()
        received: list[tuple[str, bool]] = []
        while len(received) < total // 3:
            m = k.receive(20)
            assert m is not None, "no message from B"
            received.append((m.text, m.redelivered))
        listed = str(cb.async_connection.hello_reply["JMQBrokerList"]).split(",")
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(10)
        try:
            while (m := k.receive(2)) is not None:  # what B's client still had
                received.append((m.text, m.redelivered))
        except JMSException:
            pass  # it noticed B is gone
        try:
            cb.close()
        except JMSException:
            pass
        # Fail over to the other broker the list named.
        other = [x for x in listed if x != f"mq://127.0.0.1:{b.portmapper_port}/"]
        assert other == [f"mq://127.0.0.1:{a.portmapper_port}/"]
        with conn(a) as ca:
            k2 = ca.create_session().create_consumer(q)
            ca.start()
            producer.join(120)
            assert not errors, errors
            while len({t for t, _ in received}) < total:
                m = k2.receive(20)
                assert m is not None, f"{total - len({t for t, _ in received})} never arrived"
                received.append((m.text, m.redelivered))
        assert sorted({t for t, _ in received}, key=int) == sent
        seen: set[str] = set()
        for text, redelivered in received:
            assert text not in seen or redelivered, f"{text} delivered twice, not redelivered"
            seen.add(text)
        print(f"sent {len(sent)}, received {len(received)} ({len(received) - total} again)")
    finally:
        a.stop()
        b.stop()


def test_request_reply_across_brokers_with_a_temporary_queue(cluster):
    a, b, _c = cluster
    service_q = Queue(name("svc"))
    with conn(a) as ca, conn(b) as cb:
        # The requester on B with its temporary reply queue; the service on A.
        sb = cb.create_session()
        reply_q = sb.create_temporary_queue()
        replies = sb.create_consumer(reply_q)
        cb.start()
        sa = ca.create_session()
        requests = sa.create_consumer(service_q)
        ca.start()
        sb.create_producer(service_q).send(TextMessage("ping", reply_to=reply_q))
        req = requests.receive(10)
        assert req is not None and req.text == "ping"
        # A knows B's temporary queue from its interest (sent on the link before the
        # request was): the reply goes to B.
        sa.create_producer(req.reply_to).send(TextMessage("pong"))
        got = replies.receive(10)
        assert got is not None and got.text == "pong"
        assert temporary_names(a) >= {reply_q.name}
    # A forgets B's temporary queue with its consumer: the name (the client's address,
    # local port and a counter) may come again from a later connection to A, which a
    # leftover copy owned by B's closed connection would refuse (TEMP_NOT_ALLOWED).
    wait_for(lambda: reply_q.name not in temporary_names(a), 15, "A to drop B's temporary queue")


def temporary_names(b) -> set[str]:
    """The temporary destinations ``b`` lists."""
    import asyncio

    from broker.admintools.client import AdminClient

    async def ask() -> set[str]:
        admin = await AdminClient.open(b.host, b.portmapper_port)
        try:
            rows, _ = await admin.destinations_page(limit=1000, temporary=True)
        finally:
            await admin.close()
        return {r["name"] for r in rows if str(r.get("name", "")).startswith("temporary_")}

    return asyncio.run(ask())


# -- the protocol seen from a peer ---------------------------------------------------------


class FakePeer:
    """A test socket that links to a broker as the broker list's other member would."""

    def __init__(self, target, host: str, port: int, instance: str) -> None:
        self.me = gp.BrokerAddress(host, instance, port)
        self.sock = socket.create_connection((target.host, cluster_port(target)), timeout=15)
        self.reader = gp.GPacketReader()
        self.pending: list = []
        init = gp.LinkInit(
            500,
            host,
            instance,
            port,
            match=dict(STOCK_MATCH),
            session_uid=4242,
        )
        body = BrokerInfo(host, instance, port, 4242, 0).encode()
        info = gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, body))
        self.sock.sendall(gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode())) + info)
        assert isinstance(self.recv(), gp.LinkPacket)  # its LINK_INIT
        assert isinstance(self.recv(), gp.LinkPacket)  # its BROKER_INFO
        self.send(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 0}))
        assert self.recv().type == gp.G_BROKER_INFO_REPLY

    def send(self, pkt: gp.GPacket) -> None:
        self.sock.sendall(gp.encode(pkt))

    def recv(self):
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the broker")
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def until(self, ptype: int) -> tuple[object, list]:
        """Packets up to the first of ``ptype``: (that packet, the others before it)."""
        before = []
        while True:
            pkt = self.recv()
            if isinstance(pkt, gp.GPacket) and pkt.type == ptype:
                return pkt, before
            before.append(pkt)

    def barrier(self) -> list:
        """PING and wait for its reply: what the broker sent before it."""
        self.send(gp.GPacket(gp.G_PING, {"X": 1}, flags=gp.A_BIT))
        return self.until(gp.G_PING_REPLY)[1]

    def interest(self, queue: str, consumer_id: int) -> gp.ConsumerUID:
        uid = gp.ConsumerUID(consumer_id, 1, self.me)
        w = gp.BodyWriter().int64(gp.INTEREST_RECORD_VERSION).utf(queue).boolean(True)
        uid.write(w)
        w.boolean(False).boolean(False).boolean(False).boolean(True).boolean(False).boolean(True)
        w.boolean(False).int32(0).boolean(False).boolean(False)
        props = {"C": 1, f"{consumer_id}:prefetch": 10}
        self.send(gp.GPacket(gp.G_NEW_INTEREST, props, w.bytes()))
        return uid


def test_flow_control_acks_and_goodbye_seen_from_a_peer(tmp_path: Path):
    from broker.launcher import free_port

    pms = [free_port(), free_port()]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    # The fake peer says nothing while imqcmd runs (seconds on a loaded machine): pings
    # far apart, so A does not drop it for silence (3 intervals) before its GOODBYE.
    a = start_member(tmp_path / "A", brokerlist, pms[0], "A", "imq.cluster.ping.interval=60")
    try:
        peer = FakePeer(a, "127.0.0.1", pms[1], "B")
        wait_for(lambda: links_up(a) == 1, 20, "link")
        q = name("fq")
        uid = peer.interest(q, 7)
        with conn(a) as ca:
            p = ca.create_session().create_producer(Queue(q))
            p.send(TextMessage("one"), persistent=True)
            data, _ = peer.until(gp.G_MESSAGE_DATA)
            r = gp.BodyReader(data.payload)
            assert gp.ConsumerUID.read(r) == uid
            key = Packet(r.rest()).sysmsgid
            # Flow stopped: nothing more comes until RESUME.
            peer.send(gp.GPacket(gp.G_STOP_MESSAGE_FLOW, {}))
            peer.barrier()
            p.send(TextMessage("two"), persistent=True)
            assert not [x for x in peer.barrier() if getattr(x, "type", 0) == gp.G_MESSAGE_DATA]
            peer.send(gp.GPacket(gp.G_RESUME_MESSAGE_FLOW, {}))
            assert peer.until(gp.G_MESSAGE_DATA)[0] is not None
            # The first one acknowledged home: A's queue holds one message, not two.
            w = gp.BodyWriter().raw(key)
            uid.write(w)
            peer.send(gp.GPacket(gp.G_MESSAGE_ACK, {"T": gp.ACK_ACKNOWLEDGED, "C": 1}, w.bytes()))
            peer.barrier()
            out = _admin(a, tmp_path, "query", "dst", "-t", "q", "-n", q)
            actual = next(li for li in out.splitlines() if li.strip().startswith("Actual"))
            assert actual.split()[-1] == "1", out
        peer.send(gp.GPacket(gp.G_GOODBYE, {}))
        peer.until(gp.G_GOODBYE_REPLY)
        # ... and closes the link, as a stock broker leaving waits for it to.
        peer.sock.settimeout(20)
        with pytest.raises(ConnectionError):
            peer.recv()
        peer.sock.close()
        left = f"B@127.0.0.1:{pms[1]} left the cluster"
        wait_for(lambda: left in a.log_text(), 20, "bye")
        # A bad interest record drops the link with its reason; A goes on.
        peer = FakePeer(a, "127.0.0.1", pms[1], "B")
        peer.send(gp.GPacket(gp.G_NEW_INTEREST, {"C": 1}, b"\x00" * 12))
        wait_for(lambda: "interest record version" in a.log_text(), 20, "dropped")
        peer.sock.close()
    finally:
        a.stop()


def test_local_delivery_preferred_keeps_messages_on_the_producers_broker(cluster, tmp_path):
    a, b, _c = cluster
    q = name("local")
    _admin(a, tmp_path, "create", "dst", "-t", "q", "-n", q, "-o", "localDeliveryPreferred=true")
    wait_for(lambda: q in _admin(b, tmp_path, "list", "dst", "-t", "q"), 30, "propagated")
    with conn(a) as ca, conn(b) as cb:
        remote = cb.create_session().create_consumer(Queue(q))
        cb.start()
        local = ca.create_session().create_consumer(Queue(q))
        ca.start()
        p = ca.create_session().create_producer(Queue(q))
        for i in range(20):
            p.send(TextMessage(str(i)))
        assert [local.receive(10).text for _ in range(20)] == [str(i) for i in range(20)]
        assert remote.receive(1) is None


@pytest.mark.parametrize("kind", ["jms", "jmqshare"])
def test_shared_subscription_spans_brokers_each_message_once(cluster, kind):
    """A JMS 2.0 shared subscription, or OpenMQ's JMQShare one (one client ID shared by
    connections on two brokers, which a third broker refuses to an unshared one)."""
    a, b, c = cluster
    t = Topic(name("st"))
    shared = name("shr")
    opts: dict = {}
    if kind == "jmqshare":
        opts = dict(
            client_id=shared, enable_shared_client_id=True, enable_shared_subscriptions=True
        )
    with conn(a, **opts) as ca, conn(b, **opts) as cb:
        if kind == "jms":
            on_a = ca.create_session().create_shared_consumer(t, shared)
            on_b = cb.create_session().create_shared_consumer(t, shared)
        else:
            on_a = ca.create_session().create_consumer(t)
            on_b = cb.create_session().create_consumer(t)
            with pytest.raises(JMSException):
                conn(c, client_id=shared)
        ca.start()
        cb.start()
        p = ca.create_session().create_producer(t)
        # Probes until one reaches B's consumer through A's shared subscription.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            p.send(TextMessage("probe"))
            if on_b.receive(0.2) is not None:
                break
        else:
            raise AssertionError("B's shared consumer never joined")
        for k in (on_a, on_b):
            while (m := k.receive(0.3)) is not None:
                assert m.text == "probe"
        for i in range(40):
            p.send(TextMessage(str(i)))
        got = texts_of([on_a, on_b], 40)
        assert sorted(got, key=int) == [str(i) for i in range(40)]
        assert on_a.receive(0.3) is None and on_b.receive(0.3) is None


def test_ssl_cluster_links(tmp_path: Path):
    """imq.cluster.transport=ssl: the brokers share one key pair (imqkeytool, copied) and
    link over TLS; a message still crosses; a plain TCP peer gets nowhere."""
    import shutil

    from broker.launcher import free_port

    pms = [free_port(), free_port()]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    password = "cluster-keystore"
    etc = {n: tmp_path / n / "var" / "instances" / n / "etc" for n in ("A", "B")}
    tool_pass = tmp_path / "keytool.pass"
    tool_pass.write_text(f"imq.keystore.password={password}\n")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'kt.sqlite3'}",
        "IMQ_VARHOME": str(tmp_path / "A" / "var"),
    }
    made = run_manage(
        [
            "imqkeytool",
            "-broker",
            "-name",
            "A",
            "-dname",
            "CN=cluster",
            "-passfile",
            str(tool_pass),
        ],
        env=env,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    etc["B"].mkdir(parents=True)
    for f in ("keystore.pem", "keystore.crt"):
        shutil.copy(etc["A"] / f, etc["B"] / f)
    for d in etc.values():
        (d / "passfile").write_text(f"imq.keystore.password={password}\n")
    props = ("imq.cluster.transport=ssl", "imq.passfile.enabled=true")
    a = start_member(tmp_path / "A", brokerlist, pms[0], "A", *props)
    b = start_member(tmp_path / "B", brokerlist, pms[1], "B", *props)
    try:
        wait_for(lambda: links_up(a) == 1 and links_up(b) == 1, 30, "TLS links")
        assert any(
            line.startswith("cluster ssl CLUSTER")
            for line in [" ".join(x.split()[:3]) for x in portmapper_table(a).splitlines()]
        )
        q = Queue(name("sslq"))
        with conn(a) as ca, conn(b) as cb:
            k = cb.create_session().create_consumer(q)
            cb.start()
            ca.create_session().create_producer(q).send(TextMessage("over tls"))
            assert k.receive(10).text == "over tls"
        port = int(
            next(x for x in portmapper_table(a).splitlines() if x.startswith("cluster ")).split()[3]
        )
        # A plain TCP peer speaking the link protocol gets a TLS alert or a close.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(_link_init("127.0.0.1", "B", pms[1]))
            try:
                answer = s.recv(100)
            except ConnectionResetError:
                answer = b""
            assert not answer.startswith(b"\x00\x64")  # never a link packet
        assert links_up(a) == 1
        # ... and the refusal is logged once, with the peer and the reason.
        wait_for(lambda: "service cluster: TLS handshake with 127.0.0.1:" in a.log_text(), 10)
        refused = [x for x in a.log_text().splitlines() if "TLS handshake with" in x]
        assert len(refused) == 1 and "refused" in refused[0], refused
    finally:
        a.stop()
        b.stop()


def test_paused_peer_is_dropped_after_silence_and_relinks_when_it_wakes(tmp_path: Path):
    """SIGSTOP B: A hears nothing for three ping intervals (1 s here), drops the link,
    takes back what B's consumer had not acknowledged and goes on; SIGCONT B: they link
    again."""
    a, b = start_cluster(tmp_path, 2, names=("A", "B"))
    try:
        q = Queue(name("qs"))
        cb = conn(b)
        k = cb.create_session(AckMode.CLIENT_ACKNOWLEDGE).create_consumer(q)
        cb.start()
        with conn(a) as ca:
            sa = ca.create_session()
            p = sa.create_producer(q)
            for i in range(3):
                p.send(TextMessage(str(i)), persistent=True)
            assert [k.receive(10).text for _ in range(3)] == ["0", "1", "2"]
            b.proc.send_signal(signal.SIGSTOP)
            try:
                wait_for(lambda: "nothing heard from the peer" in a.log_text(), 30, "silence")
                k2 = sa.create_consumer(q)
                ca.start()
                again = sorted(k2.receive(10).text for _ in range(3))
                assert again == ["0", "1", "2"]
                k2.close()
            finally:
                b.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: links_up(a) == 1 and links_up(b) == 1, 30, "relinked")
        try:
            cb.close()
        except JMSException:
            pass
    finally:
        a.stop()
        b.stop()


@pytest.mark.django_db
def test_rest_api_lists_the_cluster(cluster, settings, tmp_path):
    from broker.admintools import security_actions
    from tests.test_rest_api import ADMIN, ADMIN_PW, point_at, token_client

    a, b, c = cluster
    point_at(settings, c, tmp_path)
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    api = token_client(ADMIN, ADMIN_PW)
    r = api.get("/api/broker/cluster/", {"ordering": "instance"})
    assert r.status_code == 200, r.content
    rows = r.json()["results"]
    assert [(x["address"], x["instance"], x["state"], x["is_self"]) for x in rows] == [
        (f"127.0.0.1:{x.portmapper_port}", x.instance, "OPERATING", x is c) for x in (a, b, c)
    ]
    r = api.get("/api/broker/cluster/", {"ordering": "bogus"})
    assert r.status_code == 400


@pytest.mark.django_db
def test_portal_cluster_page(cluster, settings, tmp_path):
    from django.test import Client

    from broker.admintools import security_actions
    from tests.test_rest_api import ADMIN, ADMIN_PW, point_at

    a, b, c = cluster
    point_at(settings, a, tmp_path)
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    client = Client()
    assert client.login(username=ADMIN, password=ADMIN_PW)
    r = client.get("/cluster/")
    assert r.status_code == 200
    html = r.content.decode()
    for x in (a, b, c):
        assert f"<td>127.0.0.1:{x.portmapper_port}</td><td>{x.instance}</td>" in html
    assert html.count("<td>OPERATING</td>") == 3


def test_an_xa_prepare_prepares_messages_at_their_home_broker_first(cluster, tmp_path):
    """Ours as both brokers: the XA PREPARE on B of messages homed on A is answered once
    A prepared them too (A lists that transaction PREPARED until B's outcome); a
    rollback after the prepare gives them again on B, marked redelivered; committed,
    they come no more."""
    import asyncio

    from openmq_client import connect as aconnect
    from openmq_client.xa import Xid, create_xa_session

    a, b, _c = cluster
    q = Queue(name("xaq"))
    with conn(a) as ca:
        prod = ca.create_session().create_producer(q)
        for i in range(2):
            prod.send(TextMessage(f"x{i}"))

    async def run() -> str:
        cb = await aconnect(b.host, b.portmapper_port, request_timeout=20)
        sess, xa = await create_xa_session(cb)
        cons = await sess.create_consumer(q)
        await cb.start()
        first = Xid(1, b"xa-" + uuid.uuid4().bytes, b"b1")
        await xa.start(first)
        got = [await cons.receive(10) for _ in range(2)]
        assert [getattr(m, "text", None) for m in got] == ["x0", "x1"]
        await xa.end(first)
        await xa.prepare(first)
        held = await asyncio.to_thread(_admin, a, tmp_path, "list", "txn")
        await xa.rollback(first)
        second = Xid(1, b"xa-" + uuid.uuid4().bytes, b"b2")
        await xa.start(second)
        again = [await cons.receive(10) for _ in range(2)]
        assert [getattr(m, "text", None) for m in again] == ["x0", "x1"]
        assert all(m is not None and m.redelivered for m in again)
        await xa.end(second)
        await xa.prepare(second)
        await xa.commit(second)
        assert await cons.receive(0.5) is None
        await cb.close()
        return held

    held = asyncio.run(run())
    assert "PREPARED" in held, held
    with conn(a) as ca:
        none = ca.create_session().create_consumer(q)
        ca.start()
        assert none.receive(0.5) is None


def test_a_failover_queues_backup_on_another_broker_takes_over_cluster_wide(cluster):
    """A failover queue (one active consumer, backups unlimited) made by an administrator
    on A: the consumer on A is active, the one on B a backup; when A's goes, B's takes
    its position (the cluster lock queue:<name>_0), tells the brokers, and gets what is
    sent on A and on B."""
    import asyncio

    from broker.admintools.client import AdminClient

    a, b, _c = cluster
    qname = name("failoverq")

    async def make() -> None:
        admin = await AdminClient.open(a.host, a.portmapper_port)
        try:
            attrs = {"maxNumActiveConsumers": 1, "maxNumBackupConsumers": -1}
            await admin.create_destination(qname, 1, attrs)
        finally:
            await admin.close()

    asyncio.run(make())
    q = Queue(qname)
    with conn(a) as ca, conn(b) as cb:
        first = ca.create_session().create_consumer(q)
        ca.start()
        # B's consumer finds position 0 locked by A (A's interest known there or not).
        backup = cb.create_session().create_consumer(q)
        cb.start()
        pa = ca.create_session().create_producer(q)
        pb = cb.create_session().create_producer(q)
        for i in range(4):
            pa.send(TextMessage(f"a{i}"))
            pb.send(TextMessage(f"b{i}"))
        got = [first.receive(10) for _ in range(8)]
        assert sorted(m.text for m in got if m is not None) == sorted(
            [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
        )
        assert backup.receive(0.5) is None, "a backup got a message"
        first.close()
        for i in range(4, 8):
            pa.send(TextMessage(f"a{i}"))
            pb.send(TextMessage(f"b{i}"))
        got = [backup.receive(15) for _ in range(8)]
        assert sorted(m.text for m in got if m is not None) == sorted(
            [f"a{i}" for i in range(4, 8)] + [f"b{i}" for i in range(4, 8)]
        )
    assert "is active now" in b.log_text()
