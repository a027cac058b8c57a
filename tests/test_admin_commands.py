"""The admin commands beyond the everyday ones (docs/developers/protocol.md), through
``AdminClient`` against real broker processes: destinations created and updated by an administrator,
consumers, producers, durable subscriptions, messages, transactions, connections,
services, broker properties, quiesce and restart.

Why one module (about 1,050 lines): the tests share the broker fixtures and the Java-
shaped expectations above.

The Java shapes are compared with what OpenJDK 17's ObjectOutputStream wrote for
same-shaped copies of OpenMQ's classes (package, fields, serialVersionUIDs; OpenMQ's
``ConnectionInfo`` declares no serialVersionUID, so ``serialver`` computed the JVM's
default one from the class as OpenMQ declares it: -6255154649160893876; OpenMQ 4.x's
copy also says "implements java.io.Serializable", for which serialver gives
-5120820610052343118)::

    // GET_DURABLES, filled as GetDurablesHandler fills them (s(x) = new String(x))
    DurableInfo d1 = new DurableInfo();
    d1.isDurable = true; d1.name = s("sub1"); d1.clientID = s("cid1"); d1.isActive = true;
    d1.uidString = String.valueOf(1001L); d1.activeCount = 1;
    d1.activeConsumers = new LinkedHashMap<>();
    ConsumerInfo c = new ConsumerInfo();
    c.connection = new ConnectionInfo(); c.connection.uuid = 3003L;
    c.uidString = String.valueOf(2002L); c.subuidString = String.valueOf(1001L);
    d1.activeConsumers.put(c.uidString, c);
    d1.nMessages = 3;
    d1.consumer = new ConsumerInfo(); d1.consumer.destination = s("t1");
    d1.consumer.type = 2; d1.consumer.selector = s("a > 1");
    DurableInfo d2 = new DurableInfo();
    d2.isDurable = true; d2.isShared = true; d2.isJMSShared = true; d2.name = s("shared");
    d2.uidString = String.valueOf(1005L); d2.activeConsumers = new LinkedHashMap<>();
    d2.consumer = new ConsumerInfo(); d2.consumer.destination = s("t1"); d2.consumer.type = 2;
    Vector v = new Vector(); v.add(d1); v.add(d2);                       // JDK_DURABLES
    // GET_CONSUMERS: one HashMap as GetConsumersHandler.constructConsumerInfo puts it:
    // AcknowledgeMode 2, ClientID null, ConnectionID "4444", ConsumerID "5555",
    // DestinationName s("q1"), DestinationType 1, Durable/DurableActive false,
    // DurableName null, FlowPaused false, Host s("127.0.0.1"), LastAckTime 0L,
    // NumMsgs 7L, NumMsgsPendingAcks 1000L, Selector null, ServiceName s("jms"),
    // User s("guest")                                                     // JDK_CONSUMERS
    // GET_MESSAGES: one HashMap as GetMessagesHandler.constructMessageInfo puts it for a
    // text message: CorrelationID/CorrelationIDAsBytes null, DeliveryMode 2,
    // DestinationName s("q1"), DestinationType 1, Expiration 0L,
    // MessageID s("ID:7-127.0.0.1-40000-1700000000000"), Priority 4, Redelivered false,
    // Timestamp 1700000000000L, Type null, MessageProperties = Hashtable {s("color"):
    // s("red"), s("n"): 5}, MessageBodyType 1, MessageBody s("hello")     // JDK_MESSAGES
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from broker.admintools.client import AdminClient, AdminError, read_vector
from broker.props import parse_size
from broker.protocol import dest_attributes as dattrs
from broker.protocol.admin_info import (
    HashMap,
    Hashtable,
    Shared,
    connection_info,
    consumer_info,
    destination_info,
    durable_info,
    encode_admin_object,
    encode_admin_vector,
)
from broker.protocol.jtypes import JInt, JLong
from broker.security.acl import DEFAULT_RULES
from openmq_client import (
    AckMode,
    BytesMessage,
    JMSException,
    MapMessage,
    Queue,
    TextMessage,
    Topic,
    connect,
)
from openmq_client.xa import Xid, create_xa_session

from .conftest import free_port

JDK_DURABLES = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000002757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a7372002c636f6d2e73756e2e6d6573736167696e"
    "672e6a6d712e7574696c2e61646d696e2e44757261626c65496e666f21cba63f4df831b902000b49000b6163"
    "74697665436f756e745a000869734163746976655a0009697344757261626c655a000b69734a4d5353686172"
    "65645a000869735368617265644900096e4d657373616765734c000f616374697665436f6e73756d65727374"
    "000f4c6a6176612f7574696c2f4d61703b4c0008636c69656e7449447400124c6a6176612f6c616e672f5374"
    "72696e673b4c0008636f6e73756d657274002f4c636f6d2f73756e2f6d6573736167696e672f6a6d712f7574"
    "696c2f61646d696e2f436f6e73756d6572496e666f3b4c00046e616d6571007e00074c000975696453747269"
    "6e6771007e00077870000000010101000000000003737200176a6176612e7574696c2e4c696e6b6564486173"
    "684d617034c04e5c106cc0fb0200015a000b6163636573734f72646572787200116a6176612e7574696c2e48"
    "6173684d61700507dac1c31660d103000246000a6c6f6164466163746f724900097468726573686f6c647870"
    "3f4000000000000c77080000001000000001740004323030327372002d636f6d2e73756e2e6d657373616769"
    "6e672e6a6d712e7574696c2e61646d696e2e436f6e73756d6572496e666fd1e5dcbb4d6fa93b020008490004"
    "747970654c001862726f6b65724164647265737353686f7274537472696e6771007e00074c000a636f6e6e65"
    "6374696f6e7400314c636f6d2f73756e2f6d6573736167696e672f6a6d712f7574696c2f61646d696e2f436f"
    "6e6e656374696f6e496e666f3b4c000b64657374696e6174696f6e71007e00075b000269647400025b424c00"
    "0873656c6563746f7271007e00074c000c737562756964537472696e6771007e00074c000975696453747269"
    "6e6771007e00077872002a636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e61646d696e2e"
    "41646d696e496e666f5d6b5da790b1c50402000149000a7570646174654d61736b7870000000000000000070"
    "7372002f636f6d2e73756e2e6d6573736167696e672e6a6d712e7574696c2e61646d696e2e436f6e6e656374"
    "696f6e496e666fa93139fce1a1ba4c02000b49000a6e636f6e73756d65727349000a6e70726f647563657273"
    "49000772656d506f72744a0004757569644c0008636c69656e74494471007e00075b0002696471007e00104c"
    "00076d65747269637374002b4c636f6d2f73756e2f6d6573736167696e672f6a6d712f7574696c2f4d657472"
    "6963436f756e746572733b5b000872656d6f7465495071007e00104c00077365727669636571007e00074c00"
    "047573657271007e00074c0009757365724167656e7471007e00077871007e00110000000000000000000000"
    "00000000000000000000000bbb74000070707071007e001671007e001671007e001670707074000431303031"
    "71007e000d7800740004636964317371007e000e0000000000000002707074000274317074000561203e2031"
    "707074000473756231740004313030317371007e00050000000000010101000000007371007e000a3f400000"
    "00000000770800000010000000007800707371007e000e000000000000000270707400027431707070707400"
    "0673686172656474000431303035707070707070707078"
)
JDK_CONSUMERS = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000001757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a737200116a6176612e7574696c2e486173684d61"
    "700507dac1c31660d103000246000a6c6f6164466163746f724900097468726573686f6c6478703f40000000"
    "0000187708000000200000001174000f41636b6e6f776c656467654d6f6465737200116a6176612e6c616e67"
    "2e496e746567657212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d"
    "62657286ac951d0b94e08b02000078700000000274000455736572740005677565737474000d44757261626c"
    "65416374697665737200116a6176612e6c616e672e426f6f6c65616ecd207280d59cfaee0200015a00057661"
    "6c75657870007400074e756d4d7367737372000e6a6176612e6c616e672e4c6f6e673b8be490cc8f23df0200"
    "014a000576616c75657871007e00090000000000000007740004486f73747400093132372e302e302e317400"
    "0f44657374696e6174696f6e547970657371007e00080000000174000b4c61737441636b54696d657371007e"
    "0011000000000000000074000a466c6f7750617573656471007e000f74000c436f6e6e656374696f6e494474"
    "00043434343474000b536572766963654e616d657400036a6d7374000a436f6e73756d657249447400043535"
    "353574000f44657374696e6174696f6e4e616d657400027131740008436c69656e7449447074000744757261"
    "626c6571007e000f74000b44757261626c654e616d65707400124e756d4d73677350656e64696e6741636b73"
    "7371007e001100000000000003e874000853656c6563746f72707870707070707070707078"
)
JDK_MESSAGES = bytes.fromhex(
    "aced0005737200106a6176612e7574696c2e566563746f72d9977d5b803baf01030003490011636170616369"
    "7479496e6372656d656e7449000c656c656d656e74436f756e745b000b656c656d656e74446174617400135b"
    "4c6a6176612f6c616e672f4f626a6563743b78700000000000000001757200135b4c6a6176612e6c616e672e"
    "4f626a6563743b90ce589f1073296c02000078700000000a737200116a6176612e7574696c2e486173684d61"
    "700507dac1c31660d103000246000a6c6f6164466163746f724900097468726573686f6c6478703f40000000"
    "0000187708000000200000000e7400085072696f72697479737200116a6176612e6c616e672e496e74656765"
    "7212e2a0a4f781873802000149000576616c7565787200106a6176612e6c616e672e4e756d62657286ac951d"
    "0b94e08b02000078700000000474000a45787069726174696f6e7372000e6a6176612e6c616e672e4c6f6e67"
    "3b8be490cc8f23df0200014a000576616c75657871007e0009000000000000000074000f44657374696e6174"
    "696f6e547970657371007e00080000000174000954696d657374616d707371007e000c0000018bcfe5680074"
    "0014436f7272656c6174696f6e4944417342797465737074000f4d657373616765426f64795479706571007e"
    "000f74000454797065707400114d65737361676550726f70657274696573737200136a6176612e7574696c2e"
    "486173687461626c6513bb0f25214ae4b803000246000a6c6f6164466163746f724900097468726573686f6c"
    "6478703f4000000000000877080000000b00000002740005636f6c6f727400037265647400016e7371007e00"
    "08000000057874000f44657374696e6174696f6e4e616d65740002713174000b526564656c69766572656473"
    "7200116a6176612e6c616e672e426f6f6c65616ecd207280d59cfaee0200015a000576616c75657870007400"
    "0c44656c69766572794d6f64657371007e00080000000274000d436f7272656c6174696f6e4944707400094d"
    "657373616765494474002249443a372d3132372e302e302e312d34303030302d313730303030303030303030"
    "3074000b4d657373616765426f647974000568656c6c6f7870707070707070707078"
)


def run(coro):
    return asyncio.run(coro)


async def admin_of(b) -> AdminClient:
    return await AdminClient.open(b.host, b.portmapper_port)


async def client_of(b, **kw):
    return await connect(b.host, b.portmapper_port, **kw)


def until(check, timeout: float = 30.0):
    """Poll ``check`` until it returns a true value (no timing is asserted)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


