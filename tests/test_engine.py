"""The sans-IO connection engine (broker/engine), driven with bytes: no broker process,
no socket, no event loop.  Each test feeds the real client's captured packets
(third_party/openmq/vectors) or packets built with ``build_packet`` and asserts the replies the
engine queued, the effects it asked for and its state transitions.

The engine sits on a real :class:`~broker.server.broker.Broker` (router, access rules,
login throttle), never started, with a real passwd-file user repository; the tests play
the driver: they run ``RunBlocking`` look-ups inline and fire timers by hand.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.engine import (
    NO_EFFECTS,
    CancelTimer,
    Close,
    ConnectionEngine,
    ConnState,
    RunBlocking,
    StartTimer,
)
from broker.engine.states import ConnEvent, InvalidTransition, next_state
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import Packet, PacketReader, build_packet
from broker.protocol.types import (
    DEST_QUEUE,
    DEST_TOPIC,
    FLAG_A,
    FLAG_C,
    FLAG_F,
    FLAG_P,
    FLAG_Q,
    AckMode,
    GoodbyeReason,
    PacketType,
    Status,
)
from broker.security.digest import md5str
from broker.security.filerepo import FileUserRepository
from broker.server.broker import Broker
from broker.server.services import Service
from broker.stock_paths import VECTORS

pytestmark = pytest.mark.fast


def vector(name: str) -> bytes:
    path = VECTORS / name
    assert path.is_file(), f"captured client packet {path} is missing"
    return bytes.fromhex(path.read_text().strip())


@pytest.fixture
def broker(tmp_path: Path) -> Broker:
    passwd = tmp_path / "passwd"
    passwd.write_text(
        f"guest:{md5str('guest:guest')}:anonymous:1\n"
        f"admin:{md5str('admin:admin')}:admin:1\n"
        f"gone:{md5str('gone:gone')}:anonymous:0\n"
    )
    # Access rules are security/acl.py's own tests; here every connection may log in.
    config = BrokerConfig(
        {"imq.varhome": str(tmp_path / "var"), "imq.accesscontrol.enabled": "false"}
    )
    b = Broker(config, FileUserRepository(passwd))
    # The admin pages' transaction rows are a database writer, not the engine's business.
    b.router.observers.remove_transaction_observer(b.txn_records)
    yield b
    b.executor.shutdown(wait=False)


def _service(auth: str = "basic", name: str = "jms") -> Service:
    return Service(name, "NORMAL", "tcp", None, 0, auth, -1)


def _engine(broker: Broker, auth: str = "basic") -> ConnectionEngine:
    svc = _service(auth)
    broker.service_repositories[svc.name] = broker.user_repository
    e = ConnectionEngine(broker, svc)
    e.peer = "127.0.0.1:40000"
    effects = e.start()
    assert [type(x) for x in effects] == [StartTimer]  # the login deadline
    assert e.state is ConnState.NEW
    return e


def _sent(e: ConnectionEngine) -> list[Packet]:
    """What the engine queued for the client since the last call (the driver's batch)."""
    data = b"".join(e.data_to_send())
    return PacketReader().feed(data) if data else []


def _drive(e: ConnectionEngine, effects) -> list:
    """Play the driver for look-ups: run them inline and feed the answer back."""
    rest = []
    for eff in effects:
        if type(eff) is RunBlocking:
            try:
                result, error = eff.fn(*eff.args), None
            except Exception as exc:
                result, error = None, exc
            rest.extend(_drive(e, eff.done(result, error)))
        else:
            rest.append(eff)
    return rest


def _request(ptype: int, cid: int = 7, **props) -> bytes:
    return build_packet(ptype, props=props, flags=FLAG_A, consumer_id=cid)


def _hello(level: int = 500, **props) -> bytes:
    return _request(PacketType.HELLO, JMQProtocolLevel=JInt(level), **props)


def _auth_basic(user: str, password: str) -> bytes:
    import base64

    def utf(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">H", len(b)) + b

    body = utf(user) + utf(base64.b64encode(password.encode()).decode())
    return build_packet(
        PacketType.AUTHENTICATE, props={"JMQAuthType": "basic"}, body=body, flags=FLAG_A
    )


def _status(p: Packet) -> int:
    return int(p.properties["JMQStatus"])  # type: ignore[arg-type]


def _login(broker: Broker, user: str = "guest") -> ConnectionEngine:
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    rest = _drive(e, e.receive_data(_auth_basic(user, user)))
    assert [type(x) for x in rest] == [CancelTimer]
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.AUTHENTICATE_REPLY, Status.OK)
    assert e.state is ConnState.READY
    return e


