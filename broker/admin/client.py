"""An admin-protocol client (admin.md §1-§3), what ``imqcmd`` does on the wire.

It connects to the broker's ADMIN service (through the port mapper) as an administrator,
opens a CLIENT_ACKNOWLEDGE session with a non-persistent producer on queue ``__JMQAdmin``
and a consumer on a temporary reply queue, then sends OBJECT_MESSAGE requests whose
``JMQMessageType`` selects the command and waits for the matching reply::

    async with await AdminClient.open("127.0.0.1", 7676, "admin", "admin") as admin:
        print(await admin.hello())
        for d in await admin.destinations():
            print(d["name"], d["nMessages"])

Reply bodies are Java-serialised; the ``*Info`` objects (DestinationInfo, ServiceInfo, ...)
are read by :func:`read_java_object`, a small generic ObjectInputStream that turns each
object into a dict of its fields (``__class__`` names the class).
"""

from __future__ import annotations

import struct
from typing import Any

from broker.protocol.javaser import JavaSerializationError, decode_properties_object
from broker.protocol.jtypes import JInt, JLong

ADMIN_QUEUE = "__JMQAdmin"

# MessageType (admin.md §3).
DESTROY_DESTINATION = 12
DESTROY_DURABLE = 14
GET_CONNECTIONS = 16
GET_DESTINATIONS = 20
GET_SERVICES = 26
HELLO = 28
PAUSE = 30
PURGE_DESTINATION = 32
RESUME = 36
SHUTDOWN = 38
GET_BROKER_PROPS = 54

# DestType bits / DestState (pause) values.
DEST_QUEUE = 1
DEST_TOPIC = 2
PAUSE_CONSUMERS = 1
PAUSE_PRODUCERS = 2
PAUSE_ALL = 3


