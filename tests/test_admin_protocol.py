"""The admin protocol (docs/developers/protocol.md): imqcmd's requests on queue ``__JMQAdmin``.

The broker tests replay imqcmd's captured opening on the ADMIN service, then send its
captured admin HELLO (and requests built like it) and read the replies from the
temporary reply queue.  The javaser tests compare ``java.util.Properties`` and
``java.util.Vector`` bytes with what OpenJDK 17's ObjectOutputStream wrote for::

    Properties p = new Properties();                       // JDK_PROPS_EMPTY
    p.setProperty("imq.portmapper.port", "7676");
    p.setProperty("imq.instancename", "imqbroker");
    p.setProperty("a", "b");                               // JDK_PROPS3
    // JDK_PROPS20: for i in 0..19 setProperty("imq.key" + (i*7919%101) + ".x" + i, "v" + i)
    Vector<Object> v = new Vector<>();                     // JDK_VEC_EMPTY
    Hashtable h = new Hashtable(); h.put("cxnid", 1234567890123L); h.put("host", "127.0.0.1");
    h.put("port", 40000); h.put("user", "admin"); h.put("nproducers", 1); h.put("nconsumers", 1);
    Hashtable h2 = new Hashtable(); h2.put("cxnid", 5L); h2.put("user", "guest");
    h2.put("nproducers", 0); v.add(h); v.add(h2);           // JDK_VEC2
    // JDK_VEC11: a Vector of the Strings "s0" .. "s10" (grown to capacity 20)
"""

from __future__ import annotations

import pytest

from broker.admintools.client import read_vector
from broker.protocol.auth import encode_auth_body, encode_basic_password
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_properties_object,
    decode_vector,
    encode_properties_object,
    encode_vector,
)
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import FLAG_A, FLAG_Q, PacketType
from broker.security.digest import digest_response, md5str

from .wire import Peer, control, login, rewrite, vector

PREFIX = "imqcmd/query-bkr"
CAPTURED_SESSION = 1001
CAPTURED_PRODUCER = 1002
CAPTURED_CONNECTION = 4242424242
CAPTURED_TEMP = b"temporary_destination://queue/127.0.0.1/60708/1"
_sessions = iter(range(10000, 99999))


def _captured(name: str, temp: bytes) -> bytes:
    """A captured packet with the reply queue renamed (same length) for this session, as
    each imqcmd run names its temporary queue after its own client port."""
    return vector(f"{PREFIX}/{name}").replace(CAPTURED_TEMP, temp)


# --------------------------------------------------------------------------------------
# javaser: java.util.Properties and java.util.Vector
# --------------------------------------------------------------------------------------