# -- the state machine ---------------------------------------------------------------


def test_transition_table_refuses_what_it_does_not_list() -> None:
    assert next_state(ConnState.NEW, ConnEvent.HELLO_ACCEPTED) is ConnState.AUTHENTICATING
    assert next_state(ConnState.VERIFYING, ConnEvent.AUTHENTICATED) is ConnState.READY
    with pytest.raises(InvalidTransition):
        next_state(ConnState.NEW, ConnEvent.AUTHENTICATED)
    with pytest.raises(InvalidTransition):
        next_state(ConnState.CLOSED, ConnEvent.CLOSED)


# -- handshake -----------------------------------------------------------------------


def test_captured_java_client_session_basic(broker: Broker) -> None:
    """The 6.9 Java client's whole connect/close, byte for byte, against a basic challenge."""
    d = "connect-close-basic/"
    e = _engine(broker)
    assert e.receive_data(vector(d + "c2b-01-HELLO.hex")) is NO_EFFECTS
    hello_reply, challenge = _sent(e)
    assert hello_reply.type == PacketType.HELLO_REPLY and _status(hello_reply) == Status.OK
    assert hello_reply.properties["JMQProtocolLevel"] == 500
    assert hello_reply.properties["JMQConnectionID"] == e.id
    assert challenge.type == PacketType.AUTHENTICATE_REQUEST
    assert challenge.properties["JMQAuthType"] == "basic"
    assert e.state is ConnState.AUTHENTICATING and e.protocol_level == 500

    effects = e.receive_data(vector(d + "c2b-04-AUTHENTICATE.hex"))
    assert [type(x) for x in effects] == [RunBlocking]
    assert e.state is ConnState.VERIFYING
    # Held while the repository answers: START (no reply asked) waits for the login.
    assert e.receive_data(vector(d + "c2b-06-START.hex")) is NO_EFFECTS
    assert _sent(e) == [] and not e.started
    assert [type(x) for x in _drive(e, effects)] == [CancelTimer]
    (auth_reply,) = _sent(e)
    assert (auth_reply.type, _status(auth_reply)) == (PacketType.AUTHENTICATE_REPLY, 200)
    assert e.state is ConnState.READY and e.user == "guest" and e.started

    # The capture's DESTROY_SESSION names the stand-in's session id, not ours: 404.
    for name, rtype, status in [
        ("c2b-07-CREATE_SESSION.hex", PacketType.CREATE_SESSION_REPLY, Status.OK),
        ("c2b-09-DESTROY_SESSION.hex", PacketType.DESTROY_SESSION_REPLY, Status.NOT_FOUND),
        ("c2b-11-STOP.hex", PacketType.STOP_REPLY, Status.OK),
    ]:
        assert e.receive_data(vector(d + name)) is NO_EFFECTS
        (reply,) = _sent(e)
        assert (reply.type, _status(reply)) == (rtype, status), name
    effects = e.receive_data(vector(d + "c2b-13-GOODBYE.hex"))
    assert [type(x) for x in effects] == [Close]
    assert e.state is ConnState.CLOSED
    assert e.id not in broker.connections or broker.connections[e.id] is e
    e.connection_lost()
    assert e.id not in broker.connections


def test_captured_digest_answer(broker: Broker) -> None:
    """The captured digest AUTHENTICATE answers the nonce 1234567890 for guest/guest."""
    e = _engine(broker, auth="digest")
    e.receive_data(vector("hello.hex"))
    _, challenge = _sent(e)
    assert challenge.properties["JMQAuthType"] == "digest"
    assert challenge.body == e.nonce.encode()
    e.nonce = "1234567890"  # the nonce the capture answered
    _drive(e, e.receive_data(vector("authenticate-digest.hex")))
    (reply,) = _sent(e)
    assert _status(reply) == Status.OK and e.state is ConnState.READY