class AdminError(Exception):
    """A non-200 admin reply (``status`` is JMQStatus, ``text`` the JMQErrorString)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{text} (status {status})" if text else f"status {status}")
        self.status = status
        self.text = text


# --------------------------------------------------------------------------------------
# A generic (read-only) ObjectInputStream for admin reply bodies
# --------------------------------------------------------------------------------------

_PRIM = {"I": ">i", "J": ">q", "Z": ">?", "B": ">b", "S": ">h", "C": ">H", "F": ">f", "D": ">d"}
_BOXED = {
    "java.lang.Integer",
    "java.lang.Long",
    "java.lang.Short",
    "java.lang.Byte",
    "java.lang.Boolean",
    "java.lang.Float",
    "java.lang.Double",
    "java.lang.Character",
}
_BASE = 0x7E0000


class _Desc:
    __slots__ = ("name", "flags", "fields", "superdesc")

    def __init__(self, name: str, flags: int) -> None:
        self.name = name
        self.flags = flags
        self.fields: list[tuple[str, str]] = []
        self.superdesc: _Desc | None = None


class _ObjReader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.handles: list[object] = []

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise JavaSerializationError("truncated Java serialisation stream")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def utf(self, long: bool = False) -> str:
        n = self.unpack(">q" if long else ">H")
        return self.take(n).decode("utf-8", errors="replace")

    def ref(self) -> object:
        idx = self.unpack(">i") - _BASE
        if not 0 <= idx < len(self.handles):
            raise JavaSerializationError(f"bad handle {idx + _BASE:#x}")
        return self.handles[idx]

    def classdesc(self) -> _Desc | None:
        tc = self.take(1)[0]
        if tc == 0x70:
            return None
        if tc == 0x71:
            d = self.ref()
            if not isinstance(d, _Desc):
                raise JavaSerializationError("handle is not a class descriptor")
            return d
        if tc != 0x72:
            raise JavaSerializationError(f"unsupported class descriptor tag {tc:#x}")
        d = _Desc(self.utf(), 0)
        self.take(8)  # serialVersionUID
        self.handles.append(d)
        d.flags = self.take(1)[0]
        for _ in range(self.unpack(">h")):
            code = chr(self.take(1)[0])
            fname = self.utf()
            if code in "L[":
                self.content()  # the type signature string
            d.fields.append((code, fname))
        self.annotations()
        d.superdesc = self.classdesc()
        return d

    def annotations(self) -> list[object]:
        """Contents up to TC_ENDBLOCKDATA (block data as bytes)."""
        out: list[object] = []
        while True:
            tc = self.data[self.pos] if self.pos < len(self.data) else None
            if tc is None:
                raise JavaSerializationError("truncated Java serialisation stream")
            if tc == 0x78:
                self.pos += 1
                return out
            if tc == 0x77:
                self.pos += 1
                out.append(self.take(self.take(1)[0]))
            elif tc == 0x7A:
                self.pos += 1
                out.append(self.take(self.unpack(">i")))
            else:
                out.append(self.content())

    def content(self) -> object:
        tc = self.take(1)[0]
        if tc == 0x70:
            return None
        if tc == 0x71:
            return self.ref()
        if tc in (0x74, 0x7C):
            s = self.utf(long=tc == 0x7C)
            self.handles.append(s)
            return s
        if tc == 0x75:
            return self.array()
        if tc == 0x73:
            return self.obj()
        if tc == 0x7E:  # enum: class desc + constant name
            self.classdesc()
            idx = len(self.handles)
            self.handles.append(None)
            name = self.content()
            self.handles[idx] = name
            return name
        raise JavaSerializationError(f"unsupported stream tag {tc:#x}")

    def array(self) -> object:
        d = self.classdesc()
        if d is None:
            raise JavaSerializationError("array without a class")
        idx = len(self.handles)
        self.handles.append(None)
        n = self.unpack(">i")
        elem = d.name[1:2]
        if elem == "B":
            value: object = self.take(n)
        elif elem in _PRIM:
            value = [self.unpack(_PRIM[elem]) for _ in range(n)]
        else:
            value = [self.content() for _ in range(n)]
        self.handles[idx] = value
        return value

    def obj(self) -> object:
        d = self.classdesc()
        if d is None:
            raise JavaSerializationError("object without a class")
        idx = len(self.handles)
        fields: dict[str, object] = {"__class__": d.name}
        self.handles.append(fields)
        chain = []
        c: _Desc | None = d
        while c is not None:
            chain.append(c)
            c = c.superdesc
        extra: list[object] = []
        for c in reversed(chain):
            if c.flags & 0x04:  # Externalizable: not used by admin replies
                raise JavaSerializationError(f"externalizable {c.name} is not supported")
            for code, fname in c.fields:
                if code in "L[":
                    fields[fname] = self.content()
                else:
                    fields[fname] = self.unpack(_PRIM[code])
            if c.flags & 0x01:  # SC_WRITE_METHOD: custom data follows
                extra.extend(self.annotations())
        value = self._convert(d.name, fields, extra)
        self.handles[idx] = value
        return value

    @staticmethod
    def _convert(name: str, fields: dict[str, object], extra: list[object]) -> object:
        if name in _BOXED:
            v = fields.get("value")
            if name == "java.lang.Integer":
                return JInt(v)  # type: ignore[arg-type]
            if name == "java.lang.Long":
                return JLong(v)  # type: ignore[arg-type]
            return v
        if name in ("java.util.Vector", "java.util.ArrayList"):
            if name == "java.util.Vector":
                data = fields.get("elementData") or []
                return list(data)[: fields.get("elementCount", 0)]  # type: ignore[call-overload]
            objs = [x for x in extra if not isinstance(x, bytes)]
            return objs
        if name in (
            "java.util.Hashtable",
            "java.util.Properties",
            "java.util.HashMap",
            "java.util.LinkedHashMap",
        ):
            objs = [x for x in extra if not isinstance(x, bytes)]
            return dict(zip(objs[0::2], objs[1::2], strict=False))
        return fields


def read_java_object(data: bytes) -> object:
    """Decode one Java-serialised object: Vectors become lists, Hashtables dicts, boxed
    numbers ints, any other object a dict of its fields plus ``__class__``."""
    r = _ObjReader(data)
    if r.take(4) != b"\xac\xed\x00\x05":
        raise JavaSerializationError("not a Java serialisation stream")
    return r.content()


def read_vector(data: bytes | None) -> list[Any]:
    if not data:
        return []
    value = read_java_object(data)
    if not isinstance(value, list):
        raise JavaSerializationError("expected a java.util.Vector")
    return value


# --------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------


class AdminClient:
    """One admin connection (see the module docstring)."""

    def __init__(self, conn, session, producer, consumer, reply_queue) -> None:
        self.conn = conn
        self.session = session
        self.producer = producer
        self.consumer = consumer
        self.reply_queue = reply_queue

    @classmethod
    async def open(
        cls,
        host: str = "localhost",
        port: int = 7676,
        user: str = "admin",
        password: str = "admin",
        *,
        connect_timeout: float = 30.0,
    ) -> AdminClient:
        """Connect to the ADMIN service found through the port mapper at host:port."""
        from broker.client import AckMode, Queue, connect

        conn = await connect(
            host,
            port,
            user=user,
            password=password,
            service_type="ADMIN",
            connect_timeout=connect_timeout,
            ping_interval=None,
        )
        try:
            await conn.start()
            session = await conn.create_session(AckMode.CLIENT_ACKNOWLEDGE)
            producer = await session.create_producer(Queue(ADMIN_QUEUE), persistent=False)
            reply_queue = await session.create_temporary_queue()
            consumer = await session.create_consumer(reply_queue)
        except BaseException:
            await conn.close()
            raise
        return cls(conn, session, producer, consumer, reply_queue)

    async def close(self) -> None:
        if not self.conn.is_closed:
            await self.conn.close()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self,
        msg_type: int,
        props: dict[str, object] | None = None,
        body: bytes | None = None,
        timeout: float = 10,
    ) -> tuple[dict[str, object], bytes | None]:
        """Send one request; the reply's properties and body.  Raises AdminError on a
        non-200 JMQStatus and TimeoutError when no reply comes within ``timeout``."""
        from broker.client import ObjectMessage

        msg = ObjectMessage(
            body,
            properties={"JMQMessageType": JInt(msg_type), **(props or {})},
            reply_to=self.reply_queue,
        )
        await self.producer.send(msg, persistent=False)
        loop_deadline = timeout
        while True:
            reply = await self.consumer.receive(timeout=loop_deadline)
            if reply is None:
                raise TimeoutError(f"no reply from the broker within {timeout:g} s")
            await reply.acknowledge()
            rprops = reply.properties
            if rprops.get("JMQMessageType") != msg_type + 1:
                continue  # a late reply to an earlier request
            status = int(rprops.get("JMQStatus", 500))  # type: ignore[call-overload]
            if status != 200:
                raise AdminError(status, str(rprops.get("JMQErrorString") or ""))
            data = reply.data if isinstance(reply, ObjectMessage) else None
            return rprops, data

    # -- commands ---------------------------------------------------------------------

    async def hello(self) -> str:
        props, _ = await self.request(HELLO)
        return str(props.get("JMQInstanceName", ""))

    async def broker_props(self) -> dict[str, str]:
        _, body = await self.request(GET_BROKER_PROPS)
        return decode_properties_object(body) if body else {}

    async def connections(self, service: str | None = None) -> list[dict[str, Any]]:
        props = {"JMQServiceName": service} if service else None
        _, body = await self.request(GET_CONNECTIONS, props)
        return read_vector(body)

    async def destinations(
        self, name: str | None = None, dest_type: int = DEST_QUEUE
    ) -> list[dict[str, Any]]:
        props = _dest(name, dest_type) if name else None
        _, body = await self.request(GET_DESTINATIONS, props)
        return read_vector(body)

    async def services(self, name: str | None = None) -> list[dict[str, Any]]:
        props = {"JMQServiceName": name} if name else None
        _, body = await self.request(GET_SERVICES, props)
        return read_vector(body)

    async def purge(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        await self.request(PURGE_DESTINATION, _dest(name, dest_type))

    async def destroy(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        await self.request(DESTROY_DESTINATION, _dest(name, dest_type))

    async def destroy_durable(self, name: str, client_id: str | None) -> None:
        props: dict[str, object] = {"JMQDurableName": name}
        if client_id:
            props["JMQClientID"] = client_id
        await self.request(DESTROY_DURABLE, props)

    async def pause_destination(
        self, name: str, dest_type: int = DEST_QUEUE, what: int = PAUSE_ALL
    ) -> None:
        props = {"JMQPauseTarget": "JMQDestination", **_dest(name, dest_type)}
        props["JMQDestState"] = JInt(what)
        await self.request(PAUSE, props)

    async def resume_destination(self, name: str, dest_type: int = DEST_QUEUE) -> None:
        props = {"JMQPauseTarget": "JMQDestination", **_dest(name, dest_type)}
        await self.request(RESUME, props)

    async def pause_service(self, name: str) -> None:
        await self.request(PAUSE, {"JMQPauseTarget": "JMQServiceName", "JMQServiceName": name})

    async def resume_service(self, name: str) -> None:
        await self.request(RESUME, {"JMQPauseTarget": "JMQServiceName", "JMQServiceName": name})

    async def pause(self) -> None:
        """Pause the whole broker (its NORMAL services)."""
        await self.request(PAUSE)

    async def resume(self) -> None:
        await self.request(RESUME)

    async def shutdown(self, timeout: float = 10) -> None:
        """Ask the broker to shut down; a missing reply counts as success (admin.md §2)."""
        try:
            await self.request(SHUTDOWN, timeout=timeout)
        except TimeoutError:
            pass


def _dest(name: str | None, dest_type: int) -> dict[str, object]:
    return {"JMQDestination": name, "JMQDestType": JInt(dest_type)}


__all__ = ["ADMIN_QUEUE", "AdminClient", "AdminError", "read_java_object", "read_vector"]