JDK_PROPS_EMPTY = bytes.fromhex(
    "aced0005737200146a6176612e7574696c2e50726f706572746965733912d07a70363e980200014c00086465"
    "6661756c74737400164c6a6176612f7574696c2f50726f706572746965733b787200136a6176612e7574696c"
    "2e486173687461626c6513bb0f25214ae4b803000246000a6c6f6164466163746f724900097468726573686f"
    "6c6478703f40000000000002770800000003000000007870"
)
JDK_PROPS3 = bytes.fromhex(
    "aced0005737200146a6176612e7574696c2e50726f706572746965733912d07a70363e980200014c00086465"
    "6661756c74737400164c6a6176612f7574696c2f50726f706572746965733b787200136a6176612e7574696c"
    "2e486173687461626c6513bb0f25214ae4b803000246000a6c6f6164466163746f724900097468726573686f"
    "6c6478703f4000000000000577080000000700000003740013696d712e706f72746d61707065722e706f7274"
    "74000437363736740010696d712e696e7374616e63656e616d65740009696d7162726f6b6572740001617400"
    "01627870"
)
JDK_PROPS20 = bytes.fromhex(
    "aced0005737200146a6176612e7574696c2e50726f706572746965733912d07a70363e980200014c00086465"
    "6661756c74737400164c6a6176612f7574696c2f50726f706572746965733b787200136a6176612e7574696c"
    "2e486173687461626c6513bb0f25214ae4b803000246000a6c6f6164466163746f724900097468726573686f"
    "6c6478703f4000000000001577080000001d0000001474000d696d712e6b657935302e783136740003763136"
    "74000c696d712e6b657938352e7837740002763774000c696d712e6b657936332e7834740002763474000c69"
    "6d712e6b657938322e7832740002763274000c696d712e6b657934312e7831740002763174000c696d712e6b"
    "657934342e7836740002763674000d696d712e6b657932382e78313374000376313374000c696d712e6b6579"
    "32352e7838740002763874000d696d712e6b657933312e78313874000376313874000c696d712e6b6579392e"
    "78313574000376313574000c696d712e6b657932322e7833740002763374000c696d712e6b6579362e783130"
    "74000376313074000d696d712e6b657937322e78313974000376313974000d696d712e6b657939312e783137"
    "74000376313774000d696d712e6b657938382e78313274000376313274000d696d712e6b657934372e783131"
    "74000376313174000d696d712e6b657936392e78313474000376313474000b696d712e6b6579302e78307400"
    "02763074000b696d712e6b6579332e7835740002763574000c696d712e6b657936362e783974000276397870"
)
JDK_VEC_EMPTY = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000000757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a7070707070707070707078"
)
JDK_VEC2 = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000002757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a737200136a6176612e7574696c2e486173687461"
    "626c6513bb0f25214ae4b803000246000a6c6f6164466163746f724900097468726573686f6c6478703f4000"
    "000000000877080000000b0000000674000563786e69647372000e6a6176612e6c616e672e4c6f6e673b8be4"
    "90cc8f23df0200014a000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b"
    "02000078700000011f71fb04cb740004706f7274737200116a6176612e6c616e672e496e746567657212e2a0"
    "a4f781873802000149000576616c75657871007e000900009c407400047573657274000561646d696e74000a"
    "6e70726f6475636572737371007e000c00000001740004686f73747400093132372e302e302e3174000a6e63"
    "6f6e73756d65727371007e0011787371007e00053f4000000000000877080000000b0000000371007e000773"
    "71007e0008000000000000000571007e000e740005677565737471007e00107371007e000c00000000787070"
    "70707070707078"
)
JDK_VEC11 = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b7870000000000000000b757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c0200007870000000147400027330740002733174000273327400027333"
    "7400027334740002733574000273367400027337740002733874000273397400037331307070707070707070"
    "7078"
)

PROPS3 = {"imq.portmapper.port": "7676", "imq.instancename": "imqbroker", "a": "b"}
PROPS20 = {f"imq.key{i * 7919 % 101}.x{i}": f"v{i}" for i in range(20)}
ROW1 = {
    "cxnid": JLong(1234567890123),
    "host": "127.0.0.1",
    "port": JInt(40000),
    "user": "admin",
    "nproducers": JInt(1),
    "nconsumers": JInt(1),
}
ROW2 = {"cxnid": JLong(5), "user": "guest", "nproducers": JInt(0)}


@pytest.mark.parametrize(
    ("values", "jdk"),
    [({}, JDK_PROPS_EMPTY), (PROPS3, JDK_PROPS3), (PROPS20, JDK_PROPS20)],
    ids=["empty", "three", "twenty-resized"],
)
def test_properties_bytes_match_jdk17(values, jdk):
    assert encode_properties_object(values) == jdk
    assert decode_properties_object(jdk) == values


@pytest.mark.parametrize(
    ("items", "jdk"),
    [([], JDK_VEC_EMPTY), ([ROW1, ROW2], JDK_VEC2), ([f"s{i}" for i in range(11)], JDK_VEC11)],
    ids=["empty", "hashtables", "grown"],
)
def test_vector_bytes_match_jdk17(items, jdk):
    assert encode_vector(items) == jdk
    decoded = decode_vector(jdk)
    assert decoded == items
    if items and isinstance(items[0], dict):
        assert type(decoded[0]["cxnid"]) is JLong and type(decoded[0]["port"]) is JInt


def test_properties_and_vector_round_trips():
    big = {f"imq.some.property.{i}": str(i) * (i % 5) for i in range(300)}
    assert decode_properties_object(encode_properties_object(big)) == big
    rows = [{"cxnid": JLong(i), "user": f"u{i}", "port": JInt(i)} for i in range(45)]
    rows.append({})
    assert decode_vector(encode_vector(rows)) == rows
    assert decode_vector(encode_vector([None, "x", JInt(3), b"\x01"])) == [None, "x", 3, b"\x01"]


def test_properties_and_vector_reject_bad_input():
    with pytest.raises(JavaSerializationError):
        encode_properties_object({"a": JInt(1)})  # type: ignore[dict-item]
    with pytest.raises(JavaSerializationError):
        decode_vector(JDK_PROPS3)
    with pytest.raises(JavaSerializationError):
        decode_properties_object(JDK_VEC2)
    with pytest.raises(JavaSerializationError):
        decode_vector(JDK_VEC2[:-3])
    # a Properties with defaults (non-null last field) is refused
    with pytest.raises(JavaSerializationError):
        decode_properties_object(JDK_PROPS3[:-1] + b"\x74\x00\x01x")


