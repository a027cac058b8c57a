"""Java RMI's JRMP stream protocol, sans-IO: what the JDK's RMI client sends and expects.

A connection opens with ``JRMI``, the version (2) and the protocol (StreamProtocol,
0x4B); the server answers ProtocolAck (0x4E) with the client's address as it sees it
(writeUTF host, writeInt port), and the client then names its own endpoint the same
way.  After that the client sends messages: Call (0x50) followed by one Java
serialisation stream, Ping (0x52), answered by PingAck (0x53), and DGCAck (0x54) with
a 14-byte UID.  A Call's stream starts with block data (the target's ObjID: objNum
long, UID int/long/short; the operation int, -1 for a method hash; the hash long) and
then the arguments, primitives in block data and objects as objects; it has no length,
so the arguments are read by the method's signature (:data:`METHODS`).  The answer is
ReturnData (0x51) and a stream whose block data holds the return type (1 normal, 2
exceptional) and a UID, then the value.  RMI streams annotate every class descriptor
with its codebase (null here).

docs/developers/research/jmx-rmi.md has the facts and where they come from.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.protocol.errors import ProtocolError
from broker.protocol.javaser import (
    STREAM_MAGIC,
    TC_BLOCKDATA,
    JavaStreamTruncated,
    ObjectStreamReader,
    ObjectStreamWriter,
)
from broker.protocol.properties import encode_java_utf

MAGIC = b"JRMI"
VERSION = 2
STREAM_PROTOCOL = 0x4B
SINGLE_OP_PROTOCOL = 0x4C
MULTIPLEX_PROTOCOL = 0x4D
PROTOCOL_ACK = 0x4E
PROTOCOL_NACK = 0x4F
CALL = 0x50
RETURN_DATA = 0x51
PING = 0x52
PING_ACK = 0x53
DGC_ACK = 0x54
NORMAL_RETURN = 1
EXCEPTIONAL_RETURN = 2

MAX_MESSAGE = 1 << 20  # a Call's stream larger than this is refused, not buffered

DGC_OBJNUM = 2  # ObjID.DGC_ID, in the zero UID space
DGC_INTERFACE_HASH = -669196253586618813  # sun.rmi.transport.DGCImpl_Stub
DGC_CLEAN = 0
DGC_DIRTY = 1

# Method hashes (first 8 bytes of SHA-1 of the method's name and descriptor, as the
# JDK's RMI computes them; the same constants are in the JDK's RMIServerImpl_Stub and
# RMIConnectionImpl_Stub) and the argument kinds each call carries: "L" an object,
# "J"/"I"/"Z" a primitive.
METHODS: dict[int, tuple[str, str]] = {
    -8081107751519807347: ("getVersion", ""),
    -1089742558549201240: ("newClient", "L"),
    -4742752445160157748: ("close", ""),
    -67907180346059933: ("getConnectionId", ""),
    6047668923998658472: ("getDefaultDomain", "L"),
    -2042362057335820635: ("getMBeanCount", "L"),
    -6662314179953625551: ("getDomains", "L"),
    9152567528369059802: ("queryNames", "LLL"),
    2915881009400597976: ("queryMBeans", "LLL"),
    8325683335228268564: ("isRegistered", "LL"),
    -1089783104982388203: ("getAttribute", "LLL"),
    6285293806596348999: ("getAttributes", "LLL"),
    -7404813916326233354: ("getMBeanInfo", "LL"),
    -2147516868461740814: ("isInstanceOf", "LLL"),
    -5037523307973544478: ("fetchNotifications", "JIJ"),
    6950095694996159938: ("getObjectInstance", "LL"),
    1434350937885235744: ("invoke", "LLLLL"),
    6738606893952597516: ("setAttribute", "LLL"),
    -230470228399681820: ("setAttributes", "LLL"),
    -5321691879380783377: ("addNotificationListeners", "LLL"),
    2549120024456183446: ("removeNotificationListeners", "LLL"),
    -8578317696269497109: ("addNotificationListener", "LLLLL"),
    6604721169198089513: ("removeNotificationListener", "LLL"),
    2578029900065214857: ("removeNotificationListener", "LLLLL"),
    -159498580868721452: ("unregisterMBean", "LL"),
    2510753813974665446: ("createMBean", "LLL"),
    -8679469989872508324: ("createMBean", "LLLL"),
    4867822117947806114: ("createMBean", "LLLLL"),
    -6604955182088909937: ("createMBean", "LLLLLL"),
}
# The RMI registry (ObjID 0, sun.rmi.registry.RegistryImpl_Stub's interface hash and op
# numbers): bind(String, Remote), list(), lookup(String), rebind(String, Remote),
# unbind(String).
REGISTRY_OBJNUM = 0
REGISTRY_INTERFACE_HASH = 4905912898345647071
REGISTRY_METHODS = {
    0: ("bind", "LL"),
    1: ("list", ""),
    2: ("lookup", "L"),
    3: ("rebind", "LL"),
    4: ("unbind", "L"),
}
# DGC (op numbers of the interface-hash protocol): dirty(ObjID[], long, Lease),
# clean(ObjID[], long, VMID, boolean).
DGC_METHODS = {DGC_DIRTY: ("dirty", "LJL"), DGC_CLEAN: ("clean", "LJLZ")}

_PRIMITIVE_SIZES = {"J": 8, "I": 4, "Z": 1}
# Calls decoded once and kept by their bytes: a monitoring agent sends the same calls
# (getAttributes of one MBean with the same names, queryNames) every poll, and decoding
# their ObjectName and String[] was a quarter of a poll's cost.  Only calls whose
# arguments the engine reads and never changes, of at most _MEMO_BYTES; at most
# _MEMO_CALLS kept (then the memo starts again).
_MEMO_METHODS = frozenset(
    {
        "getAttribute",
        "getAttributes",
        "queryNames",
        "queryMBeans",
        "getMBeanInfo",
        "isRegistered",
        "getObjectInstance",
        "isInstanceOf",
    }
)
_MEMO_BYTES = 4096
_MEMO_CALLS = 1024
_decoded: dict[bytes, Call] = {}
_CALL_BYTE = bytes([CALL])
_HEADER = struct.Struct(">qiqhiq")  # objNum, UID (unique, time, count), op, hash
_UTF_LEN = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class ObjID:
    """An exported object's identity: objNum and its UID space (unique, time, count)."""

    num: int
    unique: int = 0
    time: int = 0
    count: int = 0

    def pack(self) -> bytes:
        return struct.pack(">qiqh", self.num, self.unique, self.time, self.count)


