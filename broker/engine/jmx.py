"""The JMX RMI connector's state machines, sans-IO.

:class:`JmxServer` is what every JRMP connection shares: the exported objects (the
RMIServer named in the service URL, one RMIConnection per successful newClient, the
DGC) and the MBean registry.  :class:`JrmpSession` is one TCP connection: bytes in
(``feed``), effects out (:class:`Send`, :class:`Close`, :class:`Authenticate`, which
the driver answers with ``auth_result`` once the user repository has; :class:`Run`, an
operation or attribute change the driver runs against the broker and answers with
``run_result``; :class:`Wait`, a fetchNotifications with nothing to give yet, which the
driver ends with ``fetch_timeout`` unless :meth:`JmxServer.publish` wakes it first).
"""

from __future__ import annotations

import logging
import secrets
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from broker.engine import jmx_operations, jmx_readops
from broker.engine import jmx_stockinfo as jmx_info
from broker.engine.jmx_mbeans import DEFAULT_DOMAIN, MBean, Registry, read_attributes, settled
from broker.engine.jmx_names import ObjectName
from broker.engine.jmx_notifications import ClientListeners, Listener, NotificationBuffer
from broker.engine.jmx_operations import AdminPort, OperationError
from broker.engine.jmx_replies import ReplyMemo
from broker.engine.jmx_values import (
    class_name,
    filter_types,
    is_java_type,
    java_types_have_list,
    java_value,
    name_arg,
)
from broker.protocol import jmxser
from broker.protocol.errors import ProtocolError
from broker.protocol.javaser import JavaObject
from broker.protocol.jrmp import (
    DGC_OBJNUM,
    REGISTRY_OBJNUM,
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
    encode_return_of,
)
from broker.protocol.jtypes import JInt

log = logging.getLogger(__name__)

_DGC_ID = ObjID(DGC_OBJNUM)
_REGISTRY_ID = ObjID(REGISTRY_OBJNUM)
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


@dataclass(frozen=True, slots=True)
class Run:
    """Run ``job`` against the broker (an AdminPort) and answer with ``run_result``;
    ``what`` names it in the log."""

    job: Callable[[AdminPort], Awaitable[object]]
    what: str
    user: str


@dataclass(frozen=True, slots=True)
class Wait:
    """A fetchNotifications is waiting: call ``fetch_timeout`` after ``seconds``."""

    seconds: float


Effect = Send | Close | Authenticate | Run | Wait

# The longest a fetchNotifications waits (the JDK client asks for 60 s by default).
MAX_FETCH_WAIT = 300.0


@dataclass
class ClientConnection:
    """One RMIConnection (a newClient that succeeded)."""

    objid: ObjID
    connection_id: str
    user: str
    listeners: ClientListeners = field(default_factory=ClientListeners)


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
    notifications: NotificationBuffer = field(default_factory=NotificationBuffer)
    # Sessions with a fetchNotifications waiting (at most one each: RMI calls on one
    # connection follow one another).
    waiting: dict[JrmpSession, None] = field(default_factory=dict)
    # Whether the stubs name a TLS endpoint (the ssljmxrmi connector).
    tls: bool = False
    # What an RMI registry served on this server's sessions binds: name -> the server
    # whose RMIServer stub a lookup of it returns (imq.jmx.rmiregistry.start).
    bound: dict[str, JmxServer] = field(default_factory=dict)
    # The answers a monitoring poll asks for each time, kept encoded (jmx_replies.py).
    replies: ReplyMemo = field(default_factory=ReplyMemo)

    def stub_bytes(self) -> bytes:
        return jmxser.server_stub_bytes(self.host, self.port, self.server_id, tls=self.tls)

    def listened(self, source: ObjectName) -> bool:
        """Whether any client listens to MBean ``source`` (else nothing is buffered)."""
        return any(
            lst.name.canonical == source.canonical
            or (lst.name.is_pattern and lst.name.matches(source))
            for c in self.clients.values()
            for lst in c.listeners.by_id.values()
        )

    def publish(
        self,
        source: str,
        notif_type: str,
        kind: str,
        message: str | None,
        timestamp_ms: int,
        **fields: object,
    ) -> list[JrmpSession]:
        """Buffer a notification of MBean ``source``; returns the sessions whose
        waiting fetch it may end (the driver calls their ``wake``)."""
        name = ObjectName.parse(source)
        if not self.listened(name):
            return []
        self.notifications.add(
            name,
            notif_type,
            lambda seq: jmxser.notification(
                kind, notif_type, source, seq, timestamp_ms, message, **fields
            ),
        )
        return list(self.waiting)