# --------------------------------------------------------------------------------------
# The broker
# --------------------------------------------------------------------------------------


class AdminSession:
    """imqcmd's admin connection, replayed from the capture."""

    def __init__(self, b) -> None:
        self.peer = peer = Peer(b.host, b.admin_port)
        temp = CAPTURED_TEMP.replace(b"60708", str(next(_sessions)).encode())
        peer.send(vector(f"{PREFIX}/c2b-01-HELLO.hex"))
        self.conn_id = conn_id = peer.expect(PacketType.HELLO_REPLY).properties["JMQConnectionID"]
        kind = peer.expect(PacketType.AUTHENTICATE_REQUEST)
        if kind.properties["JMQAuthType"] == "basic":
            body = encode_auth_body("admin", encode_basic_password("admin"))
            auth = rewrite(vector(f"{PREFIX}/c2b-04-AUTHENTICATE.hex"), {}, body=body)
        else:
            cred = digest_response(md5str("admin:admin"), kind.body.decode("ascii"))
            auth = build_packet(
                PacketType.AUTHENTICATE,
                props={"JMQAuthType": kind.properties["JMQAuthType"]},
                body=encode_auth_body("admin", cred),
                flags=0x10,
                consumer_id=2,
            )
        peer.request(auth, PacketType.AUTHENTICATE_REPLY)
        peer.send(vector(f"{PREFIX}/c2b-06-START.hex"))
        self.sid = peer.request(
            vector(f"{PREFIX}/c2b-07-CREATE_SESSION.hex"), PacketType.CREATE_SESSION_REPLY
        ).properties["JMQSessionID"]
        ids = {CAPTURED_SESSION: self.sid, CAPTURED_CONNECTION: conn_id}
        peer.request(
            _captured("c2b-09-CREATE_DESTINATION.hex", temp), PacketType.CREATE_DESTINATION_REPLY
        )
        # __JMQAdmin: 409 once an earlier session made it.
        peer.send(vector(f"{PREFIX}/c2b-11-CREATE_DESTINATION.hex"))
        status = peer.expect(PacketType.CREATE_DESTINATION_REPLY).properties["JMQStatus"]
        assert status in (200, 409)
        pid = peer.request(
            rewrite(vector(f"{PREFIX}/c2b-13-ADD_PRODUCER.hex"), ids),
            PacketType.ADD_PRODUCER_REPLY,
        ).properties["JMQProducerID"]
        self.ids = {**ids, CAPTURED_PRODUCER: pid}
        peer.request(
            _captured("c2b-15-CREATE_DESTINATION.hex", temp),
            PacketType.CREATE_DESTINATION_REPLY,
            status=409,
        )
        self.reply_consumer = peer.request(
            rewrite(_captured("c2b-17-ADD_CONSUMER.hex", temp), ids),
            PacketType.ADD_CONSUMER_REPLY,
        ).properties["JMQConsumerID"]
        self.hello_request = rewrite(_captured("c2b-19-OBJECT_MESSAGE.hex", temp), self.ids)
        self.template = parse_packet(self.hello_request)

    def request(self, message_type: int, ack: bool = False, **props):
        """Send a request shaped like imqcmd's HELLO with other properties."""
        t = self.template
        raw = build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(message_type), **props},
            fields=t.fields,
            flags=t.flags | (FLAG_A if ack else 0),
            consumer_id=7 if ack else 0,
            priority=t.priority,
        )
        self.peer.send(raw)
        if ack:
            assert self.peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"] == 200
        return self.reply(message_type + 1)

    def reply(self, reply_type: int, status: int = 200):
        pkt = self.peer.expect(PacketType.OBJECT_MESSAGE)
        assert pkt.consumer_id == self.reply_consumer
        assert pkt.fields[1] == self.template.fields[4]  # delivered to the JMSReplyTo queue
        assert pkt.properties["JMQMessageType"] == reply_type
        assert pkt.properties["JMQStatus"] == status, pkt.properties
        return pkt


def _fill(b, queue: str, count: int) -> None:
    peer = login(b.host, b.jms_port)
    for n in range(count):
        peer.send(
            build_packet(
                PacketType.TEXT_MESSAGE,
                flags=FLAG_Q | FLAG_A,
                consumer_id=n + 1,
                sequence=n + 1,
                fields={1: queue},
                body=f"m{n}".encode(),
            )
        )
        assert peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"] == 200
    peer.close()