# --------------------------------------------------------------------------------------
# Java shapes
# --------------------------------------------------------------------------------------


def test_durable_info_bytes_match_jdk17():
    uid = Shared("2002")  # the map key is the ConsumerInfo's own uidString object
    d1 = durable_info(
        isDurable=True,
        name="sub1",
        clientID="cid1",
        isActive=True,
        uidString="1001",
        activeCount=1,
        activeConsumers={
            uid: consumer_info(connection=connection_info(3003), uidString=uid, subuidString="1001")
        },
        nMessages=3,
        consumer=consumer_info(destination="t1", type=2, selector="a > 1"),
    )
    d2 = durable_info(
        isDurable=True,
        isShared=True,
        isJMSShared=True,
        name="shared",
        uidString="1005",
        activeConsumers={},
        consumer=consumer_info(destination="t1", type=2),
    )
    assert encode_admin_vector([d1, d2]) == JDK_DURABLES
    first, second = read_vector(JDK_DURABLES)
    assert first["__class__"] == "com.sun.messaging.jmq.util.admin.DurableInfo"
    (cinfo,) = first["activeConsumers"].values()
    assert cinfo["connection"]["uuid"] == 3003 and cinfo["uidString"] == "2002"
    assert first["consumer"]["selector"] == "a > 1" and second["activeConsumers"] == {}
    assert second["clientID"] is None and second["isJMSShared"] is True