@dataclass(frozen=True, slots=True)
class Handshake:
    """The client's opening: the protocol it asks for."""

    protocol: int


@dataclass(frozen=True, slots=True)
class ClientEndpoint:
    """The endpoint the client names after ProtocolAck (usually its host and 0)."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Call:
    """A remote call: the target, the method (``name``) and its decoded arguments."""

    target: ObjID
    op: int
    method_hash: int
    name: str
    args: list[object] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class DgcAck:
    uid: bytes


JrmpMessage = Handshake | ClientEndpoint | Call | Ping | DgcAck


class JrmpDecoder:
    """Bytes from a client in, messages out; malformed input raises ProtocolError."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._state = "magic"  # -> "endpoint" -> "messages"

    def feed(self, data: bytes) -> list[JrmpMessage]:
        if not self._buf and self._state == "messages" and data[:1] == _CALL_BYTE:
            # One read holding exactly a call decoded before (a poll's usual read).
            call = _decoded.get(data[1:])
            if call is not None:
                return [call]
        self._buf += data
        out: list[JrmpMessage] = []
        while True:
            msg = self._next()
            if msg is None:
                return out
            out.append(msg)

    def _next(self) -> JrmpMessage | None:
        buf = self._buf
        if self._state == "magic":
            if len(buf) < 7:
                if not MAGIC.startswith(bytes(buf[:4])):
                    raise ProtocolError("not a JRMP connection (bad magic)")
                return None
            if buf[:4] != MAGIC:
                raise ProtocolError("not a JRMP connection (bad magic)")
            version = int.from_bytes(buf[4:6], "big")
            if version != VERSION:
                raise ProtocolError(f"JRMP version {version} is not supported")
            protocol = buf[6]
            if protocol != STREAM_PROTOCOL:
                raise ProtocolError(f"JRMP protocol 0x{protocol:02x} is not supported")
            del buf[:7]
            self._state = "endpoint"
            return Handshake(protocol)
        if self._state == "endpoint":
            if len(buf) < 2:
                return None
            (n,) = _UTF_LEN.unpack_from(buf)
            if len(buf) < 2 + n + 4:
                return None
            try:
                host = bytes(buf[2 : 2 + n]).decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolError("client endpoint host is not UTF-8") from None
            port = int.from_bytes(buf[2 + n : 6 + n], "big", signed=True)
            del buf[: 6 + n]
            self._state = "messages"
            return ClientEndpoint(host, port)
        if not buf:
            return None
        kind = buf[0]
        if kind == PING:
            del buf[:1]
            return Ping()
        if kind == DGC_ACK:
            if len(buf) < 15:
                return None
            uid = bytes(buf[1:15])
            del buf[:15]
            return DgcAck(uid)
        if kind != CALL:
            raise ProtocolError(f"unknown JRMP message 0x{kind:02x}")
        data = bytes(buf[1:])
        call = _decoded.get(data)
        if call is not None:  # the buffer is exactly a call decoded before
            buf.clear()
            return call
        try:
            call, used = _decode_call(data)
        except JavaStreamTruncated:
            if len(buf) > MAX_MESSAGE:
                raise ProtocolError(f"call larger than {MAX_MESSAGE} bytes") from None
            return None
        del buf[: 1 + used]
        if used == len(data) <= _MEMO_BYTES and call.name in _MEMO_METHODS:
            if len(_decoded) >= _MEMO_CALLS:
                _decoded.clear()
            _decoded[data] = call
        return call