def test_admin_hello_with_imqcmds_captured_request(broker):
    admin = AdminSession(broker)
    admin.peer.send(admin.hello_request)
    reply = admin.reply(29)
    assert reply.type == PacketType.OBJECT_MESSAGE
    assert reply.properties["JMQInstanceName"] == broker.instance
    assert reply.fields[6] == "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"
    assert reply.flags & FLAG_Q
    # A second reply has its own SysMessageID.
    admin.peer.send(admin.hello_request)
    assert admin.reply(29).sysmsgid != reply.sysmsgid
    admin.peer.close()


def test_get_broker_props_and_connections(broker):
    admin = AdminSession(broker)
    props = decode_properties_object(admin.request(54).body)
    assert props["imq.portmapper.port"] == str(broker.portmapper_port)
    assert props["imq.instancename"] == broker.instance
    rows = decode_vector(admin.request(16, ack=True).body)
    mine = [r for r in rows if r["cxnid"] == admin.conn_id]
    assert len(mine) == 1
    row = mine[0]
    assert type(row["cxnid"]) is JLong and row["host"] == "127.0.0.1"
    assert row["user"] == "admin" and row["service"] == "admin"
    assert row["nproducers"] == 1 and row["nconsumers"] == 1
    assert isinstance(row["clientplatform"], str) and row["clientplatform"]
    assert row["clientid"] == ""  # none set: OpenMQ's empty string
    assert row["nsessions"] == 1
    admin.peer.close()


def test_purge_and_destroy_destination(broker):
    admin = AdminSession(broker)
    _fill(broker, "adminPurgeQ", 5)
    admin.request(32, JMQDestination="adminPurgeQ", JMQDestType=JInt(1))
    # The queue is empty: a new consumer gets only what is sent after the purge.
    _fill(broker, "adminPurgeQ", 0)
    cons = admin.peer.request(
        control(
            PacketType.ADD_CONSUMER,
            11,
            JMQDestination="adminPurgeQ",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(admin.sid),
        ),
        PacketType.ADD_CONSUMER_REPLY,
    ).properties["JMQConsumerID"]
    peer = login(broker.host, broker.jms_port)
    peer.send(
        build_packet(
            PacketType.TEXT_MESSAGE,
            flags=FLAG_Q | FLAG_A,
            consumer_id=1,
            sequence=99,
            fields={1: "adminPurgeQ"},
            body=b"after",
        )
    )
    peer.expect(PacketType.SEND_REPLY)
    got = admin.peer.expect(PacketType.TEXT_MESSAGE)
    assert got.consumer_id == cons and got.body == b"after"
    peer.close()
    admin.request_status = None
    t = admin.template
    admin.peer.send(  # unknown destination: 404
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={
                "JMQMessageType": JInt(32),
                "JMQDestination": "noSuchQueue",
                "JMQDestType": JInt(1),
            },
            fields=t.fields,
            flags=t.flags,
        )
    )
    assert "noSuchQueue" in admin.reply(33, status=404).properties["JMQErrorString"]
    # DESTROY_DESTINATION: a queue with messages goes, then it is unknown.
    _fill(broker, "adminDestroyQ", 2)
    admin.request(12, JMQDestination="adminDestroyQ", JMQDestType=JInt(1))
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={
                "JMQMessageType": JInt(12),
                "JMQDestination": "adminDestroyQ",
                "JMQDestType": JInt(1),
            },
            fields=t.fields,
            flags=t.flags,
        )
    )
    admin.reply(13, status=404)
    admin.peer.close()


def test_unsupported_command_is_501(broker):
    admin = AdminSession(broker)
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(24)},
            fields=admin.template.fields,
            flags=admin.template.flags,
        )
    )
    reply = admin.reply(25, status=501)
    assert reply.properties["JMQErrorString"] == ("GET_LOGS is not supported by this broker yet")
    # A request without JMQMessageType gets no reply; the connection carries on.
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE, fields=admin.template.fields, flags=admin.template.flags
        )
    )
    admin.peer.send(admin.hello_request)
    admin.reply(29)
    admin.peer.close()


def test_admin_queue_stays_refused_on_normal_service(broker):
    peer = login(broker.host, broker.jms_port, "admin", "admin")
    peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(28)},
            flags=FLAG_Q | FLAG_A,
            consumer_id=3,
            fields={1: "__JMQAdmin"},
        )
    )
    assert peer.expect(PacketType.SEND_REPLY).properties["JMQStatus"] == 403
    peer.close()