def test_consumer_and_message_maps_match_jdk17():
    row = HashMap(
        AcknowledgeMode=JInt(2),
        ClientID=None,
        ConnectionID="4444",
        ConsumerID="5555",
        DestinationName="q1",
        DestinationType=JInt(1),
        Durable=False,
        DurableActive=False,
        DurableName=None,
        FlowPaused=False,
        Host="127.0.0.1",
        LastAckTime=JLong(0),
        NumMsgs=JLong(7),
        NumMsgsPendingAcks=JLong(1000),
        Selector=None,
        ServiceName="jms",
        User="guest",
    )
    assert encode_admin_vector([row]) == JDK_CONSUMERS
    msg = HashMap(
        CorrelationID=None,
        CorrelationIDAsBytes=None,
        DeliveryMode=JInt(2),
        DestinationName="q1",
        DestinationType=JInt(1),
        Expiration=JLong(0),
        MessageID="ID:7-127.0.0.1-40000-1700000000000",
        Priority=JInt(4),
        Redelivered=False,
        Timestamp=JLong(1700000000000),
        Type=None,
        MessageProperties=Hashtable(color="red", n=JInt(5)),
        MessageBodyType=JInt(1),
        MessageBody="hello",
    )
    assert encode_admin_vector([msg]) == JDK_MESSAGES
    (decoded,) = read_vector(JDK_MESSAGES)
    assert decoded["MessageProperties"] == {"color": "red", "n": 5}
    assert decoded["CorrelationID"] is None and decoded["MessageBody"] == "hello"
    # byte[] values among the entries are values, not the map's own block data
    (again,) = read_vector(encode_admin_vector([HashMap(a=b"\x01\x02", b=None, c="x")]))
    assert again == {"a": b"\x01\x02", "b": None, "c": "x"}


def test_destination_attributes_conversion():
    assert parse_size("10k") == 10240 and parse_size("5M") == 5 * 2**20
    assert parse_size("100b") == 100 and parse_size(-5) == -1
    assert parse_size("512") == 512
    assert dattrs.convert("limitBehavior", "flow_control") == "FLOW_CONTROL"
    assert dattrs.convert("useDMQ", "false") is False
    assert dattrs.convert("maxNumMsgs", "-1") == -1 == dattrs.convert("maxNumMsgs", "-2")
    assert dattrs.convert("maxNumMsgs", "0") == -1 == dattrs.convert("maxBytesPerMsg", "0k")
    for name, value, words in [
        ("maxTotalMsgBytes", "10x", "not a size"),
        ("maxNumMsgs", "ten", "not an integer"),
        ("maxNumProducers", "0", "can not be set to 0"),
        ("maxNumActiveConsumers", 0, "at least 1"),
        ("limitBehavior", "DROP", "REJECT_NEWEST"),
        ("useDMQ", "maybe", "true or false"),
        ("noSuchAttr", 1, "unknown destination attribute"),
    ]:
        with pytest.raises(ValueError, match=words):
            dattrs.convert(name, value)
    with pytest.raises(ValueError, match="queues only"):
        dattrs.convert_all({"maxNumBackupConsumers": 1}, is_topic=True)
    values = dattrs.convert_all(
        {"maxNumMsgs": "7", "limitBehavior": "REMOVE_OLDEST", "isLocalOnly": True, "useDMQ": 0}
    )
    fields, mask, extra = dattrs.destination_info_fields({**values, "maxDeliveryCount": 3})
    assert extra == {"maxDeliveryCount": 3}
    info = read_vector(encode_admin_vector([destination_info(updateMask=mask, **fields)]))[0]
    assert dattrs.attributes_from_info(info) == {
        "maxNumMsgs": 7,
        "limitBehavior": "REMOVE_OLDEST",
        "isLocalOnly": True,
        "useDMQ": False,
    }
    names = [a["name"] for a in dattrs.describe()]
    assert "maxTotalMsgBytes" in names and "maxDeliveryCount" in names
    assert {a.type for a in dattrs.DESTINATION_ATTRIBUTES} <= {
        "int",
        "size",
        "bool",
        "choice",
        "string",
    }


# --------------------------------------------------------------------------------------
# Destinations: CREATE (10), UPDATE (40), GET_MESSAGES (86), DELETE_MESSAGE (88)
# --------------------------------------------------------------------------------------