@pytest.mark.parametrize(("level", "status", "offered"), [(500, 200, 500), (350, 200, 350)])
def test_hello_levels_accepted(broker: Broker, level: int, status: int, offered: int) -> None:
    e = _engine(broker)
    e.receive_data(_hello(level))
    reply, challenge = _sent(e)
    assert _status(reply) == status and reply.properties["JMQProtocolLevel"] == offered
    assert challenge.type == PacketType.AUTHENTICATE_REQUEST
    assert e.state is ConnState.AUTHENTICATING


@pytest.mark.parametrize(("level", "offered"), [(600, 500), (200, 350)])
def test_hello_bad_version(broker: Broker, level: int, offered: int) -> None:
    e = _engine(broker)
    assert e.receive_data(_hello(level)) is NO_EFFECTS
    (reply,) = _sent(e)
    assert reply.type == PacketType.HELLO_REPLY
    assert _status(reply) == Status.BAD_VERSION
    assert reply.properties["JMQProtocolLevel"] == offered
    assert e.state is ConnState.NEW  # the client may try again with a level we offer
    e.receive_data(_hello(offered))
    assert _status(_sent(e)[0]) == Status.OK and e.state is ConnState.AUTHENTICATING


def test_second_hello_is_refused_without_closing(broker: Broker) -> None:
    e = _login(broker)
    assert e.receive_data(_hello()) is NO_EFFECTS
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.HELLO_REPLY, Status.ERROR)
    assert e.state is ConnState.READY


# -- authentication ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "password"), [("guest", "wrong"), ("nobody", "x"), ("gone", "gone")]
)
def test_auth_failure_is_invalid_login_then_input_ignored_and_closed(
    broker: Broker, user: str, password: str
) -> None:
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    rest = _drive(e, e.receive_data(_auth_basic(user, password)))
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.AUTHENTICATE_REPLY, Status.INVALID_LOGIN)
    assert e.state is ConnState.REFUSED and e.user is None
    (linger,) = rest
    assert type(linger) is StartTimer and linger.name == "linger"
    # Whatever the refused client sends is ignored.
    assert e.receive_data(_request(PacketType.CREATE_SESSION)) is NO_EFFECTS
    assert _sent(e) == []
    # The linger is over: close.
    assert [type(x) for x in linger.callback()] == [Close]
    assert e.state is ConnState.CLOSED


def test_repeated_failures_are_answered_late(broker: Broker) -> None:
    """The login throttle: past its free failures, the refusal waits (input held)."""
    for _ in range(broker.login_throttle.free):
        e = _engine(broker)
        e.receive_data(_hello())
        _drive(e, e.receive_data(_auth_basic("guest", "wrong")))
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    (delayed,) = _drive(e, e.receive_data(_auth_basic("guest", "wrong")))
    assert type(delayed) is StartTimer and delayed.name == "refusal" and delayed.delay > 0
    assert _sent(e) == [] and e.state is ConnState.VERIFYING
    (linger,) = delayed.callback()
    assert linger.name == "linger" and e.state is ConnState.REFUSED
    assert _status(_sent(e)[0]) == Status.INVALID_LOGIN


def test_auth_type_not_offered(broker: Broker) -> None:
    e = _engine(broker, auth="digest")
    e.receive_data(_hello())
    _sent(e)
    e.receive_data(_auth_basic("guest", "guest"))  # basic answer to a digest challenge
    assert _status(_sent(e)[0]) == Status.INVALID_LOGIN and e.state is ConnState.REFUSED


def test_repository_failure_closes(broker: Broker) -> None:
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    (lookup,) = e.receive_data(_auth_basic("guest", "guest"))
    effects = lookup.done(None, OSError("database down"))
    reply, *_ = _sent(e)
    assert _status(reply) == Status.ERROR
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED


@pytest.mark.parametrize(
    "ptype",
    [PacketType.CREATE_SESSION, PacketType.START, PacketType.START_TRANSACTION],
)
def test_packets_before_authentication_are_refused(broker: Broker, ptype: int) -> None:
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    effects = e.receive_data(_request(ptype))
    reply, goodbye = _sent(e)
    assert (reply.type, _status(reply)) == (ptype + 1, Status.ERROR)
    assert "not authenticated" in str(reply.properties["JMQReason"])
    assert goodbye.type == PacketType.GOODBYE
    assert goodbye.properties["JMQGoodbyeReason"] == GoodbyeReason.CON_FATAL_ERROR
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED


def test_message_before_authentication_is_refused(broker: Broker) -> None:
    e = _engine(broker)
    msg = build_packet(PacketType.TEXT_MESSAGE, flags=FLAG_Q, fields={1: "q"}, body=b"x")
    effects = e.receive_data(msg)
    assert [p.type for p in _sent(e)] == [PacketType.GOODBYE]
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED
    assert broker.router.lookup("q", DEST_QUEUE) is None


def test_authenticate_out_of_sequence(broker: Broker) -> None:
    e = _engine(broker)
    effects = e.receive_data(_auth_basic("guest", "guest"))
    reply, goodbye = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.AUTHENTICATE_REPLY, Status.ERROR)
    assert goodbye.type == PacketType.GOODBYE
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED


def test_login_deadline(broker: Broker) -> None:
    e = _engine(broker)
    e.receive_data(_hello())
    _sent(e)
    assert [type(x) for x in e.auth_expired()] == [Close]
    assert [p.type for p in _sent(e)] == [PacketType.GOODBYE]
    assert e.state is ConnState.CLOSED


class _Members:
    """The HA monitor's part the broker's cluster INFO reads (engine/ports.HAPort)."""

    session = 1

    def __init__(self, members: list[str]) -> None:
        self.members = members

    def hello_verdict(self, cluster_id: object, session: object) -> tuple[int, dict, None]:
        return Status.OK, {}, None

    def cluster_info(self) -> dict[str, object]:
        return {a: {"brokerURL": f"mq://{a}/"} for a in self.members}


def _ha_members(broker: Broker, *members: str) -> None:
    broker.ha = _Members(list(members))  # type: ignore[assignment]
    broker.hello_properties["JMQBrokerList"] = ",".join(f"mq://{a}/" for a in members)


@pytest.mark.parametrize("joined", [False, True])
def test_ha_member_joining_while_a_client_logs_in(broker: Broker, joined: bool) -> None:
    """A member that joins between a client's HELLO_REPLY and its login: the cluster INFO
    the connected clients got passed this one by, so it gets its own after the login
    (else it knows only the broker it is on, and has nowhere to fail over to)."""
    _ha_members(broker, "a:7676")
    e = _engine(broker)
    e.receive_data(_hello())
    hello_reply, _challenge = _sent(e)
    assert hello_reply.properties["JMQBrokerList"] == "mq://a:7676/"
    if joined:
        _ha_members(broker, "a:7676", "b:7676")
        broker.broker_list_changed()  # the monitor's pass: to logged-in clients only
        assert _sent(e) == []
    _drive(e, e.receive_data(_auth_basic("guest", "guest")))
    sent = _sent(e)
    assert (sent[0].type, _status(sent[0])) == (PacketType.AUTHENTICATE_REPLY, Status.OK)
    if not joined:
        assert len(sent) == 1
        return
    (info,) = sent[1:]
    assert info.type == PacketType.INFO and info.properties["JMQRequestType"] == 2
    assert info.properties["JMQBrokerList"] == "mq://a:7676/,mq://b:7676/"


# -- bad input -----------------------------------------------------------------------


def test_unreadable_bytes_close_with_goodbye(broker: Broker) -> None:
    e = _engine(broker)
    effects = e.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(80))
    (goodbye,) = _sent(e)
    assert goodbye.type == PacketType.GOODBYE
    assert "unreadable" in str(goodbye.properties["JMQGoodbyeReasonString"])
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED
    assert e.receive_data(_hello()) is NO_EFFECTS and _sent(e) == []