def test_shutdown_replies_then_broker_exits(own_broker):
    b = own_broker("imq.authentication.type=basic")
    admin = AdminSession(b)
    admin.request(38)
    assert b.proc.wait(15) is not None
    admin.peer.close()


# --------------------------------------------------------------------------------------
# PAUSE (30) / RESUME (36)
# --------------------------------------------------------------------------------------


def _ask(admin, message_type: int, status: int = 200, **props):
    """A request whose reply status is checked (AdminSession.request expects 200)."""
    t = admin.template
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(message_type), **props},
            fields=t.fields,
            flags=t.flags,
        )
    )
    return admin.reply(message_type + 1, status=status)


def _collect(peer, count: int) -> dict[int, list]:
    got: dict[int, list] = {}
    for _ in range(count):
        pkt = peer.recv()
        got.setdefault(pkt.type, []).append(pkt)
    return got


def test_pause_and_resume_destination_consumers(broker):
    admin = AdminSession(broker)
    _ask(
        admin,
        30,
        404,
        JMQPauseTarget="JMQDestination",
        JMQDestination="adminPauseQ",
        JMQDestType=JInt(1),
        JMQDestState=JInt(1),
    )
    _fill(broker, "adminPauseQ", 3)
    admin.request(
        30,
        JMQPauseTarget="JMQDestination",
        JMQDestination="adminPauseQ",
        JMQDestType=JInt(1),
        JMQDestState=JInt(1),
    )
    cons = admin.peer.request(
        control(
            PacketType.ADD_CONSUMER,
            11,
            JMQDestination="adminPauseQ",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(admin.sid),
        ),
        PacketType.ADD_CONSUMER_REPLY,
    ).properties["JMQConsumerID"]
    # Nothing is delivered while paused: the next packet is the HELLO reply.
    admin.request(28)
    _fill(broker, "adminPauseQ", 1)  # producers are not paused: the send is accepted
    admin.request(28)
    # RESUME delivers everything (before the RESUME reply).
    t = admin.template
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={
                "JMQMessageType": JInt(36),
                "JMQPauseTarget": "JMQDestination",
                "JMQDestination": "adminPauseQ",
                "JMQDestType": JInt(1),
            },
            fields=t.fields,
            flags=t.flags,
        )
    )
    got = _collect(admin.peer, 5)
    texts = got[PacketType.TEXT_MESSAGE]
    assert [p.body for p in texts] == [b"m0", b"m1", b"m2", b"m0"]
    assert all(p.consumer_id == cons for p in texts)
    (reply,) = got[PacketType.OBJECT_MESSAGE]
    assert reply.properties["JMQMessageType"] == 37 and reply.properties["JMQStatus"] == 200
    admin.peer.close()


def test_pause_producers_withholds_resume_flow(broker):
    admin = AdminSession(broker)
    _fill(broker, "adminPauseProdQ", 1)
    where = {"JMQDestination": "adminPauseProdQ", "JMQDestType": JInt(1)}
    admin.request(30, JMQPauseTarget="JMQDestination", JMQDestState=JInt(2), **where)
    # A new producer is told to wait (JMQSize 0) ...
    prod = admin.peer.request(
        control(PacketType.ADD_PRODUCER, 12, JMQSessionID=JLong(admin.sid), **where),
        PacketType.ADD_PRODUCER_REPLY,
    ).properties
    assert prod["JMQSize"] == 0
    # ... and consumers still get the queue's messages.
    admin.peer.request(
        control(PacketType.ADD_CONSUMER, 13, JMQSessionID=JLong(admin.sid), **where),
        PacketType.ADD_CONSUMER_REPLY,
    )
    assert admin.peer.expect(PacketType.TEXT_MESSAGE).body == b"m0"
    admin.request(28)  # no RESUME_FLOW meanwhile
    # RESUME releases the producer with a fresh allowance.
    _ask(admin, 36, 404, JMQPauseTarget="JMQDestination", JMQDestination="nope")
    t = admin.template
    admin.peer.send(
        build_packet(
            PacketType.OBJECT_MESSAGE,
            props={"JMQMessageType": JInt(36), "JMQPauseTarget": "JMQDestination", **where},
            fields=t.fields,
            flags=t.flags,
        )
    )
    got = _collect(admin.peer, 2)
    (flow,) = got[PacketType.RESUME_FLOW]
    assert flow.properties["JMQProducerID"] == prod["JMQProducerID"]
    assert flow.properties["JMQSize"] > 0
    assert got[PacketType.OBJECT_MESSAGE][0].properties["JMQStatus"] == 200
    admin.peer.close()