def test_create_and_update_destination(broker):
    async def go():
        admin = await admin_of(broker)
        await admin.create_destination(
            "admCreateQ",
            1,
            {"maxNumMsgs": "2", "maxTotalMsgBytes": "10k", "limitBehavior": "reject_newest"},
        )
        (info,) = await admin.destinations("admCreateQ", 1)
        assert info["autocreated"] is False and info["maxMessages"] == 2
        assert info["maxMessageBytes"] == 10240 and info["maxMessageSize"] == -1
        assert info["destLimitBehavior"] == 2 and info["maxProducers"] == 100
        await admin.create_destination("admCreateT", 2, {"maxNumSharedConsumers": 3})
        (topic,) = await admin.destinations("admCreateT", 2)
        assert topic["type"] == 2 and topic["maxNumSharedConsumers"] == 3
        # errors: it exists, invalid and reserved names, wrong attributes, unknown
        with pytest.raises(AdminError) as exc:
            await admin.create_destination("admCreateQ", 1, {})
        assert exc.value.status == 409 and "already exists" in exc.value.text
        # (OpenMQ's admin service answers 500 with B4091 / B4175)
        for bad in ("9lives", "a-b", "sp ace", "a*"):
            with pytest.raises(AdminError) as exc:
                await admin.create_destination(bad, 1, {})
            assert exc.value.status == 500
            assert (
                exc.value.text == f"[B4091]: The Destination of {bad} contains invalid characters"
            )
        with pytest.raises(AdminError) as exc:
            await admin.create_destination("mq.mine", 1, {})
        assert (
            exc.value.status == 500 and "[B4175]" in exc.value.text and "reserved" in exc.value.text
        )
        with pytest.raises(ValueError, match="maxNumMsgs"):
            await admin.create_destination("admOtherQ", 1, {"maxNumMsgs": "many"})
        with pytest.raises(ValueError, match="queues only"):
            await admin.create_destination("admOtherT", 2, {"maxNumActiveConsumers": 1})
        # the broker checks too (a DestinationInfo built by another tool)
        info_body = encode_admin_object(
            destination_info(updateMask=0x1 | 0x2 | 0x200, name="admOtherT", type=2)
        )
        with pytest.raises(AdminError) as exc:
            await admin.request(10, body=info_body)
        assert exc.value.status == 400 and "maxNumActiveConsumers" in exc.value.text
        with pytest.raises(AdminError) as exc:
            await admin.request(10, body=b"not java")
        assert exc.value.status == 400
        with pytest.raises(AdminError) as exc:
            await admin.update_destination("noSuchAdmQ", 1, {"maxNumMsgs": 1})
        assert exc.value.status == 404

        # limits apply at once: the third message is refused, then accepted
        conn = await client_of(broker)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("admCreateQ"))
        await prod.send(TextMessage("1"))
        await prod.send(TextMessage("2"))
        with pytest.raises(JMSException):
            await prod.send(TextMessage("3"))
        await admin.update_destination("admCreateQ", 1, {"maxNumMsgs": 3, "maxDeliveryCount": 5})
        await prod.send(TextMessage("3"))
        (info,) = await admin.destinations("admCreateQ", 1)
        assert info["nMessages"] == 3 and info["maxMessages"] == 3
        assert info["maxMessageBytes"] == 10240  # untouched by the update
        await conn.close()
        await admin.close()

    run(go())


def test_update_destination_promotes_backup_consumers(broker):
    async def go():
        admin = await admin_of(broker)
        await admin.create_destination(
            "admBackupQ", 1, {"maxNumActiveConsumers": 1, "maxNumBackupConsumers": 1}
        )
        conn = await client_of(broker)
        sess = await conn.create_session()
        await sess.create_consumer(Queue("admBackupQ"))
        await sess.create_consumer(Queue("admBackupQ"))
        (info,) = await admin.destinations("admBackupQ", 1)
        assert (info["naConsumers"], info["nfConsumers"]) == (1, 1)
        await admin.update_destination("admBackupQ", 1, {"maxNumActiveConsumers": "2"})
        (info,) = await admin.destinations("admBackupQ", 1)
        assert (info["naConsumers"], info["nfConsumers"]) == (2, 0)
        assert info["maxActiveConsumers"] == 2
        await conn.close()
        await admin.close()

    run(go())


def test_messages_and_delete_message(broker):
    async def go():
        admin = await admin_of(broker)
        conn = await client_of(broker)
        sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        prod = await sess.create_producer(Queue("admMsgsQ"))
        await prod.send(
            TextMessage("hello", properties={"color": "red", "n": JInt(5)}, jms_type="greet"),
            priority=7,
        )
        await prod.send(BytesMessage(b"\x00\x01\x02"), persistent=False)
        await prod.send(MapMessage({"k": "v", "i": JInt(3)}, correlation_id="corr-1"))
        await prod.send(TextMessage("last"))
        rows = await admin.messages("admMsgsQ", 1)
        assert [r["MessageKind"] for r in rows] == ["text", "bytes", "map", "text"]
        text, data, mapped, last = rows
        assert text["MessageID"].startswith("ID:") and text["Type"] == "greet"
        assert text["Priority"] == 7 and text["DeliveryMode"] == 2
        assert text["MessageProperties"] == {"color": "red", "n": 5}
        assert text["MessageBody"] == "hello" and text["MessageBodyBytes"] == b"hello"
        assert text["Redelivered"] is False and text["Expiration"] == 0
        assert text["Timestamp"] > 0 and text["DestinationName"] == "admMsgsQ"
        assert data["DeliveryMode"] == 1 and data["MessageBody"] == b"\x00\x01\x02"
        assert mapped["MessageBody"] == {"k": "v", "i": 3}
        assert mapped["CorrelationID"] == "corr-1"
        assert mapped["CorrelationIDAsBytes"] == b"corr-1"
        # a window, one by id, no body
        window = await admin.messages("admMsgsQ", 1, start=1, limit=2, body=False)
        assert [r["MessageID"] for r in window] == [data["MessageID"], mapped["MessageID"]]
        assert "MessageBody" not in window[0] and "MessageBodyBytes" not in window[0]
        (one,) = await admin.messages("admMsgsQ", 1, msg_id=mapped["MessageID"])
        assert one["MessageBody"] == {"k": "v", "i": 3}
        for missing in (
            admin.messages("admMsgsQ", 1, msg_id="ID:1-1.2.3.4-5-6"),
            admin.messages("noSuchAdmMsgsQ", 1),
            admin.delete_message("admMsgsQ", 1, "ID:1-1.2.3.4-5-6"),
        ):
            with pytest.raises(AdminError) as exc:
                await missing
            assert exc.value.status == 404
        # DELETE_MESSAGE settles a waiting message
        await admin.delete_message("admMsgsQ", 1, last["MessageID"])
        assert len(await admin.messages("admMsgsQ", 1)) == 3
        # a delivered (unacknowledged) message cannot be deleted
        cons = await sess.create_consumer(Queue("admMsgsQ"), prefetch=1)
        await conn.start()
        got = await cons.receive(10)
        assert got is not None and got.message_id == text["MessageID"]
        with pytest.raises(AdminError) as exc:
            await admin.delete_message("admMsgsQ", 1, text["MessageID"])
        assert exc.value.status == 409
        (again,) = await admin.messages("admMsgsQ", 1, msg_id=text["MessageID"])
        assert again["MessageID"] == text["MessageID"]
        await conn.close()
        # redelivered once the consumer went without acknowledging
        (back,) = await admin.messages("admMsgsQ", 1, msg_id=text["MessageID"])
        assert back["Redelivered"] is True
        (info,) = await admin.destinations("admMsgsQ", 1)
        assert info["nMessages"] == 3
        await admin.close()

    run(go())