def test_unknown_packet_type_is_400_and_closes(broker: Broker) -> None:
    e = _login(broker)
    effects = e.receive_data(_request(PacketType.DEBUG))
    reply, goodbye = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.DEBUG + 1, Status.BAD_REQUEST)
    assert goodbye.type == PacketType.GOODBYE
    assert [type(x) for x in effects] == [Close] and e.state is ConnState.CLOSED


# -- flow control --------------------------------------------------------------------


def _session(e: ConnectionEngine, ack_mode: int = AckMode.AUTO_ACKNOWLEDGE) -> int:
    e.receive_data(_request(PacketType.CREATE_SESSION, JMQAckMode=JInt(ack_mode)))
    (reply,) = _sent(e)
    assert _status(reply) == Status.OK
    return int(reply.properties["JMQSessionID"])  # type: ignore[arg-type]


def _producer(e: ConnectionEngine, sid: int, queue: str) -> int:
    e.receive_data(
        _request(
            PacketType.ADD_PRODUCER,
            JMQDestination=queue,
            JMQDestType=JInt(DEST_QUEUE),
            JMQSessionID=JLong(sid),
        )
    )
    (reply,) = _sent(e)
    return int(reply.properties["JMQProducerID"])  # type: ignore[arg-type]


def _message(name: str, flags: int = 0, producer: int = 0, cid: int = 0) -> bytes:
    fields: dict[int, object] = {1: name}
    if producer:
        fields[9] = producer
    return build_packet(
        PacketType.TEXT_MESSAGE, flags=FLAG_Q | flags, fields=fields, body=b"hi", consumer_id=cid
    )


def test_producer_paused_at_a_full_destination_and_resumed(broker: Broker) -> None:
    broker.router.create_destination(
        "fq", DEST_QUEUE, None, auto=False,
        attributes={"maxNumMsgs": 2, "limitBehavior": "FLOW_CONTROL"},
    )  # fmt: skip
    prod_conn = _login(broker)
    pid = _producer(prod_conn, _session(prod_conn), "fq")
    # The end of the producer's window (C flag): room left, so RESUME_FLOW at once.
    assert prod_conn.receive_data(_message("fq", FLAG_C | FLAG_A, pid, 11)) is NO_EFFECTS
    send_reply, resume = _sent(prod_conn)
    assert send_reply.type == PacketType.SEND_REPLY and _status(send_reply) == 200
    assert resume.type == PacketType.RESUME_FLOW and resume.properties["JMQProducerID"] == pid
    # The second message fills the queue: its window end is not answered; the producer waits.
    prod_conn.receive_data(_message("fq", FLAG_C, pid))
    assert [p.type for p in _sent(prod_conn)] == []
    assert broker.router.lookup("fq", DEST_QUEUE).waiting_producers  # type: ignore[union-attr]

    cons_conn = _login(broker)
    csid = _session(cons_conn)
    cons_conn.receive_data(
        _request(
            PacketType.ADD_CONSUMER,
            JMQDestination="fq",
            JMQDestType=JInt(DEST_QUEUE),
            JMQSessionID=JLong(csid),
        )
    )
    (reply,) = _sent(cons_conn)
    cid = int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]
    cons_conn.receive_data(_request(PacketType.START))
    start_reply, delivery, _second = _sent(cons_conn)
    assert start_reply.type == PacketType.START + 1  # START_REPLY
    assert delivery.type == PacketType.TEXT_MESSAGE and delivery.consumer_id == cid
    ack = build_packet(
        PacketType.ACKNOWLEDGE,
        body=struct.pack(">q", cid) + delivery.sysmsgid,
        flags=FLAG_A,
        consumer_id=5,
    )
    assert cons_conn.receive_data(ack) is NO_EFFECTS
    assert _status(_sent(cons_conn)[0]) == Status.OK
    # Room again: the held producer is resumed.
    (resume,) = _sent(prod_conn)
    assert resume.type == PacketType.RESUME_FLOW and resume.properties["JMQProducerID"] == pid


