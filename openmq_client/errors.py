"""JMS-shaped exceptions raised by the client.

Every error that comes from a broker reply carries the reply's ``JMQStatus`` (and
``JMQReason`` when the broker sent one), so callers can branch on the number the same
way the Java client maps statuses to exception classes.
"""

from __future__ import annotations

from broker.protocol.types import PacketType, Status


class JMSException(Exception):
    """Base class; ``status`` is the broker's ``JMQStatus`` when a reply caused it."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class BrokerUnreachableException(JMSException):
    """The broker could not be reached (port mapper or service refused, timed out) or the
    connection to it was lost (the broker stopped, crashed or the network broke).  Callers
    that serve others (the UMS gateway, the portal) answer it as "broker unreachable" and
    connect again later; the connection it came from is closed."""


class IllegalStateException(JMSException):
    """An operation on a closed object, or one the object's mode does not allow."""


class JMSSecurityException(JMSException):
    """Authentication failed or the broker's access control refused the operation."""


class InvalidClientIDException(JMSException):
    """SET_CLIENTID was refused (id in use: 409, or malformed: 400)."""


class InvalidDestinationException(JMSException):
    """The destination does not exist (404) and cannot be auto-created."""


class InvalidSelectorException(JMSException):
    """The broker rejected a message selector (400)."""


class ResourceAllocationException(JMSException):
    """The broker is out of a resource: full (414), too large (423), too many clients."""


class MessageFormatException(JMSException):
    """A body or property value cannot be represented in the Java type system."""


class TransactionRolledBackException(JMSException):
    """A commit failed and the transaction was rolled back."""


def status_error(
    ptype: int,
    status: int,
    reason: str | None = None,
    *,
    what: str = "",
    selector: bool = False,
) -> JMSException:
    """Map a failed reply to the exception the Java client would throw for it."""
    try:
        name = PacketType(ptype).name
    except ValueError:
        name = f"packet type {ptype}"
    try:
        sname = Status(status).name
    except ValueError:
        sname = "UNKNOWN"
    text = f"{name}{' ' + what if what else ''} failed: {status} {sname}"
    if reason:
        text += f" ({reason})"
    cls: type[JMSException] = JMSException
    if status in (Status.FORBIDDEN, Status.INVALID_LOGIN, Status.UNAUTHORIZED):
        cls = JMSSecurityException
    elif ptype == PacketType.SET_CLIENTID and status in (Status.CONFLICT, Status.BAD_REQUEST):
        cls = InvalidClientIDException
    elif status == Status.BAD_REQUEST and selector:
        cls = InvalidSelectorException
    elif status == Status.NOT_FOUND:
        cls = InvalidDestinationException
    elif status in (Status.ENTITY_TOO_LARGE, Status.RESOURCE_FULL, Status.UNAVAILABLE):
        cls = ResourceAllocationException
    elif status == Status.CONFLICT and ptype == PacketType.ADD_CONSUMER:
        # Too many active consumers on the destination.
        cls = ResourceAllocationException
    elif status == Status.NOT_ALLOWED and ptype == PacketType.ADD_PRODUCER:
        # Too many producers on the destination.
        cls = ResourceAllocationException
    return cls(text, status, reason)


__all__ = [
    "IllegalStateException",
    "InvalidClientIDException",
    "InvalidDestinationException",
    "InvalidSelectorException",
    "JMSException",
    "JMSSecurityException",
    "MessageFormatException",
    "ResourceAllocationException",
    "TransactionRolledBackException",
    "status_error",
]
