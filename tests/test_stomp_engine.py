"""The sans-IO STOMP engine (broker/engine/stomp.py) driven with bytes on a real, never
started :class:`~broker.server.broker.Broker` with a passwd-file user repository, as
test_engine.py drives the JMQ engine: the tests play the driver (look-ups run inline,
timers fired by hand) and read the frames the engine queued."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.engine import Close, RunBlocking, StartTimer
from broker.engine.stomp import StompEngine, StompSettings
from broker.engine.stomp_states import (
    CLOSED,
    CONNECTED,
    InvalidStompTransition,
    StompEvent,
    StompState,
    next_state,
)
from broker.protocol.stomp import Frame, FrameReader, encode_frame
from broker.security.digest import md5str
from broker.security.filerepo import FileUserRepository
from broker.server.broker import Broker
from broker.server.services import Service

pytestmark = pytest.mark.fast


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    passwd = tmp_path / "passwd"
    passwd.write_text(
        f"guest:{md5str('guest:guest')}:anonymous:1\nadmin:{md5str('admin:admin')}:admin:1\n"
    )
    config = BrokerConfig(
        {"imq.varhome": str(tmp_path / "var"), "imq.accesscontrol.enabled": "false"}
    )
    b = Broker(config, FileUserRepository(passwd))
    b.router.observers.remove_transaction_observer(b.txn_records)
    yield b
    b.executor.shutdown(wait=False)


class Client:
    """One STOMP connection's engine and what it said."""

    def __init__(self, broker: Broker, settings: StompSettings | None = None) -> None:
        svc = Service("stomp", "NORMAL", "stomp", None, 0, "digest", -1)
        broker.service_repositories[svc.name] = broker.user_repository
        self.e = StompEngine(broker, svc, wake=lambda: None, flush=lambda: None, settings=settings)
        self.e.peer = "127.0.0.1:40000"
        self.reader = FrameReader("1.2")
        self.timers: dict[str, StartTimer] = {}
        self.closed = False
        self.run(self.e.start())

    def run(self, effects) -> None:
        for eff in effects:
            if type(eff) is RunBlocking:
                try:
                    result, error = eff.fn(*eff.args), None
                except Exception as exc:
                    result, error = None, exc
                self.run(eff.done(result, error))
            elif type(eff) is StartTimer:
                self.timers[eff.name] = eff
            elif type(eff) is Close:
                self.closed = True

    def feed(self, data: bytes) -> list[Frame]:
        self.run(self.e.receive_data(data))
        return self.frames()

    def frames(self) -> list[Frame]:
        self.e.pump()
        self.run(self.e.take_effects())
        data = b"".join(self.e.data_to_send())
        self.e.after_write()
        self.reader.version = self.e.version
        return self.reader.feed(data) if data else []

    def frame(self, command: str, *headers: tuple[str, str], body: bytes = b"") -> list[Frame]:
        return self.feed(encode_frame(command, list(headers), body, self.e.version))

    def connect(self, version: str = "1.2", **headers: str) -> Frame:
        h = {"accept-version": version, "login": "guest", "passcode": "guest", **headers}
        got = self.feed(encode_frame("CONNECT", list(h.items()), b"", version))
        assert [f.command for f in got] == ["CONNECTED"], got
        return got[0]


def test_transition_table():
    assert next_state(StompState.NEW, StompEvent.CONNECT) is StompState.CONNECTING
    assert next_state(StompState.CONNECTING, StompEvent.LOGGED_IN) is CONNECTED
    with pytest.raises(InvalidStompTransition):
        next_state(StompState.NEW, StompEvent.LOGGED_IN)


def test_frame_before_connect_is_an_error_and_closes(broker):
    c = Client(broker)
    (err,) = c.feed(b"SEND\ndestination:/queue/a\n\nx\x00")
    assert err.command == "ERROR"
    assert "before CONNECT" in (err.get("message") or "")
    assert c.closed and c.e.state is CLOSED
    assert c.feed(b"SEND\ndestination:/queue/a\n\nx\x00") == []