# --------------------------------------------------------------------------------------
# Consumers (18), producers, durable subscriptions (22, 66)
# --------------------------------------------------------------------------------------


def test_consumers_and_producers(broker):
    async def go():
        admin = await admin_of(broker)
        conn = await client_of(broker)
        await conn.set_client_id("admConsClient")
        sess = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
        await sess.create_consumer(Queue("admConsQ"), "n > 1")
        await sess.create_producer(Queue("admConsQ"))
        await sess.create_durable_subscriber(Topic("admConsT"), "admDur", "x = 1")
        ((row,), (prod,), (sub,)) = (
            await admin.consumers("admConsQ", 1),
            await admin.producers("admConsQ", 1),
            await admin.consumers("admConsT", 2),
        )
        mine = [c for c in await admin.connections() if c.get("clientid") == "admConsClient"]
        cxn = int(mine[0]["cxnid"])
        assert row["ConnectionID"] == str(cxn) and row["ClientID"] == "admConsClient"
        assert row["AcknowledgeMode"] == 2 and row["Selector"] == "n > 1"
        assert row["User"] == "guest" and row["Host"] == "127.0.0.1"
        assert row["ServiceName"] == "jms" and row["Durable"] is False
        assert row["DestinationName"] == "admConsQ" and row["DestinationType"] == 1
        assert row["NumMsgs"] == 0 and row["NumMsgsPendingAcks"] == 0
        assert int(row["ConsumerID"]) > 0 and row["FlowPaused"] is False
        assert prod["ConnectionID"] == str(cxn) and prod["DestinationName"] == "admConsQ"
        assert int(prod["ProducerID"]) > 0 and prod["User"] == "guest"
        assert sub["Durable"] is True and sub["DurableName"] == "admDur"
        assert sub["DurableActive"] is True and sub["Selector"] == "x = 1"
        assert sub["DestinationType"] == 2
        with pytest.raises(AdminError) as exc:
            await admin.consumers("noSuchAdmConsQ", 1)
        assert exc.value.status == 404
        with pytest.raises(AdminError) as exc:
            await admin.request(18, {"JMQDestination": "admConsQ"})
        assert exc.value.status == 400
        await conn.close()
        await admin.close()

    run(go())


def test_durables_and_purge_durable(broker):
    async def go():
        admin = await admin_of(broker)
        conn = await client_of(broker)
        await conn.set_client_id("admDurClient")
        sess = await conn.create_session()
        topic = Topic("admDurT")
        await sess.create_durable_subscriber(topic, "admSub", "n > 0")
        shared = await sess.create_shared_durable_consumer(topic, "admShared")
        await shared.close()
        prod = await sess.create_producer(topic)
        for n in range(3):
            await prod.send(TextMessage(f"m{n}", properties={"n": JInt(n)}))
        rows = {d["name"]: d for d in await admin.durables("admDurT")}
        assert set(rows) == {"admSub", "admShared"}
        sub, sh = rows["admSub"], rows["admShared"]
        assert sub["__class__"] == "com.sun.messaging.jmq.util.admin.DurableInfo"
        assert sub["clientID"] == "admDurClient" and sub["isDurable"] is True
        assert sub["isActive"] is True and sub["activeCount"] == 1
        assert sub["isShared"] is False and sub["consumer"]["destination"] == "admDurT"
        assert sub["consumer"]["selector"] == "n > 0" and sub["consumer"]["type"] == 2
        (cinfo,) = sub["activeConsumers"].values()
        mine = [c for c in await admin.connections() if c.get("clientid") == "admDurClient"]
        assert cinfo["connection"]["uuid"] == mine[0]["cxnid"]
        assert cinfo["subuidString"] == sub["uidString"]
        assert sh["isJMSShared"] is True and sh["isActive"] is False and sh["nMessages"] == 3
        assert {d["name"] for d in await admin.durables()} >= {"admSub", "admShared"}
        assert await admin.durables("noSuchAdmTopic") == []
        await admin.purge_durable("admShared", "admDurClient")
        rows = {d["name"]: d for d in await admin.durables("admDurT")}
        assert rows["admShared"]["nMessages"] == 0
        for name, client_id, status in (
            ("nope", "admDurClient", 404),
            ("admShared", "otherClient", 404),
            ("admShared", "   ", 400),
        ):
            with pytest.raises(AdminError) as exc:
                await admin.purge_durable(name, client_id)
            assert exc.value.status == status
        await conn.close()
        await admin.close()

    run(go())


# --------------------------------------------------------------------------------------
# Transactions (60, 62, 64)
# --------------------------------------------------------------------------------------


def test_transactions_commit_and_rollback(broker):
    async def go():
        admin = await admin_of(broker)
        conn = await client_of(broker)
        sess, xa = await create_xa_session(conn)
        prod = await sess.create_producer(Queue("admTxnQ"))
        committed, rolled = Xid(7, b"adm-g1", b"b1"), Xid(7, b"adm-g2", b"b2")
        ids = {}
        for xid, text in ((committed, "kept"), (rolled, "dropped")):
            ids[xid] = await xa.start(xid)
            await prod.send(TextMessage(text))
            await xa.end(xid)
            await xa.prepare(xid)
        local = await conn.create_session(transacted=True)
        await (await local.create_producer(Queue("admTxnQ"))).send(TextMessage("open"))
        rows = {int(r["txnid"]): r for r in await admin.transactions()}
        row = rows[ids[committed]]
        assert row["state"] == 5 and row["xid"] == str(committed) and row["nmsgs"] == 1
        assert row["nacks"] == 0 and row["user"] == "guest" and row["type"] == 0
        assert row["timestamp"] > 0 and row["connectionid"] > 0
        started = [r for r in rows.values() if r["state"] == 1 and "xid" not in r]
        assert len(started) == 1 and started[0]["nmsgs"] == 1
        # a local transaction still being worked in is its client's
        with pytest.raises(AdminError) as exc:
            await admin.rollback_transaction(int(started[0]["txnid"]))
        assert exc.value.status == 412
        with pytest.raises(AdminError) as exc:
            await admin.commit_transaction(int(started[0]["txnid"]))
        assert exc.value.status == 412 and "not PREPARED" in exc.value.text
        await admin.commit_transaction(ids[committed])
        await admin.rollback_transaction(ids[rolled])
        left = {int(r["txnid"]) for r in await admin.transactions()}
        assert ids[committed] not in left and ids[rolled] not in left
        for call in (admin.commit_transaction(ids[committed]), admin.rollback_transaction(1)):
            with pytest.raises(AdminError) as exc:
                await call
            assert exc.value.status == 404
        rows = await admin.messages("admTxnQ", 1)
        assert [r["MessageBody"] for r in rows] == ["kept"]
        _props, _body = await admin.request(60)
        assert _props["JMQQuantity"] == len(read_vector(_body))
        await conn.close()
        await admin.close()

    run(go())


