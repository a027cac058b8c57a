"""The JMX RMI connector in process: the JRMP codec (broker/protocol/jrmp.py), the JMX
values (jmxser.py) and the engine (broker/engine/jmx.py), driven as the JDK's client
drives them.  The end-to-end check with the JDK's own client is
tests/interop/test_java_jmx.py."""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.config import BrokerConfig
from broker.engine.jmx import Authenticate, Close, JmxServer, JrmpSession, Send
from broker.engine.jmx_mbeans import Registry
from broker.engine.jmx_names import MalformedObjectName, ObjectName
from broker.protocol import jmxser
from broker.protocol.errors import ProtocolError
from broker.protocol.javaser import JBlock, ObjectStreamReader
from broker.protocol.jrmp import (
    CALL,
    PING,
    PING_ACK,
    PROTOCOL_ACK,
    RETURN_DATA,
    Call,
    ClientEndpoint,
    Handshake,
    JrmpDecoder,
    ObjID,
    encode_call,
    encode_handshake,
)

if TYPE_CHECKING:
    from broker.server.broker import Broker

pytestmark = pytest.mark.fast

NEW_CLIENT = -1089742558549201240
GET_ATTRIBUTE = -1089783104982388203
QUERY_NAMES = 9152567528369059802
IS_REGISTERED = 8325683335228268564
CLOSE = -4742752445160157748
CONFIG = "com.sun.messaging.jms.server:type=Broker,subtype=Config"
# The stock broker's stub (its port mapper's jmxrmi line), for the layout ours must have.
STOCK_STUB = base64.b64decode(
    "rO0ABXNyAC5qYXZheC5tYW5hZ2VtZW50LnJlbW90ZS5ybWkuUk1JU2VydmVySW1wbF9TdHViAAAAAAAAAAICAAB4"
    "cgAaamF2YS5ybWkuc2VydmVyLlJlbW90ZVN0dWLp/tzJi+FlGgIAAHhyABxqYXZhLnJtaS5zZXJ2ZXIuUmVtb3Rl"
    "T2JqZWN002G0kQxhMx4DAAB4cHcyAApVbmljYXN0UmVmAAkxMjcuMC4wLjEAAKwpY4bJECU7mzWdmo29AAABoigt"
    "5MGAAQB4"
)


def in_process_broker(var: Path) -> Broker:
    """A broker that is not started: its router, services list and configuration are
    what the MBeans read."""
    from broker.security.filerepo import FileUserRepository
    from broker.server.broker import Broker

    passwd = var / "passwd"
    passwd.parent.mkdir(parents=True, exist_ok=True)
    passwd.write_text("")
    return Broker(
        BrokerConfig({"imq.varhome": str(var), "imq.accesscontrol.enabled": "false"}),
        FileUserRepository(passwd),
    )


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = in_process_broker(tmp_path / "var")
    try:
        yield b
    finally:
        b.executor.shutdown(wait=False)


def _server(broker: Broker) -> JmxServer:
    return JmxServer(Registry(broker), broker, "127.0.0.1", 9999)


def _returned(data: bytes) -> tuple[int, object]:
    """(return type, value) of one ReturnData; for an exception, its class name (a
    Throwable's cause refers back to itself, which the generic reader refuses)."""
    assert data[0] == RETURN_DATA
    r = ObjectStreamReader(data[1:])
    head = r.primitive(15)
    if head[0] == 2:
        name_len = int.from_bytes(data[24:26], "big")  # TC_OBJECT TC_CLASSDESC, then the name
        assert data[22:24] == b"\x73\x72"
        return 2, data[26 : 26 + name_len].decode()
    value = r.read_object() if not r.at_end() else None
    return head[0], value


def _ref(stub: object) -> ObjID:
    """The ObjID in a decoded stub's UnicastRef."""
    assert isinstance(stub, dict)
    (block,) = stub["__custom__java.rmi.server.RemoteObject"]
    assert isinstance(block, JBlock)
    data = block.data
    pos = 2 + int.from_bytes(data[:2], "big")
    pos += 2 + int.from_bytes(data[pos : pos + 2], "big") + 4
    return ObjID(*struct.unpack_from(">qiqh", data, pos))


def test_stub_has_the_stock_layout() -> None:
    objid = ObjID(0x6386C910253B9B35, -0x62657243, 0x1A2282DE4C1, -0x7FFF)
    ours = jmxser.server_stub_bytes("127.0.0.1", 44073, objid)
    assert ours == STOCK_STUB


