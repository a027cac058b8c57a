"""The JMX RMI connector's state machines, sans-IO.

:class:`JmxServer` is what every JRMP connection shares: the exported objects (the
RMIServer named in the service URL, one RMIConnection per successful newClient, the
DGC) and the MBean registry.  :class:`JrmpSession` is one TCP connection: bytes in
(``feed``), effects out (:class:`Send`, :class:`Close`, :class:`Authenticate`, which
the driver answers with ``auth_result`` once the user repository has).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from broker.engine.jmx_mbeans import DEFAULT_DOMAIN, Registry
from broker.engine.jmx_names import ObjectName
from broker.protocol import jmxser
from broker.protocol.errors import ProtocolError
from broker.protocol.jrmp import (
    DGC_OBJNUM,
    Call,
    ClientEndpoint,
    DgcAck,
    Handshake,
    JrmpDecoder,
    ObjID,
    Ping,
    encode_ping_ack,
    encode_protocol_ack,
    encode_return,
)
from broker.protocol.jtypes import JInt

log = logging.getLogger(__name__)

# What DGC.dirty grants (the JDK's default java.rmi.dgc.leaseValue).
LEASE_MS = 600_000
# newClient's refusal, worded as the stock broker's connector server words it.
REFUSED = "JMX connector server {service}: Failure detected during authentication {why}"


@dataclass(frozen=True, slots=True)
class Send:
    data: bytes


@dataclass(frozen=True, slots=True)
class Close:
    reason: str


@dataclass(frozen=True, slots=True)
class Authenticate:
    """Check ``user``/``password`` as the admin service would; answer with auth_result."""

    user: str
    password: str
    call: Call


Effect = Send | Close | Authenticate


@dataclass
class ClientConnection:
    """One RMIConnection (a newClient that succeeded)."""

    objid: ObjID
    connection_id: str
    user: str


@dataclass
class JmxServer:
    """Shared state of the connector: exported objects and the MBeans."""

    registry: Registry
    broker: Any  # what MBean getters read (server/broker.py's Broker)
    host: str  # the address clients reach the RMI port on (in the stubs)
    port: int = 0
    service: str = "jmxrmi"
    server_id: ObjID = field(default_factory=lambda: _new_objid())
    clients: dict[ObjID, ClientConnection] = field(default_factory=dict)

    def stub_bytes(self) -> bytes:
        return jmxser.server_stub_bytes(self.host, self.port, self.server_id)


def _new_objid() -> ObjID:
    # Random object numbers (as the JDK's java.rmi.server.randomIDs): unguessable.
    return ObjID(
        secrets.randbits(63), secrets.randbits(31), secrets.randbits(40), secrets.randbits(15)
    )


def _uid() -> bytes:
    return secrets.token_bytes(14)


class JrmpSession:
    """One JRMP connection from a JMX client."""

    def __init__(self, server: JmxServer, peer_host: str, peer_port: int) -> None:
        self.server = server
        self.peer = f"{peer_host}:{peer_port}"
        self._peer_host = peer_host
        self._peer_port = peer_port
        self._decoder = JrmpDecoder()
        self.closed = False

    def feed(self, data: bytes) -> list[Effect]:
        if self.closed:
            return []
        try:
            messages = self._decoder.feed(data)
        except ProtocolError as exc:
            return self._close(f"bad JRMP input: {exc}")
        out: list[Effect] = []
        for msg in messages:
            try:
                out += self._handle(msg)
            except ProtocolError as exc:
                return out + self._close(f"bad call: {exc}")
            if self.closed:
                break
        return out

    def _close(self, reason: str) -> list[Effect]:
        log.warning("JMX connection from %s closed: %s", self.peer, reason)
        self.closed = True
        return [Close(reason)]

    def _handle(self, msg: object) -> list[Effect]:
        if isinstance(msg, Handshake):
            return [Send(encode_protocol_ack(self._peer_host, self._peer_port))]
        if isinstance(msg, ClientEndpoint):
            return []
        if isinstance(msg, Ping):
            return [Send(encode_ping_ack())]
        if isinstance(msg, DgcAck):
            return []
        assert isinstance(msg, Call)
        return self._call(msg)

    # -- calls -------------------------------------------------------------

    def _call(self, call: Call) -> list[Effect]:
        srv = self.server
        if call.target == ObjID(DGC_OBJNUM):
            return self._dgc(call)
        if call.target == srv.server_id:
            if call.name == "getVersion":
                return _ok(f"1.0 openmq-py {srv.service}")
            if call.name == "newClient":
                creds = call.args[0]
                user, password = "", ""
                if creds is not None:
                    strings = jmxser.read_strings(creds)
                    if len(strings) >= 2:
                        user, password = strings[0], strings[1]
                return [Authenticate(user, password, call)]
            return _raise("UnmarshalException", f"{call.name} is not an RMIServer method")
        client = srv.clients.get(call.target)
        if client is None:
            return _raise("NoSuchObjectException", "no such object in table")
        return self._connection_call(client, call)

    def auth_result(self, req: Authenticate, ok: bool, why: str) -> list[Effect]:
        """The repository's answer to ``req``."""
        if self.closed:
            return []
        srv = self.server
        if not ok:
            log.warning(
                "JMX login refused for user %s from %s: %s", req.user or "?", self.peer, why
            )
            return _raise("SecurityException", REFUSED.format(service=srv.service, why=why))
        objid = _new_objid()
        conn_id = f"rmi://{self._peer_host} {req.user} {objid.num:x}"
        srv.clients[objid] = ClientConnection(objid, conn_id, req.user)
        log.info("JMX connection %s: %s authenticated from %s", conn_id, req.user, self.peer)
        return _ok(jmxser.connection_stub(srv.host, srv.port, objid))

    def _connection_call(self, client: ClientConnection, call: Call) -> list[Effect]:
        srv = self.server
        reg = srv.registry
        name = call.name
        args = call.args
        if name == "close":
            srv.clients.pop(client.objid, None)
            log.info("JMX connection %s closed by the client", client.connection_id)
            return [Send(encode_return(_uid(), primitive=b""))]
        if name == "getConnectionId":
            return _ok(client.connection_id)
        if name == "getDefaultDomain":
            return _ok(DEFAULT_DOMAIN)
        if name == "getMBeanCount":
            return _ok(JInt(len(reg)))
        if name == "getDomains":
            return _ok(jmxser.string_array(sorted({n.domain for n in reg.query(None)})))
        if name == "queryNames":
            text = jmxser.read_object_name(args[0])
            if not jmxser.read_marshalled_null(args[1]):
                return _raise("IllegalArgumentException", "query expressions are not supported")
            pattern = ObjectName.parse(text) if text else None
            found = reg.query(pattern)
            return _ok(jmxser.hash_set([jmxser.object_name(n.canonical) for n in found]))
        if name == "isRegistered":
            target = _name_arg(args[0])
            registered = reg.get(target) is not None
            return [Send(encode_return(_uid(), primitive=bytes([registered])))]
        if name in ("getAttribute", "getAttributes"):
            target = _name_arg(args[0])
            mbean = reg.get(target)
            if mbean is None:
                return _raise("InstanceNotFoundException", target.canonical)
            if name == "getAttribute":
                attr = args[1]
                if not isinstance(attr, str):
                    raise ProtocolError("attribute name is not a String")
                getter = mbean.attributes.get(attr)
                if getter is None:
                    return _raise(
                        "AttributeNotFoundException",
                        f"The attribute {attr} is not a valid attribute for {target.canonical}",
                    )
                return _ok(getter(srv.broker))
            values = [
                jmxser.attribute(a, mbean.attributes[a](srv.broker))
                for a in jmxser.read_strings(args[1])
                if a in mbean.attributes
            ]
            return _ok(jmxser.attribute_list(values))
        return _raise("UnmarshalException", f"{name} is not supported by this broker yet")

    def _dgc(self, call: Call) -> list[Effect]:
        if call.name == "dirty":
            lease = call.args[2]
            vmid = lease.get("vmid") if isinstance(lease, dict) else None
            return _ok(jmxser.lease(vmid, LEASE_MS))
        return [Send(encode_return(_uid(), primitive=b""))]  # clean: void


def _name_arg(value: object) -> ObjectName:
    text = jmxser.read_object_name(value)
    if text is None:
        raise ProtocolError("null ObjectName")
    return ObjectName.parse(text)


def _ok(value: object) -> list[Effect]:
    return [Send(encode_return(_uid(), value))]


def _raise(kind: str, message: str) -> list[Effect]:
    return [Send(encode_return(_uid(), jmxser.exception(kind, message), exceptional=True))]