def test_pause_and_resume_service(own_broker):
    b = own_broker()
    admin = AdminSession(b)
    _ask(admin, 30, 404, JMQPauseTarget="JMQServiceName", JMQServiceName="nosuch")
    _ask(admin, 30, 400, JMQPauseTarget="JMQServiceName", JMQServiceName="admin")
    admin.request(30, JMQPauseTarget="JMQServiceName", JMQServiceName="jms")
    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    assert peer.expect(PacketType.HELLO_REPLY).properties["JMQStatus"] == 503
    assert peer.closed_by_peer()
    peer.close()
    admin.request(36, JMQPauseTarget="JMQServiceName", JMQServiceName="jms")
    login(b.host, b.jms_port).close()
    # No target: the whole broker (its NORMAL services; the admin service stays usable).
    admin.request(30)
    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    assert peer.expect(PacketType.HELLO_REPLY).properties["JMQStatus"] == 503
    peer.close()
    AdminSession(b).peer.close()
    admin.request(36)
    login(b.host, b.jms_port).close()
    admin.peer.close()


# --------------------------------------------------------------------------------------
# GET_DESTINATIONS (20): a Vector of DestinationInfo
# --------------------------------------------------------------------------------------

# What OpenJDK 17 wrote (ObjectOutputStream) for a Vector of two DestinationInfo objects,
# then a Vector of one with every field set, then two ServiceInfo objects, using
# same-shaped copies of OpenMQ's classes (package, fields, serialVersionUIDs):
#   d = new DestinationInfo(); d.name = "q1"; d.type = 1; d.useDMQ = true;
#   d.nMessages = 3; d.nMessageBytes = 99;  d2.name = "t2"; d2.type = 2; d2.maxMessages = -1;
# (FULL_DEST below; s1 = jms/tcp port 7676 2 connections threads 10..1000,
#  s2 = admin/tcp2 type 1 dynamicPort).
JDK_DEST2 = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000002757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a73720030636f6d2e73756e2e6d6573736167696e"
    "672e6a6d712e7574696c2e61646d696e2e44657374696e6174696f6e496e666f61be1b376d1e8af20200245a"
    "000b6175746f6372656174656449000764657374434450490011646573744c696d69744265686176696f7249"
    "00096465737453636f706549000964657374537461746549000866756c6c747970654900126d617841637469"
    "7665436f6e73756d6572734900146d61784661696c6f766572436f6e73756d6572734a000f6d61784d657373"
    "61676542797465734a000e6d61784d65737361676553697a6549000b6d61784d657373616765734900156d61"
    "784e756d536861726564436f6e73756d65727349000b6d6178507265666574636849000c6d617850726f6475"
    "6365727349000a6e436f6e73756d6572734a00146e496e44656c61794d65737361676542797465734900106e"
    "496e44656c61794d657373616765734a000d6e4d65737361676542797465734900096e4d6573736167657349"
    "000a6e50726f6475636572734a00136e52656d6f74654d657373616765427974657349000f6e52656d6f7465"
    "4d657373616765734a00106e54786e4d657373616765427974657349000c6e54786e4d657373616765734900"
    "0e6e556e61636b4d6573736167657349000b6e61436f6e73756d65727349000b6e66436f6e73756d6572735a"
    "001872656c6f6164584d4c536368656d614f6e4661696c757265490017736861726564436f6e73756d657246"
    "6c6f774c696d6974490004747970655a0006757365444d515a001876616c6964617465584d4c536368656d61"
    "456e61626c65644c0010584d4c536368656d615572694c6973747400124c6a6176612f6c616e672f53747269"
    "6e673b4c0011636f6e73756d657257696c6463617264737400154c6a6176612f7574696c2f48617368746162"
    "6c653b4c00046e616d6571007e00064c001170726f647563657257696c64636172647371007e00077872002a"
    "636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e61646d696e2e41646d696e496e666f5d6b"
    "5da790b1c50402000149000a7570646174654d61736b78700000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000006300000003000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000101007070740002713170"
    "7371007e00050000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000ffffffff0000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000200007070740002743270707070707070707078"
)
JDK_DEST_FULL = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000001757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a73720030636f6d2e73756e2e6d6573736167696e"
    "672e6a6d712e7574696c2e61646d696e2e44657374696e6174696f6e496e666f61be1b376d1e8af20200245a"
    "000b6175746f6372656174656449000764657374434450490011646573744c696d69744265686176696f7249"
    "00096465737453636f706549000964657374537461746549000866756c6c747970654900126d617841637469"
    "7665436f6e73756d6572734900146d61784661696c6f766572436f6e73756d6572734a000f6d61784d657373"
    "61676542797465734a000e6d61784d65737361676553697a6549000b6d61784d657373616765734900156d61"
    "784e756d536861726564436f6e73756d65727349000b6d6178507265666574636849000c6d617850726f6475"
    "6365727349000a6e436f6e73756d6572734a00146e496e44656c61794d65737361676542797465734900106e"
    "496e44656c61794d657373616765734a000d6e4d65737361676542797465734900096e4d6573736167657349"
    "000a6e50726f6475636572734a00136e52656d6f74654d657373616765427974657349000f6e52656d6f7465"
    "4d657373616765734a00106e54786e4d657373616765427974657349000c6e54786e4d657373616765734900"
    "0e6e556e61636b4d6573736167657349000b6e61436f6e73756d65727349000b6e66436f6e73756d6572735a"
    "001872656c6f6164584d4c536368656d614f6e4661696c757265490017736861726564436f6e73756d657246"
    "6c6f774c696d6974490004747970655a0006757365444d515a001876616c6964617465584d4c536368656d61"
    "456e61626c65644c0010584d4c536368656d615572694c6973747400124c6a6176612f6c616e672f53747269"
    "6e673b4c0011636f6e73756d657257696c6463617264737400154c6a6176612f7574696c2f48617368746162"
    "6c653b4c00046e616d6571007e00064c001170726f647563657257696c64636172647371007e00077872002a"
    "636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e61646d696e2e41646d696e496e666f5d6b"
    "5da790b1c50402000149000a7570646174654d61736b78700000000401000000000000000200000000000000"
    "0300000011ffffffff000000000000000000a00000ffffffffffffffff000186a0ffffffff000003e8000000"
    "6400000002000000000000000c00000001000001000000000000000007000000030000000000000000000000"
    "00000000000000001400000002000000040000000200000001010000000500000001010074000e687474703a"
    "2f2f782f732e787364737200136a6176612e7574696c2e486173687461626c6513bb0f25214ae4b803000246"
    "000a6c6f6164466163746f724900097468726573686f6c6478703f4000000000000877080000000b00000001"
    "7400066e6577732e2a737200116a6176612e6c616e672e496e746567657212e2a0a4f7818738020001490005"
    "76616c7565787200106a6176612e6c616e672e4e756d62657286ac951d0b94e08b0200007870000000027874"
    "000566756c6c517070707070707070707078"
)
JDK_SERVICE2 = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000002757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a7372002c636f6d2e73756e2e6d6573736167696e"
    "672e6a6d712e7574696c2e61646d696e2e53657276696365496e666f853e8bdc56b6a55c02000b49000e6375"
    "7272656e74546872656164735a000b64796e616d6963506f727449000a6d61785468726561647349000a6d69"
    "6e5468726561647349000c6e436f6e6e656374696f6e73490004706f72744900057374617465490004747970"
    "654c00076d65747269637374002b4c636f6d2f73756e2f6d6573736167696e672f6a6d712f7574696c2f4d65"
    "74726963436f756e746572733b4c00046e616d657400124c6a6176612f6c616e672f537472696e673b4c0008"
    "70726f746f636f6c71007e00077872002a636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e"
    "61646d696e2e41646d696e496e666f5d6b5da790b1c50402000149000a7570646174654d61736b7870000000"
    "000000000000000003e80000000a0000000200001dfc0000000000000000707400036a6d7374000374637073"
    "71007e0005000000000000000001000000000000000000000000000000000000000000000001707400056164"
    "6d696e74000474637032707070707070707078"
)
FULL_DEST = dict(
    updateMask=4, nMessages=7, nMessageBytes=1 << 40, nConsumers=2, nProducers=3,
    naConsumers=2, nfConsumers=1, autocreated=True, destState=3, name="fullQ", type=1,
    fulltype=0x11, maxMessages=100000, maxMessageBytes=10485760, maxMessageSize=-1,
    destLimitBehavior=2, maxPrefetch=1000, maxActiveConsumers=-1, maxProducers=100,
    maxNumSharedConsumers=-1, sharedConsumerFlowLimit=5, useDMQ=True, nUnackMessages=4,
    nInDelayMessages=1, nInDelayMessageBytes=12, nTxnMessages=2, nTxnMessageBytes=20,
    consumerWildcards={"news.*": JInt(2)}, XMLSchemaUriList="http://x/s.xsd",
    reloadXMLSchemaOnFailure=True,
)  # fmt: skip