def _new_objid() -> ObjID:
    # Random object numbers (as the JDK's java.rmi.server.randomIDs): unguessable.
    return ObjID(
        secrets.randbits(63), secrets.randbits(31), secrets.randbits(40), secrets.randbits(15)
    )


class _ReturnUids:
    """The UIDs of ReturnData, made as java.rmi.server.UID makes them: a random int of
    this process, a time in milliseconds and a count that runs through the shorts before
    the time moves on (a random UID cost a getrandom call per answer)."""

    _PACK = struct.Struct(">iqh").pack

    def __init__(self) -> None:
        self.unique = secrets.randbits(32) - (1 << 31)
        self.time = int(time.time() * 1000)
        self.count = -(1 << 15)

    def next(self) -> bytes:
        count = self.count
        if count == (1 << 15):
            # As the JDK's UID: a new time, later than the last, once the counts are used.
            self.time = max(self.time + 1, int(time.time() * 1000))
            count = -(1 << 15)
        self.count = count + 1
        return self._PACK(self.unique, self.time, count)


_uid = _ReturnUids().next


class JrmpSession:
    """One JRMP connection from a JMX client."""

    def __init__(self, server: JmxServer, peer_host: str, peer_port: int) -> None:
        self.server = server
        self.peer = f"{peer_host}:{peer_port}"
        self._peer_host = peer_host
        self._peer_port = peer_port
        self._decoder = JrmpDecoder()
        self.closed = False
        # A fetchNotifications waiting for notifications: (client, start, limit).
        self._pending: tuple[ClientConnection, int, int] | None = None

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
        self.lost()
        return [Close(reason)]

    def lost(self) -> None:
        """The connection is gone (closed by either side)."""
        self.closed = True
        self._pending = None
        self.server.waiting.pop(self, None)

    def _handle(self, msg: object) -> list[Effect]:
        if type(msg) is Call:  # first: all but the opening messages are
            return self._call(msg)
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
        # First the RMIConnections (every call of a poll): their random ObjIDs are
        # never the DGC's, the registry's (zero UID space) or the RMIServer's.
        client = srv.clients.get(call.target)
        if client is not None:
            return self._connection_call(client, call)
        if call.target == _DGC_ID:
            return self._dgc(call)
        if call.target == _REGISTRY_ID and call.method_hash != -1:
            return self._registry(call)
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
        return _ok(jmxser.connection_stub(srv.host, srv.port, objid, tls=srv.tls))

    def _connection_call(self, client: ClientConnection, call: Call) -> list[Effect]:
        srv = self.server
        reg = srv.registry
        name = call.name
        args = call.args
        if name == "getAttributes":  # first: a monitoring poll is made of them
            target = name_arg(args[0])
            mbean = reg.get(target)
            if mbean is None:
                return _raise("InstanceNotFoundException", target.canonical)
            names = args[1]
            stamp = settled(srv.broker, mbean)
            if stamp is not None:
                body = srv.replies.settled(target, names, stamp)
                if body is not None:
                    return _returned(body)
            attrs, values = read_attributes(srv.broker, mbean, names)
            body = srv.replies.attribute_list(target, attrs, values)
            if stamp is not None:
                srv.replies.settle(target, names, stamp, body)
            return _returned(body)
        if name == "close":
            srv.clients.pop(client.objid, None)
            log.info("JMX connection %s closed by the client", client.connection_id)
            out: list[Effect] = [Send(encode_return(_uid(), primitive=b""))]
            return out
        if name == "getConnectionId":
            return _ok(client.connection_id)
        if name == "getDefaultDomain":
            return _ok(DEFAULT_DOMAIN)
        if name == "getMBeanCount":
            return _ok(JInt(len(reg)))
        if name == "getDomains":
            return _ok(jmxser.string_array(sorted({n.domain for n in reg.query(None)})))
        if name in ("queryNames", "queryMBeans"):
            text = jmxser.read_object_name(args[0])
            if not jmxser.read_marshalled_null(args[1]):
                return _wrapped_raise(
                    "RuntimeOperationsException",
                    "IllegalArgumentException",
                    "query expressions are not supported",
                )
            pattern = ObjectName.parse(text) if text else None
            names = reg.query(pattern)
            found = tuple(n.canonical for n in names)
            if name == "queryNames":
                body = srv.replies.value(
                    ("queryNames", text),
                    found,
                    lambda: jmxser.hash_set([jmxser.object_name(n) for n in found]),
                )
                return _returned(body)
            return _ok(
                jmxser.hash_set([jmxser.object_instance(n.canonical, class_name(n)) for n in names])
            )
        if name == "fetchNotifications":
            return self._fetch(client, args[0], args[1], args[2])
        if name == "removeNotificationListeners":
            target = name_arg(args[0])
            ids = [int(i) for i in jmxser.read_list(args[1]) if isinstance(i, int)]
            missing = [i for i in ids if i not in client.listeners.by_id]
            if missing:
                return _raise("ListenerNotFoundException", f"listener {missing[0]} not found")
            for i in ids:
                del client.listeners.by_id[i]
            log.info(
                "JMX %s: listeners %s of %s removed", client.connection_id, ids, target.canonical
            )
            return [Send(encode_return(_uid(), primitive=b""))]
        if name in ("addNotificationListener", "removeNotificationListener"):
            return _wrapped_raise(
                "RuntimeOperationsException",
                "IllegalArgumentException",
                "listener MBeans are not supported by this broker; use a client-side listener",
            )
        if name in ("createMBean", "unregisterMBean"):
            return _wrapped_raise(
                "RuntimeOperationsException",
                "UnsupportedOperationException",
                f"{name}: the broker's MBeans are its own; none can be added or removed",
            )
        if name == "addNotificationListeners":
            return self._add_listeners(client, args[0], args[1])
        target = name_arg(args[0])
        mbean = reg.get(target)
        if name == "isRegistered":
            return [Send(encode_return(_uid(), primitive=bytes([mbean is not None])))]
        if mbean is None:
            return _raise("InstanceNotFoundException", target.canonical)
        kind = jmx_info.kind_of(target)
        if name == "getObjectInstance":
            return _ok(jmxser.object_instance(target.canonical, class_name(target)))
        if name == "isInstanceOf":
            cls = args[1]
            yes = cls == class_name(target) or cls in jmx_info.COMMON_TYPES
            return [Send(encode_return(_uid(), primitive=bytes([yes])))]
        if name == "getMBeanInfo":
            if kind is None:
                info = jmxser.mbean_info(
                    class_name(target),
                    "",
                    [(a, "java.lang.Object", a, True, False, False) for a in mbean.attributes],
                    [],
                    [],
                )
                return _ok(info)
            key = kind.key
            return _returned(
                srv.replies.value(("getMBeanInfo", key), key, lambda: jmx_info.info_object(key))
            )
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
        if name == "setAttribute":
            attr_name, value = jmxser.read_attribute(jmxser.read_marshalled(args[1]))
            refused = _check_set(target, kind, attr_name, value)
            if refused is not None:
                return refused
            setter = jmx_operations.SETTERS[kind.key][attr_name]  # type: ignore[union-attr]

            async def set_one(port: AdminPort) -> object:
                await setter(port, target, value)
                return _VOID

            return [Run(set_one, f"set {attr_name} of {target.canonical}", client.user)]
        if name == "setAttributes":
            pairs = jmxser.read_attribute_list(jmxser.read_marshalled(args[1]))
            accepted = [
                (a, v, jmx_operations.SETTERS[kind.key][a])  # type: ignore[union-attr]
                for a, v in pairs
                if _check_set(target, kind, a, v) is None
            ]

            async def set_many(port: AdminPort) -> object:
                done = []
                for a, v, setter in accepted:
                    try:
                        await setter(port, target, v)
                    except OperationError as exc:  # JMX: what failed is left out
                        log.warning("JMX set %s of %s refused: %s", a, target.canonical, exc)
                        continue
                    done.append(jmxser.attribute(a, v))
                return jmxser.attribute_list(done)

            what = f"set {', '.join(a for a, _, _ in accepted)} of {target.canonical}"
            return [Run(set_many, what, client.user)]
        if name == "invoke":
            return self._invoke(client, mbean, kind, args[1], args[2], args[3])
        return _raise("UnmarshalException", f"{name} is not supported by this broker yet")

    def _invoke(
        self,
        client: ClientConnection,
        mbean: MBean,
        kind: jmx_info.MBeanKind | None,
        operation: object,
        params: object,
        signature: object,
    ) -> list[Effect]:
        if not isinstance(operation, str):
            raise ProtocolError("operation name is not a String")
        target = mbean.name
        values = jmxser.read_list(jmxser.read_marshalled(params))
        sig = tuple(jmxser.read_strings(signature)) if signature is not None else None
        known = kind.signatures(operation) if kind is not None else []
        matching = [s for s in known if (s == sig if sig is not None else len(s) == len(values))]
        key = kind.key if kind else ""
        run = jmx_operations.OPERATIONS.get(key, {}).get(operation)
        read = jmx_readops.READ_OPERATIONS.get(key, {}).get(operation)
        if not matching or len(values) != len(matching[0]):
            # The stock MBeans' words for an operation they do not have.
            what = f"{operation}({', '.join(sig or ())})"
            return _wrapped_raise(
                "RuntimeOperationsException",
                "IllegalArgumentException",
                f"Unsupported operation: {what}",
            )
        if run is None and read is None:
            what = f"{operation}({', '.join(sig or ())})"
            return _wrapped_raise(
                "ReflectionException",
                "NoSuchMethodException",
                f"{what}: not supported by this broker yet",
                outer=what,
            )
        for value, java_type in zip(values, matching[0], strict=True):
            if not is_java_type(value, java_type):
                return _wrapped_raise(
                    "RuntimeOperationsException",
                    "IllegalArgumentException",
                    f"{operation}: {value!r} is not a {java_type}",
                )
        if run is None:
            # Reads the broker's state in place, like a getter (jmx_readops.py).
            assert read is not None
            return _ok(java_value(read(self.server.broker, mbean.key, values)))
        if java_types_have_list(matching[0]):
            values = [
                jmxser.read_attribute_list(v) if t == "javax.management.AttributeList" else v
                for v, t in zip(values, matching[0], strict=True)
            ]

        async def job(port: AdminPort) -> object:
            return await run(port, target, values)

        return [Run(job, f"{operation} on {target.canonical}", client.user)]

    def run_result(self, req: Run, value: object, error: BaseException | None) -> list[Effect]:
        """The outcome of a :class:`Run`: ``value`` (None: null; ``_VOID``: void) or
        ``error`` (an OperationError, or anything else: a failure of ours)."""
        if self.closed:
            return []
        if error is None:
            log.info("JMX %s by %s: done", req.what, req.user)
            if value is _VOID:
                return [Send(encode_return(_uid(), primitive=b""))]
            return _ok(java_value(value))
        if isinstance(error, OperationError):
            log.warning("JMX %s by %s refused: %s", req.what, req.user, error.message)
            if error.kind in ("MBeanException", "IllegalArgumentException"):
                # As OpenMQ's MBeans: the refusal inside an InvocationTargetException.
                return _mbean_exception(error.message)
            return _raise(error.kind, error.message)
        log.error("JMX %s by %s failed", req.what, req.user, exc_info=error)
        return _mbean_exception(f"{req.what} failed: {error}")

    # -- notifications -----------------------------------------------------------

    def _add_listeners(
        self, client: ClientConnection, names: object, filters: object
    ) -> list[Effect]:
        targets = [name_arg(n) for n in jmxser.read_list(names)]
        filter_list = jmxser.read_list(filters)
        if len(filter_list) != len(targets):
            raise ProtocolError("addNotificationListeners: names and filters differ in number")
        listeners = []
        for target, raw in zip(targets, filter_list, strict=True):
            if not target.is_pattern and self.server.registry.get(target) is None:
                return _raise("InstanceNotFoundException", target.canonical)
            types = filter_types(jmxser.read_marshalled(raw))
            listeners.append(Listener(target, types))
        ids = []
        for lst in listeners:
            lid = self.server.notifications.new_listener_id()
            client.listeners.by_id[lid] = lst
            ids.append(lid)
        log.info(
            "JMX %s: listening to %s",
            client.connection_id,
            ", ".join(t.canonical for t in targets),
        )
        return _ok(jmxser.integer_array(ids))

    def _fetch(
        self, client: ClientConnection, start: object, limit: object, timeout: object
    ) -> list[Effect]:
        if not isinstance(start, int) or not isinstance(limit, int) or not isinstance(timeout, int):
            raise ProtocolError("fetchNotifications takes long, int, long")
        buf = self.server.notifications
        earliest, nxt, found = buf.fetch(start, limit, client.listeners)
        if found or start < 0 or timeout <= 0:
            return _ok(jmxser.notification_result(earliest, nxt, found))
        self._pending = (client, start, limit)
        self.server.waiting[self] = None
        return [Wait(min(timeout / 1000.0, MAX_FETCH_WAIT))]

    def wake(self) -> list[Effect]:
        """New notifications: answer the waiting fetch if any are for it."""
        pending = self._pending
        if pending is None or self.closed:
            return []
        client, start, limit = pending
        earliest, nxt, found = self.server.notifications.fetch(start, limit, client.listeners)
        if not found and client.objid in self.server.clients:
            return []
        return self._answer_fetch(earliest, nxt, found)

    def fetch_timeout(self) -> list[Effect]:
        """The waiting fetch's time is up: answer with what there is (maybe nothing)."""
        pending = self._pending
        if pending is None or self.closed:
            return []
        client, start, limit = pending
        earliest, nxt, found = self.server.notifications.fetch(start, limit, client.listeners)
        return self._answer_fetch(earliest, nxt, found)

    def _answer_fetch(
        self, earliest: int, nxt: int, found: list[tuple[int, JavaObject]]
    ) -> list[Effect]:
        self._pending = None
        self.server.waiting.pop(self, None)
        return _ok(jmxser.notification_result(earliest, nxt, found))

    def _registry(self, call: Call) -> list[Effect]:
        """The RMI registry's calls: lookup and list; the rest are refused, as a
        registry refuses them from another host."""
        bound = self.server.bound
        if call.name == "list":
            return _ok(jmxser.string_array(sorted(bound)))
        if call.name == "lookup":
            name = call.args[0]
            if not isinstance(name, str):
                raise ProtocolError("registry lookup of a non-String name")
            target = bound.get(name)
            if target is None:
                return _raise("NotBoundException", name)
            return _ok(jmxser.server_stub(target.host, target.port, target.server_id, target.tls))
        return _raise("AccessException", f"Registry.{call.name} disallowed: the broker's registry")

    def _dgc(self, call: Call) -> list[Effect]:
        if call.name == "dirty":
            lease = call.args[2]
            vmid = lease.get("vmid") if isinstance(lease, dict) else None
            return _ok(jmxser.lease(vmid, LEASE_MS))
        return [Send(encode_return(_uid(), primitive=b""))]  # clean: void