def test_garbage_is_an_error_and_closes(broker):
    c = Client(broker)
    (err,) = c.feed(b"\x16\x03\x01garbage\n\n\x00")
    assert err.command == "ERROR" and "unknown command" in (err.get("message") or "")
    assert c.closed


def test_wrong_passcode_refused(broker):
    c = Client(broker)
    (err,) = c.feed(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:nope\n\n\x00")
    assert err.command == "ERROR"
    assert "authentication failed" in (err.get("message") or "")
    assert c.closed


@pytest.mark.parametrize(
    ("offered", "agreed"), [(None, "1.0"), ("1.0,1.1", "1.1"), ("1.1,1.2", "1.2")]
)
def test_version_negotiation(broker, offered, agreed):
    c = Client(broker)
    h = [("login", "guest"), ("passcode", "guest")]
    if offered:
        h.append(("accept-version", offered))
    (f,) = c.feed(encode_frame("CONNECT", h))
    assert f.command == "CONNECTED" and f.get("version") == agreed


def test_a_1_2_connects_values_are_not_trimmed(broker):
    c = Client(broker)
    (f,) = c.feed(
        b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\nclient-id: cid \n\n\x00"
    )
    assert f.command == "CONNECTED"
    assert c.e.inner.client_id == " cid "


def test_unsupported_version(broker):
    c = Client(broker)
    (err,) = c.feed(b"CONNECT\naccept-version:2.0\n\n\x00")
    assert err.command == "ERROR" and err.get("version") == "1.0,1.1,1.2"
    assert c.closed


def test_heart_beats_negotiated_both_ways(broker):
    c = Client(broker, StompSettings(heartbeat_send=2000, heartbeat_receive=3000))
    f = c.connect("1.2", **{"heart-beat": "5000,1000"})
    assert f.get("heart-beat") == "2000,3000"
    assert c.e.hb_out == 2000  # max(our 2000, the 1000 it asked for)
    assert c.e.hb_in == 5000  # max(its 5000, our 3000)
    assert {"stomp-hb-out", "stomp-hb-in"} <= set(c.timers)
    # Nothing written since: the out timer writes an EOL.
    c.e._wrote = False
    c.run(c.timers.pop("stomp-hb-out").callback())
    assert c.e.data_to_send() == [b"\n"]


def test_heart_beats_out_leave_no_gap_longer_than_the_interval(broker):
    # "The sender MUST send new data at least every <n> milliseconds": a frame written
    # just after one look at the clock and nothing after it must not leave the client
    # waiting two intervals (stomp.py gives up after one and a half).
    c = Client(broker, StompSettings(heartbeat_send=2000, heartbeat_receive=0))
    c.connect("1.2", **{"heart-beat": "0,2000"})
    assert c.e.hb_out == 2000
    tick = c.timers.pop("stomp-hb-out")
    c.run(tick.callback())  # the CONNECTED frame was written since the start: no beat
    assert c.e.data_to_send() == []
    (r,) = c.frame("BEGIN", ("transaction", "t"), ("receipt", "r"))  # data written now
    assert r.command == "RECEIPT"
    looks = 0
    while True:
        tick = c.timers.pop("stomp-hb-out")
        looks += 1
        c.run(tick.callback())
        if c.e.data_to_send() == [b"\n"]:
            break
    # The beat came within one interval of the RECEIPT, whenever in its tick that was.
    assert looks * tick.delay <= c.e.hb_out / 1000
    # Idle, it beats once an interval, not at every look.
    beats = []
    for _ in range(4):
        c.run(c.timers.pop("stomp-hb-out").callback())
        beats.append(list(c.e.data_to_send()))  # a copy: the empty one is reused
    assert beats == [[], [b"\n"], [], [b"\n"]]


def test_send_subscribe_message_and_receipt(broker):
    c = Client(broker)
    c.connect("1.2")
    (r,) = c.frame("SUBSCRIBE", ("id", "s1"), ("destination", "/queue/q"), ("receipt", "r1"))
    assert r.command == "RECEIPT" and r.get("receipt-id") == "r1"
    got = c.frame(
        "SEND",
        ("destination", "/queue/q"),
        ("priority", "7"),
        ("correlation-id", "c-1"),
        ("type", "t"),
        ("reply-to", "/topic/back"),
        ("persistent", "false"),
        ("colour", "blue:ish"),
        ("receipt", "r2"),
        body=b"hello",
    )
    cmds = {f.command: f for f in got}
    assert set(cmds) == {"RECEIPT", "MESSAGE"}
    m = cmds["MESSAGE"]
    assert m.body == b"hello"
    assert m.get("subscription") == "s1"
    assert m.get("destination") == "/queue/q"
    assert m.get("priority") == "7"
    assert m.get("correlation-id") == "c-1"
    assert m.get("type") == "t"
    assert m.get("reply-to") == "/topic/back"
    assert "persistent" not in m  # only a persistent message's frame says persistent:true
    assert m.get("colour") == "blue:ish"
    assert m.get("message-id", "").startswith("ID:")
    assert m.get("ack") is None  # ack:auto


def test_messages_waiting_for_a_new_subscription_come_after_its_receipt(broker):
    p = Client(broker)
    p.connect("1.2")
    for i in range(3):
        p.frame("SEND", ("destination", "/queue/wait"), body=b"%d" % i)
    c = Client(broker)
    c.connect("1.2")
    got = c.frame(
        "SUBSCRIBE",
        ("id", "s"),
        ("destination", "/queue/wait"),
        ("ack", "client"),
        ("receipt", "r"),
    )
    assert [f.command for f in got] == ["RECEIPT", "MESSAGE", "MESSAGE", "MESSAGE"]
    assert [f.body for f in got[1:]] == [b"0", b"1", b"2"]
    assert all(f.get("subscription") == "s" and f.get("ack") for f in got[1:])


def test_ack_of_a_message_acknowledged_already_is_an_error(broker):
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/twice"), ("ack", "client-individual"))
    (m,) = c.frame("SEND", ("destination", "/queue/twice"), body=b"x")
    (r,) = c.frame("ACK", ("id", m.get("ack")), ("receipt", "a1"))
    assert r.command == "RECEIPT" and r.get("receipt-id") == "a1"
    (err,) = c.frame("ACK", ("id", m.get("ack")), ("receipt", "a2"))
    assert err.command == "ERROR" and err.get("receipt-id") == "a2"
    # Said with the id as the client sent it (the MESSAGE's ack header).
    assert f"id {m.get('ack')!r}" in (err.get("message") or "")
    assert "names no message waiting for one" in (err.get("message") or "")
    assert c.e.state is CONNECTED  # a refused ACK, not a broken connection


def test_client_ack_is_cumulative_and_unacked_go_to_another_subscriber(broker):
    a = Client(broker)
    a.connect("1.1")
    a.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/w"), ("ack", "client"))
    msgs = []
    for i in range(3):
        msgs += [f for f in a.frame("SEND", ("destination", "/queue/w"), body=b"%d" % i)]
    assert [m.body for m in msgs] == [b"0", b"1", b"2"]
    (r,) = a.frame(
        "ACK",
        ("message-id", msgs[1].get("message-id")),
        ("subscription", "s"),
        ("receipt", "k"),
    )
    assert r.command == "RECEIPT"
    # 1.1 acknowledges by message-id: the ack header, 1.2's, is not written.
    assert [m.get("ack") for m in msgs] == [None] * 3
    b = Client(broker)
    b.connect("1.2")
    b.frame("SUBSCRIBE", ("id", "t"), ("destination", "/queue/w"), ("ack", "client-individual"))
    a.run(a.e.receive_data(b"DISCONNECT\n\n\x00"))
    a.e.connection_lost()
    got = b.frames()
    # Only the one not acknowledged comes again, marked so.
    assert [(m.body, m.get("redelivered")) for m in got] == [(b"2", "true")]


def test_silent_heart_beating_client_dropped_and_its_messages_redelivered(broker):
    a = Client(broker, StompSettings(heartbeat_send=0, heartbeat_receive=1000))
    a.connect("1.2", **{"heart-beat": "1000,0"})
    a.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/hb"), ("ack", "client-individual"))
    (m,) = a.frame("SEND", ("destination", "/queue/hb"), body=b"x")
    assert m.command == "MESSAGE"
    check = a.timers.pop("stomp-hb-in")
    assert check.delay == 0.25
    a.run(check.callback())  # heard from it just now: still connected
    assert not a.closed
    a.e.last_read = time.monotonic() - 1.6  # silent for 1.6 intervals
    a.run(a.timers.pop("stomp-hb-in").callback())
    (err,) = a.frames()
    assert err.command == "ERROR" and "heart-beat" in (err.get("message") or "")
    assert a.closed
    a.e.connection_lost()
    b = Client(broker)
    b.connect("1.2")
    (again,) = b.frame("SUBSCRIBE", ("id", "t"), ("destination", "/queue/hb"))
    assert again.body == b"x" and again.get("redelivered") == "true"


def test_transaction_commit_and_abort(broker):
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/tx"))
    assert c.frame("BEGIN", ("transaction", "t1")) == []
    assert c.frame("SEND", ("destination", "/queue/tx"), ("transaction", "t1"), body=b"a") == []
    (m,) = c.frame("COMMIT", ("transaction", "t1"))
    assert m.command == "MESSAGE" and m.body == b"a"
    c.frame("BEGIN", ("transaction", "t2"))
    c.frame("SEND", ("destination", "/queue/tx"), ("transaction", "t2"), body=b"b")
    (r,) = c.frame("ABORT", ("transaction", "t2"), ("receipt", "ab"))
    assert r.command == "RECEIPT"
    (err,) = c.frame("COMMIT", ("transaction", "t2"))
    assert err.command == "ERROR" and "not begun" in (err.get("message") or "")


def test_nack_in_a_transaction_takes_effect_at_commit_and_is_undone_by_abort(broker):
    # NACK takes ACK's transaction header (STOMP 1.1, 1.2): the message goes back only
    # when the transaction commits; an ABORT leaves it the client's to ACK or NACK.
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/ntx"), ("ack", "client-individual"))
    (m,) = c.frame("SEND", ("destination", "/queue/ntx"), body=b"n")
    (err,) = c.frame("NACK", ("id", m.get("ack")), ("transaction", "nope"))
    assert err.command == "ERROR" and "not begun" in (err.get("message") or "")
    c.frame("BEGIN", ("transaction", "t1"))
    (r,) = c.frame("NACK", ("id", m.get("ack")), ("transaction", "t1"), ("receipt", "n1"))
    assert r.command == "RECEIPT"  # and nothing redelivered before the COMMIT
    (r,) = c.frame("ABORT", ("transaction", "t1"), ("receipt", "a1"))
    assert r.command == "RECEIPT"
    # Still waiting for its acknowledgement: NACKed again, in a transaction committed.
    c.frame("BEGIN", ("transaction", "t2"))
    assert c.frame("NACK", ("id", m.get("ack")), ("transaction", "t2")) == []
    got = c.frame("COMMIT", ("transaction", "t2"), ("receipt", "c2"))
    assert [f.command for f in got] == ["RECEIPT", "MESSAGE"], got
    assert got[1].body == b"n" and got[1].get("redelivered") == "true"


def test_a_nack_in_a_transaction_of_a_subscription_ended_before_the_commit(broker):
    # UNSUBSCRIBE gives the message back (to the next subscriber); the COMMIT after it
    # gives nothing back a second time.
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/ntx2"), ("ack", "client-individual"))
    (m,) = c.frame("SEND", ("destination", "/queue/ntx2"), body=b"once")
    c.frame("BEGIN", ("transaction", "t"))
    c.frame("NACK", ("id", m.get("ack")), ("transaction", "t"))
    c.frame("UNSUBSCRIBE", ("id", "s"))
    (r,) = c.frame("COMMIT", ("transaction", "t"), ("receipt", "c"))
    assert r.command == "RECEIPT"
    d = Client(broker)
    d.connect("1.2")
    got = d.frame("SUBSCRIBE", ("id", "t"), ("destination", "/queue/ntx2"), ("receipt", "s"))
    assert [(f.command, f.body) for f in got] == [("RECEIPT", b""), ("MESSAGE", b"once")]
    (r,) = d.frame("BEGIN", ("transaction", "x"), ("receipt", "b"))  # a round trip
    assert r.command == "RECEIPT"


def test_an_ack_in_an_unknown_transaction_is_refused_and_the_message_still_ackable(broker):
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/atx"), ("ack", "client"))
    (m,) = c.frame("SEND", ("destination", "/queue/atx"), body=b"a")
    (err,) = c.frame("ACK", ("id", m.get("ack")), ("transaction", "nope"), ("receipt", "k"))
    assert err.command == "ERROR" and "not begun" in (err.get("message") or "")
    assert err.get("receipt-id") == "k"
    # The refused ACK took nothing: the message is acknowledged by the next one.
    (r,) = c.frame("ACK", ("id", m.get("ack")), ("receipt", "k2"))
    assert r.command == "RECEIPT" and r.get("receipt-id") == "k2"


def test_bad_destination_and_header_values_are_errors(broker):
    c = Client(broker)
    c.connect("1.2")
    (err,) = c.frame("SEND", ("destination", "nowhere"), body=b"x")
    assert err.command == "ERROR" and "/queue/NAME" in (err.get("message") or "")
    (err,) = c.frame("SEND", ("destination", "/queue/a"), ("priority", "12"), body=b"x")
    assert err.command == "ERROR" and "priority" in (err.get("message") or "")
    (err,) = c.frame("SUBSCRIBE", ("destination", "/queue/a"))
    assert err.command == "ERROR" and "id" in (err.get("message") or "")
    # Refused operations leave the connection up.
    assert not c.closed


def test_frames_sent_with_connect_wait_for_the_login(broker):
    c = Client(broker)
    got = c.feed(
        b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"
        b"SUBSCRIBE\nid:s\ndestination:/queue/pipe\nack:client\nreceipt:r\n\n\x00"
        b"SEND\ndestination:/queue/pipe\n\nfirst\x00"
    )
    assert [f.command for f in got] == ["CONNECTED", "RECEIPT", "MESSAGE"]
    assert got[2].body == b"first"


@pytest.mark.parametrize("command", ["CONNECT", "STOMP"])
@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_frames_sent_with_connect_are_read_in_the_version_it_agrees(broker, version, command):
    # One write of CONNECT (or STOMP, the same) and the frames after it (a hand-written
    # client, `nc`): those are 1.1/1.2 frames, with that version's escapes and no
    # trimming of values, not the 1.0 the connection had before CONNECT was read.
    c = Client(broker)
    got = c.feed(
        f"{command}\naccept-version:{version}\nlogin:guest\npasscode:guest\n\n\x00".encode()
        + b"SUBSCRIBE\nid:s\ndestination:/queue/esc\nreceipt:r\n\n\x00"
        + b"SEND\ndestination:/queue/esc\nurl:a\\cb\\nc\\\\d\npad: x \n\nbody\x00"
    )
    assert [f.command for f in got] == ["CONNECTED", "RECEIPT", "MESSAGE"], got
    m = got[2]
    assert m.get("url") == "a:b\nc\\d"
    assert m.get("pad") == " x "


def test_an_undefined_escape_sent_with_connect_is_fatal(broker):
    c = Client(broker)
    got = c.feed(
        b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00"
        b"SEND\ndestination:/queue/tab\nx:a\\tb\nreceipt:r\n\n\x00"
    )
    assert [f.command for f in got] == ["ERROR"], got
    assert "undefined escape" in (got[0].get("message") or "")
    assert c.closed


def test_a_body_without_content_length_that_is_not_utf8_is_kept_as_bytes(broker):
    # STOMP's body is bytes with or without content-length: such a SEND is taken (was
    # refused) and its bytes reach the subscriber as they were sent.
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/bin"))
    got = c.feed(b"SEND\ndestination:/queue/bin\nreceipt:r\n\n\xff\xfe\x80abc\x00")
    cmds = {f.command: f for f in got}
    assert set(cmds) == {"RECEIPT", "MESSAGE"}, got
    m = cmds["MESSAGE"]
    assert m.body == b"\xff\xfe\x80abc" and m.get("content-length") == "6"


def test_a_subscriber_that_does_not_read_gets_no_more_than_its_credit(broker):
    slow = Client(broker, StompSettings(prefetch=10))
    slow.connect("1.2")
    slow.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/slow"))
    producer = Client(broker)
    producer.connect("1.2")
    for i in range(100):
        producer.frame("SEND", ("destination", "/queue/slow"), body=b"%d" % i)
    # What the broker gave it before the driver wrote: its credit.  Then the transport's
    # buffer is full (the client is not reading).
    slow.e.write_paused = True
    got = slow.frames()
    # Its credit, and no more while the transport stays full.
    assert [m.body for m in got] == [b"%d" % i for i in range(10)]
    assert slow.frames() == []
    slow.e.resume_writing()
    more = slow.frames()
    assert 0 < len(more) <= 10 and more[0].body == b"10"


def test_the_brokers_ping_of_an_idle_connection_is_answered(broker):
    from broker.protocol.packet import build_packet
    from broker.protocol.types import FLAG_A, PacketType

    c = Client(broker)
    c.connect("1.2")
    inner = c.e.inner
    for _ in range(10):  # what the ping loop does to a connection it has not heard from
        inner.ping_outstanding += 1
        inner.write(build_packet(PacketType.PING, flags=FLAG_A))
        c.frames()
    assert inner.ping_outstanding == 0
    assert not c.closed


def test_temporary_queue_for_replies(broker):
    asker = Client(broker)
    asker.connect("1.2")
    (r,) = asker.frame(
        "SUBSCRIBE", ("id", "r"), ("destination", "/temp-queue/replies"), ("receipt", "x")
    )
    assert r.command == "RECEIPT"
    server = Client(broker)
    server.connect("1.2")
    server.frame("SUBSCRIBE", ("id", "q"), ("destination", "/queue/requests"))
    asker.frame(
        "SEND", ("destination", "/queue/requests"), ("reply-to", "/temp-queue/replies"), body=b"?"
    )
    (req,) = server.frames()
    back = req.get("reply-to") or ""
    assert back.startswith("/temp-queue/temporary_destination://")
    (ok,) = server.frame("SEND", ("destination", back), ("receipt", "y"), body=b"!")
    assert ok.command == "RECEIPT"
    (answer,) = asker.frames()
    assert answer.body == b"!" and answer.get("destination") == "/temp-queue/replies"


def test_a_send_the_router_refuses_is_an_error_and_the_connection_goes_on(tmp_path):
    # A SEND goes to the router without a JMQ packet fed to the engine underneath
    # (StompLink.take_message): what the router refuses is the SEND's ERROR, with its
    # receipt id, and the message is counted in as the JMQ engine counts a refused one.
    passwd = tmp_path / "passwd"
    passwd.write_text(f"guest:{md5str('guest:guest')}:anonymous:1\n")
    config = BrokerConfig(
        {
            "imq.varhome": str(tmp_path / "var"),
            "imq.accesscontrol.enabled": "false",
            "imq.message.max_size": "200",
        }
    )
    broker = Broker(config, FileUserRepository(passwd))
    try:
        c = Client(broker)
        c.connect("1.2")
        c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/big"))
        before = c.e.metrics.messages_in
        (err,) = c.frame("SEND", ("destination", "/queue/big"), ("receipt", "r1"), body=b"x" * 500)
        assert err.command == "ERROR" and err.get("receipt-id") == "r1"
        assert (err.get("message") or "").startswith("SEND to /queue/big refused: ")
        assert "exceeds imq.message.max_size" in (err.get("message") or "")
        assert c.e.metrics.messages_in == before + 1 and not c.closed
        got = c.frame("SEND", ("destination", "/queue/big"), ("receipt", "r2"), body=b"small")
        assert [f.command for f in got] == ["MESSAGE", "RECEIPT"] and got[0].body == b"small"
        # In a transaction, checked when sent (so the receipt tells the truth).
        c.frame("BEGIN", ("transaction", "t"))
        (err,) = c.frame(
            "SEND", ("destination", "/queue/big"), ("transaction", "t"), body=b"x" * 500
        )
        assert err.command == "ERROR" and "too large" in (err.get("message") or "")
        assert c.frame("COMMIT", ("transaction", "t")) == []
    finally:
        broker.executor.shutdown(wait=False)


def test_a_persistent_sends_receipt_waits_for_the_store_and_disconnect_for_it(broker):
    held: list = []
    broker.when_stored = held.append  # type: ignore[method-assign]  # a store that holds
    c = Client(broker)
    c.connect("1.2")
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/kept"))
    got = c.frame("SEND", ("destination", "/queue/kept"), ("receipt", "p"), body=b"kept")
    # Delivered at once; "stored" (the receipt) only once the store says so.
    assert [(f.command, f.body) for f in got] == [("MESSAGE", b"kept")] and len(held) == 1
    # A non-persistent one is answered at once, ahead of it.
    got = c.frame("SEND", ("destination", "/queue/kept"), ("persistent", "false"), ("receipt", "n"))
    assert [(f.command, f.get("receipt-id")) for f in got] == [("MESSAGE", None), ("RECEIPT", "n")]
    assert c.frame("DISCONNECT", ("receipt", "bye")) == []
    assert not c.closed
    held.pop()()
    got = c.frames()
    assert [(f.command, f.get("receipt-id")) for f in got] == [("RECEIPT", "p"), ("RECEIPT", "bye")]
    assert c.closed


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_sends_with_the_same_headers_but_one_are_each_their_own_message(broker, version):
    # on_send keeps a SEND's mapping per header list (SendShape): every SEND whose headers
    # differ in one value, receipts included, must still be the message (and MESSAGE
    # frame) a fresh mapping makes of it, in every version's escaping.
    from broker.engine.stomp_mapping import frame_parts, send_message, subscription_head

    c = Client(broker)
    c.connect(version)
    c.frame("SUBSCRIBE", ("id", "s"), ("destination", "/queue/same"))
    c.frame("BEGIN", ("transaction", "t1"))
    base = [("destination", "/queue/same"), ("persistent", "false"), ("k", "v")]
    odd = "a:b\\c" if version != "1.0" else "a b"  # 1.0 has no escapes
    variants = [
        [],
        [],
        [("receipt", "r1")],
        [("receipt", "r2")],
        [("expires", "4102444800000")],
        [("expires", "4102444800001")],
        [("correlation-id", "c1")],
        [("correlation-id", "c2"), ("receipt", "r3")],
        [("user", odd)],
        [("user", odd + "x")],
        [("priority", "9"), ("k", "shadowed")],
        [],
        [("transaction", "t1")],  # last: its MESSAGE comes at the COMMIT
    ]
    want_receipts, got_receipts, frames = [], [], []
    for i, extra in enumerate(variants):
        headers = base + extra
        rid = dict(extra).get("receipt")
        if rid:
            want_receipts.append(rid)
        got = c.frame("SEND", *headers, body=b"b%02d" % i)
        got_receipts += [f.get("receipt-id") for f in got if f.command == "RECEIPT"]
        frames += [f for f in got if f.command == "MESSAGE"]
    frames += c.frame("COMMIT", ("transaction", "t1"))
    assert got_receipts == want_receipts
    assert [f.body for f in frames] == [b"b%02d" % i for i in range(len(variants))]
    head = subscription_head("s", "/queue/same", version)
    for i, (extra, f) in enumerate(zip(variants, frames, strict=True)):
        sent = send_message(
            base + extra, b"b%02d" % i, c.e._dest("/queue/same"), None, 0, c.e.id, c.e.id
        )
        ref_raw = frame_parts(sent, version, c.e.id).frame(head, 0, False, 1)
        (ref,) = FrameReader(version).feed(ref_raw)
        mine = [h for h in f.headers if h[0] not in ("message-id", "timestamp")]
        assert mine == [h for h in ref.headers if h[0] not in ("message-id", "timestamp")], i
    # One shape for the SENDs that differ in their receipt only (the three plain ones,
    # r1 and r2); bounded however many.
    assert len(c.e._shapes) == len(variants) - 4
    for i in range(40):
        c.frame("SEND", ("destination", "/queue/same"), ("n", str(i)), body=b"x")
    assert 0 < len(c.e._shapes) <= 32