def test_a_message_over_the_frame_limit_still_answers_the_producers_flow(
    broker: Broker,
) -> None:
    """The last message of a producer's credit (C flag) is refused for its size: the
    client that sent it waits for RESUME_FLOW, so it gets one beside the 413."""
    e = _login(broker)
    pid = _producer(e, _session(e), "bigq")
    e.reader.max_packet_size = 4096
    big = build_packet(
        PacketType.BYTES_MESSAGE,
        flags=FLAG_Q | FLAG_C | FLAG_A,
        fields={1: "bigq", 9: pid},
        body=bytes(3 * 4096),
        consumer_id=12,
    )
    for i in range(0, len(big), 1000):  # in pieces, as a socket delivers it
        e.receive_data(big[i : i + 1000])
    refused, resume = _sent(e)
    assert refused.type == PacketType.SEND_REPLY and refused.consumer_id == 12
    assert _status(refused) == Status.ENTITY_TOO_LARGE
    assert resume.type == PacketType.RESUME_FLOW
    assert resume.properties["JMQProducerID"] == pid and resume.properties["JMQSize"] > 0
    # Without the C flag there is nothing to resume: the 413 alone.
    e.receive_data(
        build_packet(
            PacketType.BYTES_MESSAGE,
            flags=FLAG_Q | FLAG_A,
            fields={1: "bigq", 9: pid},
            body=bytes(3 * 4096),
            consumer_id=13,
        )
    )
    (refused,) = _sent(e)
    assert _status(refused) == Status.ENTITY_TOO_LARGE and e.state is ConnState.READY


def test_a_reply_the_store_held_is_handed_to_the_driver_at_once(broker: Broker) -> None:
    # A persistent send's SEND_REPLY waits for the store; once released, the driver's
    # flush hook is called with it queued, so it is not left for the next loop turn
    # (where the reads of other connections would go first).
    held: list = []
    broker.when_stored = held.append  # type: ignore[method-assign]  # a store that holds
    broker.router.create_destination("pq", DEST_QUEUE, None, auto=False)
    e = _login(broker)
    _session(e)
    flushed: list[list[Packet]] = []
    e.flush = lambda: flushed.append(_sent(e))
    e.receive_data(_message("pq", FLAG_P | FLAG_A, cid=31))
    assert _sent(e) == [] and len(held) == 1
    held.pop()()
    ((reply,),) = flushed
    assert (reply.type, _status(reply), reply.consumer_id) == (PacketType.SEND_REPLY, 200, 31)
    # A non-persistent send is answered within the read, with no extra flush.
    e.receive_data(_message("pq", FLAG_A, cid=32))
    assert [p.type for p in _sent(e)] == [PacketType.SEND_REPLY]
    assert held == [] and len(flushed) == 1


def test_connection_flow_pauses_deliveries_until_resume_flow(broker: Broker) -> None:
    broker.router.create_destination("cq", DEST_QUEUE, None, auto=False)
    e = _engine(broker)
    e.receive_data(_hello(JMQSize=JInt(2)))
    _sent(e)
    _drive(e, e.receive_data(_auth_basic("guest", "guest")))
    _sent(e)
    sid = _session(e)
    e.receive_data(
        _request(
            PacketType.ADD_CONSUMER,
            JMQDestination="cq",
            JMQDestType=JInt(DEST_QUEUE),
            JMQSessionID=JLong(sid),
        )
    )
    _sent(e)
    e.receive_data(_request(PacketType.START))
    _sent(e)
    sender = _login(broker)
    for _ in range(3):
        sender.receive_data(_message("cq"))
    first, second = _sent(e)
    assert not first.flags & FLAG_F and second.flags & FLAG_F  # the last before the pause
    assert e.flow_paused and not e.can_deliver()
    e.receive_data(build_packet(PacketType.RESUME_FLOW, props={"JMQSize": JInt(2)}))
    (third,) = _sent(e)
    assert third.type == PacketType.TEXT_MESSAGE and not e.flow_paused


# -- destination names ---------------------------------------------------------------