def _ok(value: object) -> list[Effect]:
    return [Send(encode_return(_uid(), value))]


def _returned(body: bytes) -> list[Effect]:
    """A normal return of a value already encoded (jmx_replies.py)."""
    return [Send(encode_return_of(_uid(), body))]


def _raise(kind: str, message: str) -> list[Effect]:
    return [Send(encode_return(_uid(), jmxser.exception(kind, message), exceptional=True))]


def _wrapped_raise(wrapper: str, kind: str, message: str, outer: str | None = None) -> list[Effect]:
    """``wrapper`` (MBeanException, ReflectionException, RuntimeOperationsException)
    around a ``kind`` with ``message``."""
    inner = jmxser.exception(kind, message)
    exc = jmxser.wrapped(wrapper, outer or message, inner)
    return [Send(encode_return(_uid(), exc, exceptional=True))]


def _mbean_exception(message: str) -> list[Effect]:
    exc = jmxser.wrapped("MBeanException", message, jmxser.invocation_target(message))
    return [Send(encode_return(_uid(), exc, exceptional=True))]


class _Void:
    pass


_VOID = _Void()  # a Run whose Java method returns void


def _check_set(
    target: ObjectName, kind: jmx_info.MBeanKind | None, attr: str, value: object
) -> list[Effect] | None:
    """The refusal of setting ``attr`` to ``value`` (None: it may be set)."""
    info = kind.attribute(attr) if kind is not None else None
    if info is None:
        return _raise(
            "AttributeNotFoundException",
            f"The attribute {attr} is not a valid attribute for {target.canonical}",
        )
    assert kind is not None
    if not info[4] or attr not in jmx_operations.SETTERS.get(kind.key, {}):
        return _raise(
            "AttributeNotFoundException",
            f"The attribute {attr} of {target.canonical} cannot be set"
            + ("" if not info[4] else " on this broker"),
        )
    if value is None or not is_java_type(value, info[1]):
        return _raise(
            "InvalidAttributeValueException",
            f"{attr} takes a {info[1]}, not {type(value).__name__} {value!r}",
        )
    return None