# --------------------------------------------------------------------------------------
# Connections (16, 70)
# --------------------------------------------------------------------------------------


def test_connection_and_destroy_connection(broker):
    async def go():
        admin = await admin_of(broker)
        told = []
        conn = await client_of(broker, exception_listener=told.append)
        await conn.set_client_id("admKillMe")
        sess = await conn.create_session()
        await sess.create_consumer(Queue("admKillQ"))
        await sess.create_producer(Queue("admKillQ"))
        (row,) = [c for c in await admin.connections() if c.get("clientid") == "admKillMe"]
        one = await admin.connection(row["cxnid"])
        assert one == row
        assert set(one) >= {
            "cxnid",
            "clientid",
            "host",
            "port",
            "user",
            "service",
            "nproducers",
            "nconsumers",
            "clientplatform",
            "nsessions",
        }
        assert one["nconsumers"] == 1 and one["nproducers"] == 1 and one["nsessions"] == 1
        assert one["service"] == "jms" and one["user"] == "guest" and one["port"] > 0
        await admin.destroy_connection(row["cxnid"])
        deadline = time.monotonic() + 10
        while not conn.is_closed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert conn.is_closed and told and "administrator" in str(told[0])
        for call in (admin.connection(row["cxnid"]), admin.destroy_connection(row["cxnid"])):
            with pytest.raises(AdminError) as exc:
                await call
            assert exc.value.status == 404
        with pytest.raises(AdminError) as exc:
            await admin.connections("noSuchService")
        assert exc.value.status == 404
        await admin.close()

    run(go())


# --------------------------------------------------------------------------------------
# Store (68), access control (72), unsupported commands
# --------------------------------------------------------------------------------------


def test_compact(broker):
    async def go():
        admin = await admin_of(broker)
        conn = await client_of(broker)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("admCompactQ"))
        for n in range(20):
            await prod.send(TextMessage(f"m{n}" * 100))
        await admin.purge("admCompactQ", 1)
        await admin.compact()
        await admin.compact("admCompactQ", 1)
        with pytest.raises(AdminError) as exc:
            await admin.compact("noSuchAdmCompactQ", 1)
        assert exc.value.status == 404
        await prod.send(TextMessage("after"))
        assert [r["MessageBody"] for r in await admin.messages("admCompactQ", 1)] == ["after"]
        await conn.close()
        await admin.close()

    run(go())


def test_compact_database_store_and_restart_keeps_destinations(own_broker):
    b = own_broker("imq.persist.store=jdbc")

    async def before():
        admin = await admin_of(b)
        await admin.compact()  # nothing to compact: OK
        await admin.create_destination("admKeptQ", 1, {"maxNumMsgs": 50, "useDMQ": "false"})
        conn = await client_of(b)
        prod = await (await conn.create_session()).create_producer(Queue("admKeptQ"))
        await prod.send(TextMessage("survives"))
        await conn.close()
        pid = b.proc.pid
        await admin.restart()
        # The broker says GOODBYE (RESTART_BKR) to every connection as it stops.
        deadline = time.monotonic() + 30
        while not admin.conn.is_closed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert admin.conn.is_closed
        await admin.close()
        return pid

    pid = run(before())

    async def answers():
        try:
            admin = await AdminClient.open(b.host, b.portmapper_port, connect_timeout=2)
        except Exception:
            return None
        try:
            return await admin.destinations("admKeptQ", 1)
        finally:
            await admin.close()

    def back():
        if b.proc.poll() is not None:
            raise AssertionError(f"broker exited:\n{b.log_text()[-3000:]}")
        try:
            return run(answers())
        except AdminError:
            return None

    rows = until(back, 60)
    assert rows, b.log_text()[-3000:]
    (info,) = rows
    assert info["autocreated"] is False and info["maxMessages"] == 50
    assert info["useDMQ"] is False and info["nMessages"] == 1
    assert b.proc.pid == pid and b.proc.poll() is None  # the same process slot
    assert "restarting" in b.log_text()


def test_reload_access_control(own_broker, tmp_path):
    etc = tmp_path / "acl"
    etc.mkdir()
    path = etc / "admin.acl"
    rules = "\n".join(f"{k}={v}" for k, v in DEFAULT_RULES.items()) + "\n"
    path.write_text(rules)
    b = own_broker(
        f"imq.accesscontrol.file.dirpath={etc}", "imq.accesscontrol.file.filename=admin.acl"
    )

    async def go():
        admin = await admin_of(b)
        conn = await client_of(b)
        sess = await conn.create_session()
        await sess.create_producer(Queue("admAclQ"))
        path.write_text(rules + "queue.admAclQ.produce.deny.user=guest\n")
        await admin.reload_access_control()
        with pytest.raises(JMSException):
            await sess.create_producer(Queue("admAclQ"))
        path.write_text(rules)
        await admin.reload_access_control()
        await sess.create_producer(Queue("admAclQ"))
        with pytest.raises(AdminError) as exc:
            await admin.request(72, {"JMQCommand": "dump", "JMQTarget": "broker"})
        assert exc.value.status == 501
        await conn.close()
        await admin.close()

    run(go())
    assert "access control rules reloaded" in b.log_text()