def test_decoder_reads_a_session_in_any_cuts() -> None:
    creds = jmxser.string_array(["admin", "admin"])
    stream = (
        encode_handshake("127.0.0.1", 0)
        + encode_call(ObjID(5), NEW_CLIENT, [creds])
        + bytes([PING])
        + encode_call(ObjID(6), GET_ATTRIBUTE, [jmxser.object_name(CONFIG), "Port", None])
    )
    for cut in (1, 7, len(stream)):
        d = JrmpDecoder()
        out = []
        for i in range(0, len(stream), cut):
            out += d.feed(stream[i : i + cut])
        assert out[0] == Handshake(0x4B)
        assert out[1] == ClientEndpoint("127.0.0.1", 0)
        assert isinstance(out[2], Call) and out[2].name == "newClient"
        assert out[2].args == [["admin", "admin"]]
        assert isinstance(out[4], Call) and out[4].name == "getAttribute"
        assert jmxser.read_object_name(out[4].args[0]) == CONFIG
        assert out[4].args[1:] == ["Port", None]


@pytest.mark.parametrize(
    "data",
    [
        b"JRMX\x00\x02K",
        b"JRMI\x00\x01K",
        b"JRMI\x00\x02L",
        encode_handshake() + b"\x99",
        encode_handshake() + bytes([CALL]) + b"\xac\xed\x00\x05w\x22" + b"\0" * 22 + b"\xff" * 12,
    ],
)
def test_decoder_refuses(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        JrmpDecoder().feed(data)


def test_session_login_refused_then_accepted(broker: Broker) -> None:
    srv = _server(broker)
    s = JrmpSession(srv, "127.0.0.1", 4000)
    (ack,) = s.feed(encode_handshake("127.0.0.1", 0))
    assert isinstance(ack, Send) and ack.data[0] == PROTOCOL_ACK
    call = encode_call(srv.server_id, NEW_CLIENT, [jmxser.string_array(["admin", "nope"])])
    (auth,) = s.feed(call)
    assert isinstance(auth, Authenticate) and (auth.user, auth.password) == ("admin", "nope")
    (refusal,) = s.auth_result(auth, False, "wrong password")
    assert isinstance(refusal, Send)
    assert _returned(refusal.data) == (2, "java.lang.SecurityException")
    assert b"Failure detected during authentication wrong password" in refusal.data
    assert not srv.clients

    (auth,) = s.feed(call)
    assert isinstance(auth, Authenticate)
    (reply,) = s.auth_result(auth, True, "")
    assert isinstance(reply, Send)
    kind, stub = _returned(reply.data)
    assert kind == 1
    assert isinstance(stub, dict)
    assert stub["__class__"] == "javax.management.remote.rmi.RMIConnectionImpl_Stub"
    conn = _ref(stub)
    assert conn in srv.clients

    name = jmxser.object_name(CONFIG)
    (port,) = s.feed(encode_call(conn, GET_ATTRIBUTE, [name, "Port", None]))
    assert isinstance(port, Send) and _returned(port.data) == (1, 7676)
    (missing,) = s.feed(encode_call(conn, GET_ATTRIBUTE, [name, "NoSuch", None]))
    assert isinstance(missing, Send)
    assert _returned(missing.data) == (2, "javax.management.AttributeNotFoundException")
    (reg,) = s.feed(encode_call(conn, IS_REGISTERED, [name, None]))
    assert isinstance(reg, Send) and reg.data.endswith(b"\x01")
    (ping,) = s.feed(bytes([PING]))
    assert isinstance(ping, Send) and ping.data == bytes([PING_ACK])
    s.feed(encode_call(conn, CLOSE, []))
    assert conn not in srv.clients
    (gone,) = s.feed(encode_call(conn, GET_ATTRIBUTE, [name, "Port", None]))
    assert isinstance(gone, Send)
    assert _returned(gone.data) == (2, "java.rmi.NoSuchObjectException")


def test_bad_input_closes_the_connection_only(broker: Broker) -> None:
    srv = _server(broker)
    s = JrmpSession(srv, "127.0.0.1", 4000)
    s.feed(encode_handshake())
    (close,) = s.feed(encode_call(srv.server_id, NEW_CLIENT, [42]))
    assert isinstance(close, Close) and s.closed
    assert s.feed(encode_handshake()) == []
    other = JrmpSession(srv, "127.0.0.1", 4001)
    assert other.feed(encode_handshake())


def test_object_names(broker: Broker) -> None:
    pattern = ObjectName.parse("com.sun.messaging.jms.server:type=Broker,*")
    config = ObjectName.parse(CONFIG)
    assert config.canonical == "com.sun.messaging.jms.server:subtype=Config,type=Broker"
    assert pattern.is_pattern and pattern.matches(config)
    assert not ObjectName.parse("com.sun.messaging.jms.server:type=Broker").matches(config)
    assert ObjectName.parse("*:*").matches(config)
    assert [n.canonical for n in Registry(broker).query(pattern)] == [
        config.canonical,
        "com.sun.messaging.jms.server:subtype=Monitor,type=Broker",
    ]
    for bad in ("nocolon", "d:", "d:a=1,a=2", "d:=x"):
        with pytest.raises(MalformedObjectName):
            ObjectName.parse(bad)