def _decode_call(data: bytes) -> tuple[Call, int]:
    """One Call's stream: the call and the bytes it used (JavaStreamTruncated: wait)."""
    r = ObjectStreamReader(data)
    num, unique, time, count, op, method_hash = _HEADER.unpack(r.primitive(_HEADER.size))
    target = ObjID(num, unique, time, count)
    if op == -1:
        method = METHODS.get(method_hash)
        if method is None:
            raise ProtocolError(f"unknown RMI method hash {method_hash}")
    elif target == ObjID(DGC_OBJNUM) and method_hash == DGC_INTERFACE_HASH:
        method = DGC_METHODS.get(op)
        if method is None:
            raise ProtocolError(f"unknown DGC operation {op}")
    elif target == ObjID(REGISTRY_OBJNUM) and method_hash == REGISTRY_INTERFACE_HASH:
        method = REGISTRY_METHODS.get(op)
        if method is None:
            raise ProtocolError(f"unknown registry operation {op}")
    else:
        raise ProtocolError(f"operation {op} with interface hash {method_hash} is not served")
    name, kinds = method
    args: list[object] = []
    for kind in kinds:
        if kind == "L":
            args.append(r.read_object())
            continue
        raw = r.primitive(_PRIMITIVE_SIZES[kind])
        if kind == "Z":
            args.append(raw != b"\0")
        else:
            args.append(int.from_bytes(raw, "big", signed=True))
    return Call(target, op, method_hash, name, args), r.offset


def encode_protocol_ack(host: str, port: int) -> bytes:
    """ProtocolAck with the client's address as the server sees it."""
    raw = encode_java_utf(host)
    return bytes([PROTOCOL_ACK]) + _UTF_LEN.pack(len(raw)) + raw + struct.pack(">i", port)


def encode_ping_ack() -> bytes:
    return bytes([PING_ACK])