# 58 (RELOAD_CLUSTER), 76 (TAKEOVER_BROKER) and 78 (GET_CLUSTER) are served since clusters
# exist: tests/test_cluster_reload.py, test_ha.py, test_cluster.py; 96
# (CHANGE_CLUSTER_MASTER_BROKER) since the master can move: test_cluster_changemaster.py.
@pytest.mark.parametrize("command", [24, 42, 44, 80, 90, 92, 94, 98])
def test_cluster_and_legacy_commands_are_501(broker, command):
    async def go():
        admin = await admin_of(broker)
        with pytest.raises(AdminError) as exc:
            await admin.request(command)
        assert exc.value.status == 501 and "not supported" in exc.value.text
        await admin.close()

    run(go())


def test_reload_cluster_on_a_broker_that_is_not_clustered(broker):
    async def go():
        admin = await admin_of(broker)
        with pytest.raises(AdminError) as exc:
            await admin.reload_cluster()
        assert exc.value.status == 409 and "not part of a cluster" in exc.value.text
        await admin.close()

    run(go())


# --------------------------------------------------------------------------------------
# Broker-wide: quiesce (74, 82), services (46), properties (56)
# --------------------------------------------------------------------------------------


def test_quiesce_and_unquiesce(own_broker):
    b = own_broker()

    async def go():
        admin = await admin_of(b)
        assert await admin.state() == "RUNNING"
        conn = await client_of(b)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("admQuietQ"))
        await admin.quiesce()
        assert await admin.state() == "QUIESCING"
        assert (await admin.broker_props())["imq.broker.state"] == "QUIESCING"
        with pytest.raises(JMSException):
            await client_of(b)
        await prod.send(TextMessage("still"))  # open connections carry on
        await conn.close()
        deadline = time.monotonic() + 10
        while await admin.state() != "QUIESCED" and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert await admin.state() == "QUIESCED"
        other = await admin_of(b)  # the ADMIN service stays open
        await other.close()
        await admin.unquiesce()
        assert await admin.state() == "RUNNING"
        conn = await client_of(b)
        await conn.close()
        await admin.close()

    run(go())


def test_update_service(own_broker):
    b = own_broker()

    async def go():
        admin = await admin_of(b)
        await admin.update_service("jms", max_threads=1)
        (svc,) = await admin.services("jms")
        assert svc["maxThreads"] == 1
        first = await client_of(b)
        with pytest.raises(JMSException):
            await client_of(b)
        await first.close()
        await admin.update_service("jms", max_threads=-1, min_threads=2)
        (svc,) = await admin.services("jms")
        assert (svc["minThreads"], svc["maxThreads"]) == (2, -1)
        extra = [await client_of(b) for _ in range(3)]
        for c in extra:
            await c.close()
        # a new port: the port mapper points there, the old one no longer listens
        port = free_port()
        await admin.update_service("jms", port=port)
        (svc,) = await admin.services("jms")
        assert svc["port"] == port
        conn = await client_of(b)
        await conn.close()
        with pytest.raises(OSError), socket.create_connection((b.host, b.jms_port), 2):
            pass
        # refusals
        with socket.socket() as taken:
            taken.bind(("0.0.0.0", 0))
            taken.listen()
            with pytest.raises(AdminError) as exc:
                await admin.update_service("jms", port=taken.getsockname()[1])
            assert exc.value.status == 409
        with pytest.raises(AdminError) as exc:
            await admin.update_service("nosuch", max_threads=3)
        assert exc.value.status == 404
        with pytest.raises(AdminError) as exc:
            await admin.update_service("jms", min_threads=5, max_threads=2)
        assert exc.value.status == 400
        with pytest.raises(ValueError):
            await admin.update_service("jms")
        await admin.close()

    run(go())
    text = (b.varhome / "instances" / b.instance / "props" / "config.properties").read_text()
    assert "imq.jms.max_threads=-1" in text and "imq.jms.min_threads=2" in text


def test_update_broker_props(own_broker):
    b = own_broker()
    props_file = b.varhome / "instances" / b.instance / "props" / "config.properties"

    async def go():
        admin = await admin_of(b)
        await admin.update_broker_props(
            {
                "imq.autocreate.queue": "false",
                "imq.log.level": "DEBUG",
                "imq.system.max_count": "1",
                "imq.message.expiration.interval": "5",
                "imq.autocreate.destination.maxNumMsgs": "77",
            }
        )
        props = await admin.broker_props()
        assert props["imq.autocreate.queue"] == "false" and props["imq.log.level"] == "DEBUG"
        conn = await client_of(b)
        sess = await conn.create_session()
        with pytest.raises(JMSException):
            await sess.create_producer(Queue("admNoAutoQ"))
        prod = await sess.create_producer(Topic("admAutoT"))
        await sess.create_consumer(Topic("admAutoT"))
        (info,) = await admin.destinations("admAutoT", 2)
        assert info["maxMessages"] == 77  # the new auto-creation default
        await prod.send(TextMessage("one"))
        with pytest.raises(JMSException):  # imq.system.max_count=1
            await prod.send(TextMessage("two"))
        await conn.close()
        # refused names or values: 400 naming them, nothing applied
        with pytest.raises(AdminError) as exc:
            await admin.update_broker_props(
                {"imq.autocreate.topic": "false", "imq.jms.tcp.port": "1", "imq.nope": "x"}
            )
        assert exc.value.status == 400
        assert "imq.jms.tcp.port" in exc.value.text and "imq.nope" in exc.value.text
        with pytest.raises(AdminError) as exc:
            await admin.update_broker_props({"imq.autocreate.topic": "0", "imq.log.level": "LOUD"})
        assert exc.value.status == 400 and "imq.log.level" in exc.value.text
        assert (await admin.broker_props())["imq.autocreate.topic"] == "true"
        await admin.update_broker_props({".level": "INFO", "imq.system.max_count": "-1"})
        assert (await admin.broker_props())["imq.log.level"] == "INFO"
        await admin.close()

    run(go())
    text = props_file.read_text()
    assert "imq.autocreate.queue=false" in text and "imq.message.expiration.interval=5" in text
    # back at their defaults (INFO, -1): not written; refused ones never were
    assert "imq.log.level" not in text and "imq.system.max_count" not in text
    assert "imq.autocreate.topic" not in text


