"""What the admin commands share: the refusal they raise (:class:`AdminError`), the
(reply properties, body) they return (:data:`Result`), the request-property parsing
(JMQDestination and JMQDestType, numbers, booleans, a CREATE/UPDATE request's ``*Info``
body, JMQMessageID), the destination a request names (:func:`lookup`) and saving the
instance's configuration after an update (:func:`save_config`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from broker.core.admin_views import flag  # noqa: F401 - the handlers' name for it
from broker.protocol.javaser import JavaSerializationError, decode_object
from broker.protocol.names import JMQ_DEST_TYPE, JMQ_DESTINATION, JMQ_MESSAGE_ID
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC, Status

if TYPE_CHECKING:
    from broker.core.destination import Destination
    from broker.engine import ConnectionEngine


log = logging.getLogger("broker.admin")

# (props, body) of a reply; the handler adds JMQMessageType and JMQStatus.
Result = tuple[dict[str, object], bytes]


class AdminError(Exception):
    """A refused request: ``status`` and ``reason`` become the reply's JMQStatus and
    JMQErrorString."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def request_dest_type(props: dict) -> int:
    value = props.get(JMQ_DEST_TYPE)
    return int(value) if isinstance(value, int) else DEST_QUEUE  # type: ignore[arg-type]


def request_dest_name(props: dict) -> str:
    name = props.get(JMQ_DESTINATION)
    if not isinstance(name, str) or not name:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DESTINATION} is missing")
    return name


def is_openmq4(conn: ConnectionEngine) -> bool:
    """Is the admin client an OpenMQ 4.x one (HELLO's JMQVersion "4.x")?  Some of its
    classes compute other serialVersionUIDs."""
    major = conn.client_version.split(".", 1)[0].strip()
    return major.isdigit() and int(major) < 5


def long_prop(props: dict, name: str, required: bool = False) -> int | None:
    value = props.get(name)
    if value is None:
        if required:
            raise AdminError(Status.BAD_REQUEST, f"{name} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AdminError(Status.BAD_REQUEST, f"{name} must be a number, not {value!r}")
    return int(value)


def read_info(body: bytes, cls: str) -> dict[str, Any]:
    """The fields of the ``*Info`` object a CREATE/UPDATE request carries."""
    if not body:
        raise AdminError(Status.BAD_REQUEST, f"the request has no {cls} body")
    try:
        info = decode_object(body, generic=True)
    except JavaSerializationError as exc:
        raise AdminError(Status.BAD_REQUEST, f"unreadable {cls} body: {exc}") from None
    if (
        not isinstance(info, dict)
        or info.get("__class__") != f"com.sun.messaging.jmq.util.admin.{cls}"
    ):
        got = info.get("__class__") if isinstance(info, dict) else type(info).__name__
        raise AdminError(Status.BAD_REQUEST, f"the request body is a {got}, not a {cls}")
    return info


def host_of(peer: str) -> str:
    """The host of a "host:port" peer address."""
    return peer.rpartition(":")[0] or peer


def lookup(conn: ConnectionEngine, props: dict) -> Destination:
    """The destination JMQDestination and JMQDestType name (404 if there is none of
    that kind)."""
    name = request_dest_name(props)
    dtype = request_dest_type(props)
    dest = conn.router.lookup(name, dtype)
    if dest is None or bool(dest.dest_type & DEST_TOPIC) != bool(dtype & DEST_TOPIC):
        raise AdminError(Status.NOT_FOUND, f"destination {name} not found")
    return dest


async def save_config(conn: ConnectionEngine) -> None:
    """Write the instance's config.properties (after a run-time change), in the executor."""
    broker = conn.broker
    try:
        await asyncio.get_running_loop().run_in_executor(
            broker.executor, broker.config.save_instance_file
        )
    except OSError as exc:
        raise AdminError(
            Status.ERROR, f"applied, but {broker.config.instance_file} not written: {exc}"
        ) from None


def message_id(props: dict, required: bool) -> str | None:
    """The JMQMessageID as a JMSMessageID ("ID:" added if missing); None if absent and not
    ``required``."""
    mid = props.get(JMQ_MESSAGE_ID)
    if mid is None:
        if required:
            raise AdminError(Status.BAD_REQUEST, f"{JMQ_MESSAGE_ID} is missing")
        return None
    if not isinstance(mid, str) or not mid.strip():
        raise AdminError(Status.BAD_REQUEST, f"bad JMQMessageID {mid!r}")
    mid = mid.strip()
    return mid if mid.startswith("ID:") else "ID:" + mid