def _on_dest(e: ConnectionEngine, ptype: int, name: str, dtype: int, sid: int) -> Packet:
    e.receive_data(
        _request(ptype, JMQDestination=name, JMQDestType=JInt(dtype), JMQSessionID=JLong(sid))
    )
    (reply,) = _sent(e)
    assert reply.type == ptype + 1
    return reply


@pytest.mark.parametrize("autocreate", [True, False])
@pytest.mark.parametrize("name", ["*.x", "a.>", "foo.*", ">", "a*b"])
def test_wildcard_queue_names_are_refused_415(broker: Broker, name: str, autocreate: bool) -> None:
    """As OpenMQ's broker answers (checked against it): 415 "Wildcards are not supported
    for queues" to every JMS way to such a queue, auto-creation on or off."""
    broker.router.settings.autocreate_queue = autocreate
    e = _login(broker)
    sid = _session(e)
    for ptype in (
        PacketType.VERIFY_DESTINATION,
        PacketType.CREATE_DESTINATION,
        PacketType.ADD_PRODUCER,
        PacketType.ADD_CONSUMER,
    ):
        reply = _on_dest(e, ptype, name, DEST_QUEUE, sid)
        assert _status(reply) == Status.UNSUPPORTED_TYPE, reply.type_name
        assert "wildcards" in str(reply.properties["JMQReason"])
    # A send without a producer (as the C client may), then inside a transaction.
    e.receive_data(_message(name, FLAG_A, cid=21))
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.SEND_REPLY, Status.UNSUPPORTED_TYPE)
    e.receive_data(_request(PacketType.START_TRANSACTION, JMQSessionID=JLong(sid)))
    tid = int(_sent(e)[0].properties["JMQTransactionID"])  # type: ignore[arg-type]
    e.receive_data(
        build_packet(
            PacketType.TEXT_MESSAGE, flags=FLAG_Q | FLAG_A, fields={1: name}, body=b"t",
            props={"JMQTransactionID": JLong(tid)}, consumer_id=22,
        )
    )  # fmt: skip
    (reply,) = _sent(e)
    assert (reply.type, _status(reply)) == (PacketType.SEND_REPLY, Status.UNSUPPORTED_TYPE)
    assert broker.router.lookup(name, DEST_QUEUE) is None
    assert e.state is ConnState.READY


@pytest.mark.parametrize("name", ["foo.*", "*.x", ">"])
def test_wildcard_topic_names_are_still_taken(broker: Broker, name: str) -> None:
    """Topics keep their wildcard names (OpenMQ's broker takes these patterns too)."""
    e = _login(broker)
    sid = _session(e)
    assert _status(_on_dest(e, PacketType.VERIFY_DESTINATION, name, DEST_TOPIC, sid)) == 404
    for ptype in (PacketType.CREATE_DESTINATION, PacketType.ADD_PRODUCER):
        assert _status(_on_dest(e, ptype, name, DEST_TOPIC, sid)) == Status.OK
    reply = _on_dest(e, PacketType.ADD_CONSUMER, name, DEST_TOPIC, sid)
    assert _status(reply) == Status.OK
    cid = int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]
    e.receive_data(_request(PacketType.START))
    _sent(e)
    e.receive_data(
        build_packet(PacketType.TEXT_MESSAGE, flags=FLAG_A, fields={1: name}, body=b"hi")
    )
    sent = _sent(e)
    assert [(p.type, _status(p)) for p in sent if p.type == PacketType.SEND_REPLY] == [
        (PacketType.SEND_REPLY, Status.OK)
    ]
    assert [p.consumer_id for p in sent if p.type == PacketType.TEXT_MESSAGE] == [cid]


# -- transactions --------------------------------------------------------------------