def _read_infos(data: bytes) -> list[dict]:
    """The *Info objects of a reply's Vector, each a dict of its fields plus ``__class__``."""
    return read_vector(data)  # type: ignore[return-value]


def test_info_objects_bytes_match_jdk17():
    from broker.protocol.admin_info import destination_info, encode_infos, service_info

    dests = [
        destination_info(name="q1", type=1, useDMQ=True, nMessages=3, nMessageBytes=99),
        destination_info(name="t2", type=2, maxMessages=-1),
    ]
    assert encode_infos(dests) == JDK_DEST2
    assert encode_infos([destination_info(**FULL_DEST)]) == JDK_DEST_FULL
    services = [
        service_info(
            name="jms", protocol="tcp", port=7676, nConnections=2, minThreads=10, maxThreads=1000
        ),
        service_info(name="admin", protocol="tcp2", type=1, dynamicPort=True),
    ]
    assert encode_infos(services) == JDK_SERVICE2
    rows = _read_infos(JDK_DEST2)
    assert [(r["name"], r["type"], r["nMessages"], r["useDMQ"]) for r in rows] == [
        ("q1", 1, 3, True),
        ("t2", 2, 0, False),
    ]
    assert rows[1]["maxMessages"] == -1 and rows[0]["updateMask"] == 0
    with pytest.raises(JavaSerializationError):
        encode_infos([destination_info(noSuchField=1)])