def encode_return(
    uid: bytes, value: object = None, *, exceptional: bool = False, primitive: bytes | None = None
) -> bytes:
    """ReturnData: a normal return of ``value`` (an object) or ``primitive`` (its bytes,
    e.g. b"\\x01" for boolean true; b"" for void), or an exceptional one (``value`` is the
    Throwable, a javaser.JavaObject)."""
    if primitive is not None and not exceptional:
        if len(uid) != 14:
            raise ProtocolError("a return UID is 14 bytes")
        w = ObjectStreamWriter(annotate=True)
        w.block(bytes([NORMAL_RETURN]) + uid + primitive)
        return bytes([RETURN_DATA]) + bytes(w.out)
    return encode_return_of(uid, encode_returned(value), exceptional=exceptional)


# ReturnData, the stream's magic and the block-data record of the return type and UID.
_RETURN_HEAD = bytes([RETURN_DATA]) + STREAM_MAGIC + bytes([TC_BLOCKDATA, 15])
_NORMAL_HEAD = _RETURN_HEAD + bytes([NORMAL_RETURN])
_EXCEPTIONAL_HEAD = _RETURN_HEAD + bytes([EXCEPTIONAL_RETURN])


def encode_returned(value: object) -> bytes:
    """What ``value`` takes in a ReturnData after the return type and UID (it is the
    stream's first object, so its bytes do not depend on the UID): the part of an
    answer that can be kept and sent again with :func:`encode_return_of`."""
    return encode_returned_by(lambda w: w.value(value))


def encode_returned_by(write: Callable[[ObjectStreamWriter], None]) -> bytes:
    """:func:`encode_returned` of what ``write`` writes (one object) to a fresh stream."""
    w = ObjectStreamWriter(annotate=True)
    write(w)
    return bytes(memoryview(w.out)[len(STREAM_MAGIC) :])


def encode_return_of(uid: bytes, returned: bytes, *, exceptional: bool = False) -> bytes:
    """ReturnData of a value already encoded with :func:`encode_returned`."""
    if len(uid) != 14:
        raise ProtocolError("a return UID is 14 bytes")
    return b"".join((_EXCEPTIONAL_HEAD if exceptional else _NORMAL_HEAD, uid, returned))


def encode_handshake(host: str = "", port: int = 0) -> bytes:
    """What a client sends first: the StreamProtocol opening, then its endpoint."""
    raw = encode_java_utf(host)
    head = MAGIC + VERSION.to_bytes(2, "big") + bytes([STREAM_PROTOCOL])
    return head + _UTF_LEN.pack(len(raw)) + raw + struct.pack(">i", port)


def encode_call(target: ObjID, method_hash: int, args: list[object], op: int = -1) -> bytes:
    """A Call as the JDK's client writes it (for tests and fuzz seeds): primitives of
    consecutive primitive arguments share the header's block data, as
    ObjectOutputStream's buffering makes them."""
    if op == -1:
        method = METHODS.get(method_hash)
    elif method_hash == REGISTRY_INTERFACE_HASH:
        method = REGISTRY_METHODS.get(op)
    else:
        method = DGC_METHODS.get(op)
    if method is None:
        raise ProtocolError(f"unknown method {op}/{method_hash}")
    kinds = method[1]
    if len(kinds) != len(args):
        raise ProtocolError(f"{method[0]} takes {len(kinds)} arguments")
    w = ObjectStreamWriter(annotate=True)
    pending = bytearray(target.pack() + struct.pack(">iq", op, method_hash))
    for kind, arg in zip(kinds, args, strict=True):
        if kind == "L":
            if pending:
                w.block(bytes(pending))
                pending.clear()
            w.value(arg)
        elif kind == "Z":
            pending += bytes([bool(arg)])
        else:
            pending += struct.pack(">q" if kind == "J" else ">i", arg)
    if pending:
        w.block(bytes(pending))
    return bytes([CALL]) + bytes(w.out)