def test_transaction_statuses(broker: Broker) -> None:
    e = _login(broker)
    sid = _session(e, AckMode.NONE)

    def txn_request(ptype: int, **props) -> Packet:
        e.receive_data(_request(ptype, **props))
        (reply,) = _sent(e)
        assert reply.type == ptype + 1
        return reply

    started = txn_request(PacketType.START_TRANSACTION, JMQSessionID=JLong(sid))
    assert _status(started) == Status.OK
    tid = int(started.properties["JMQTransactionID"])  # type: ignore[arg-type]
    e.receive_data(_message("tq", 0) [:0] or build_packet(
        PacketType.TEXT_MESSAGE, flags=FLAG_Q | FLAG_A, fields={1: "tq"}, body=b"t",
        props={"JMQTransactionID": JLong(tid)},
    ))  # fmt: skip
    sent = _sent(e)
    assert [(p.type, _status(p)) for p in sent] == [(PacketType.SEND_REPLY, 200)]
    committed = txn_request(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(tid))
    assert _status(committed) == Status.OK and committed.properties["JMQTransactionID"] == tid
    assert broker.router.lookup("tq", DEST_QUEUE).msg_count == 1  # type: ignore[union-attr]
    # Committing it again: it is gone.
    assert _status(txn_request(PacketType.COMMIT_TRANSACTION, JMQTransactionID=JLong(tid))) == 404

    second = txn_request(PacketType.START_TRANSACTION, JMQSessionID=JLong(sid))
    tid2 = int(second.properties["JMQTransactionID"])  # type: ignore[arg-type]
    rolled = txn_request(PacketType.ROLLBACK_TRANSACTION, JMQTransactionID=JLong(tid2))
    assert _status(rolled) == Status.OK
    assert _status(txn_request(PacketType.VERIFY_TRANSACTION, JMQTransactionID=JLong(tid2))) == 404
    assert _status(txn_request(PacketType.COMMIT_TRANSACTION)) == Status.BAD_REQUEST
    assert e.state is ConnState.READY


def test_transaction_lifetime_is_a_timer_effect(broker: Broker) -> None:
    from broker.engine import TransactionTimer

    e = _login(broker)
    sid = _session(e, AckMode.NONE)
    effects = e.receive_data(
        _request(PacketType.START_TRANSACTION, JMQSessionID=JLong(sid), JMQLifetime=JInt(5000))
    )
    (timer,) = effects
    assert type(timer) is TransactionTimer and timer.delay_ms == 5000
    assert _status(_sent(e)[0]) == Status.OK


def test_acknowledgements_of_what_is_not_unacknowledged_here_are_refused(
    broker: Broker,
) -> None:
    """As OpenMQ's broker answers them: 200 for a delivered message, 409 CONFLICT when
    it is not delivered and unacknowledged here any more (acknowledged already), 404 for
    a consumer the connection never had -- in the one-block fast path and in a batch."""
    broker.router.create_destination("ackq", DEST_QUEUE, None, auto=False)
    prod = _login(broker)
    pid = _producer(prod, _session(prod), "ackq")
    prod.receive_data(_message("ackq", 0, pid) + _message("ackq", 0, pid))
    e = _login(broker)
    sid = _session(e, AckMode.CLIENT_ACKNOWLEDGE)
    reply = _on_dest(e, PacketType.ADD_CONSUMER, "ackq", DEST_QUEUE, sid)
    cid = int(reply.properties["JMQConsumerID"])  # type: ignore[arg-type]
    e.receive_data(_request(PacketType.START))
    _start, first, second = _sent(e)

    def ack(*blocks: tuple[int, bytes]) -> int:
        body = b"".join(struct.pack(">q", c) + key for c, key in blocks)
        e.receive_data(build_packet(PacketType.ACKNOWLEDGE, body=body, flags=FLAG_A))
        (reply,) = _sent(e)
        assert reply.type == PacketType.ACKNOWLEDGE_REPLY
        return _status(reply)

    assert ack((cid, first.sysmsgid)) == Status.OK
    assert ack((cid, first.sysmsgid)) == Status.CONFLICT  # the fast path
    assert ack((cid, second.sysmsgid), (cid, first.sysmsgid)) == Status.CONFLICT
    assert ack((cid, second.sysmsgid)) == Status.CONFLICT, "the batch acknowledged it"
    assert ack((cid + 1000, second.sysmsgid)) == Status.NOT_FOUND