def test_durables_for_an_openmq4_admin_tool(broker, monkeypatch):
    """OpenMQ 4.x's ConnectionInfo computes another serialVersionUID: an admin client
    saying JMQVersion 4.x in HELLO gets that one, newer ones the current one."""
    import struct

    import openmq_client.connection as client_connection
    from broker.protocol.admin_types import GET_DURABLES

    modern, old = struct.pack(">q", -6255154649160893876), struct.pack(">q", -5120820610052343118)

    async def go():
        conn = await client_of(broker)
        await conn.set_client_id("adm4Client")
        sess = await conn.create_session()
        await sess.create_durable_subscriber(Topic("adm4T"), "adm4Sub")
        admin = await admin_of(broker)
        _, body = await admin.request(GET_DURABLES, {"JMQDestination": "adm4T"})
        assert modern in body and old not in body
        await admin.close()
        monkeypatch.setattr(client_connection, "CLIENT_VERSION", "4.5.2")
        admin = await admin_of(broker)
        _, body = await admin.request(GET_DURABLES, {"JMQDestination": "adm4T"})
        assert old in body and modern not in body
        await admin.close()
        await conn.close()

    run(go())


def test_update_system_max_size_moves_the_memory_state(own_broker):
    """imq.system.max_size is also the memory budget: shrinking it at run time under
    held messages moves the memory state, lifting it moves it back."""
    b = own_broker()

    async def go():
        admin = await admin_of(b)
        conn = await client_of(b)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue("admMemQ"))
        for _ in range(10):
            await prod.send(BytesMessage(b"m" * 5000))
        assert (await admin.broker_props())["imq.memory.state"] == "green"
        await admin.update_broker_props({"imq.system.max_size": "53k"})  # ~95% in use
        assert (await admin.broker_props())["imq.memory.state"] in ("orange", "red")
        await admin.update_broker_props({"imq.system.max_size": "-1"})
        assert (await admin.broker_props())["imq.memory.state"] == "green"
        await conn.close()
        await admin.close()

    run(go())


def test_update_portmapper_port(own_broker):
    b = own_broker()
    new = free_port()

    async def go():
        admin = await admin_of(b)
        await admin.update_broker_props({"imq.portmapper.port": str(new)})
        await admin.close()
        moved = await AdminClient.open(b.host, new)
        assert await moved.hello() == b.instance
        await moved.close()

    run(go())
    with pytest.raises(OSError), socket.create_connection((b.host, b.portmapper_port), 2):
        pass


def test_shutdown_with_restart_property_keeps_shutdown_working(own_broker):
    b = own_broker()

    async def go():
        admin = await admin_of(b)
        await admin.shutdown()
        await admin.close()

    run(go())
    assert b.proc.wait(30) == 0
    assert "restarting" not in b.log_text()


def test_destination_attributes_by_name(broker):
    async def go():
        admin = await admin_of(broker)
        await admin.create_destination(
            "admAttrsQ", 1, {"maxBytesPerMsg": "1m", "maxDeliveryCount": 4, "useDMQ": False}
        )
        attrs = await admin.destination_attributes("admAttrsQ", 1)
        assert attrs["maxBytesPerMsg"] == 2**20 and attrs["maxDeliveryCount"] == 4
        assert attrs["useDMQ"] is False and attrs["maxNumMsgs"] == -1
        assert attrs["limitBehavior"] == "REJECT_NEWEST" and "maxNumSharedConsumers" not in attrs
        await admin.update_destination("admAttrsQ", 1, {"maxDeliveryCount": "-1"})
        assert (await admin.destination_attributes("admAttrsQ", 1))["maxDeliveryCount"] == -1
        await admin.close()

    run(go())


def test_destinations_page_filters_orders_and_counts(own_broker):
    """Our GET_DESTINATIONS extension: the broker filters, orders and cuts the list and
    says how many matched (JMQQuantity); without the extension every destination comes."""
    b = own_broker()

    async def go():
        admin = await admin_of(b)
        try:
            for i in range(12):
                await admin.create_destination(f"pgQ{i:02d}", 1, {})
            await admin.create_destination("pgT", 2, {})
            conn = await client_of(b)
            sess = await conn.create_session()
            prod = await sess.create_producer(Queue("pgQ07"))
            for _ in range(3):
                await prod.send(TextMessage("x"), persistent=False)
            await admin.pause_destination("pgQ03", 1)

            rows, total = await admin.destinations_page(0, 5, dest_type=1, name="pgq")
            assert total == 12
            assert [r["name"] for r in rows] == [f"pgQ{i:02d}" for i in range(5)]
            rows, total = await admin.destinations_page(10, 5, dest_type=1, name="pgQ")
            assert total == 12 and [r["name"] for r in rows] == ["pgQ10", "pgQ11"]
            rows, total = await admin.destinations_page(0, 1, name="pg", order="depth")
            assert total == 13 and rows[0]["name"] == "pgQ07" and rows[0]["nMessages"] == 3
            rows, total = await admin.destinations_page(0, 50, name="pg", state=3)
            assert total == 1 and rows[0]["name"] == "pgQ03"
            rows, total = await admin.destinations_page(0, 0, dest_type=2, name="pg")
            assert rows == [] and total == 1
            # The reply queue of this admin connection is temporary: hidden on request.
            _, with_temp = await admin.destinations_page(0, 0)
            _, without = await admin.destinations_page(0, 0, temporary=False)
            assert with_temp > without
            with pytest.raises(AdminError) as exc:
                await admin.destinations_page(0, 5, order="size")
            assert exc.value.status == 400 and "JMQOrderBy" in exc.value.text
            everything = await admin.destinations()
            assert {f"pgQ{i:02d}" for i in range(12)} <= {d["name"] for d in everything}
            await conn.close()
        finally:
            await admin.close()

    asyncio.run(go())