def test_get_destinations(broker):
    admin = AdminSession(broker)
    _fill(broker, "adminListQ", 2)
    rows = _read_infos(admin.request(20).body)
    by_name = {r["name"]: r for r in rows}
    assert "__JMQAdmin" not in by_name
    row = by_name["adminListQ"]
    assert row["__class__"] == "com.sun.messaging.jmq.util.admin.DestinationInfo"
    # GetDestinationsHandler: fulltype is the full type (DEST_AUTO 0x20 for an
    # auto-created queue), type the same less INTERNAL/AUTO/ADMIN.
    assert row["type"] == 1 and row["fulltype"] == 1 | 0x20 and row["destState"] == 0
    assert row["nMessages"] == 2 and row["nMessageBytes"] > 0 and row["nConsumers"] == 0
    assert row["autocreated"] is True and row["useDMQ"] is True
    assert row["maxMessages"] == 100000 and row["maxPrefetch"] > 0  # autocreate defaults
    dmq = by_name["mq.sys.dmq"]
    assert dmq["useDMQ"] is False
    # One destination; its state follows PAUSE.
    where = {"JMQDestination": "adminListQ", "JMQDestType": JInt(1)}
    admin.request(30, JMQPauseTarget="JMQDestination", JMQDestState=JInt(3), **where)
    (one,) = _read_infos(admin.request(20, **where).body)
    assert one["name"] == "adminListQ" and one["destState"] == 3 and one["nMessages"] == 2
    admin.request(36, JMQPauseTarget="JMQDestination", **where)
    (one,) = _read_infos(admin.request(20, **where).body)
    assert one["destState"] == 0
    _ask(admin, 20, 404, JMQDestination="noSuchQ", JMQDestType=JInt(1))
    admin.peer.close()


def test_get_services(own_broker):
    # A broker of its own: the test pauses jms, which must not leak into other tests.
    broker = own_broker()
    admin = AdminSession(broker)
    rows = {r["name"]: r for r in _read_infos(admin.request(26).body)}
    jms, adm = rows["jms"], rows["admin"]
    assert jms["__class__"] == "com.sun.messaging.jmq.util.admin.ServiceInfo"
    assert jms["port"] == broker.jms_port and adm["port"] == broker.admin_port
    assert jms["type"] == 0 and adm["type"] == 1 and jms["protocol"] == "tcp"
    assert jms["state"] == 3 and adm["nConnections"] >= 1 and jms["metrics"] is None
    assert jms["minThreads"] <= jms["maxThreads"]
    (one,) = _read_infos(admin.request(26, JMQServiceName="jms").body)
    assert one["name"] == "jms"
    admin.request(30, JMQPauseTarget="JMQServiceName", JMQServiceName="jms")
    (one,) = _read_infos(admin.request(26, JMQServiceName="jms").body)
    assert one["state"] == 4
    admin.request(36, JMQPauseTarget="JMQServiceName", JMQServiceName="jms")
    (one,) = _read_infos(admin.request(26, JMQServiceName="jms").body)
    assert one["state"] == 3
    _ask(admin, 26, 404, JMQServiceName="nosuch")
    admin.peer.close()
