"""Protocol constants: packet types, status codes, flags, destination types and friends.

Numbers follow the code of the real client and broker (docs/developers/protocol.md); where
the 4.1 protocol document disagrees (INFO_REQUEST, VERIFY_TRANSACTION) the code wins.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

MAGIC = 469754818  # 0x1BFFE3C2
HEADER_SIZE = 72

PACKET_VERSION_103 = 103
PACKET_VERSION_200 = 200
PACKET_VERSION_301 = 301
CURRENT_PACKET_VERSION = PACKET_VERSION_301
KNOWN_PACKET_VERSIONS = frozenset({PACKET_VERSION_103, PACKET_VERSION_200, PACKET_VERSION_301})


class PacketType(IntEnum):
    """Packet type numbers (fixed-header offset 6)."""

    NULL = 0
    TEXT_MESSAGE = 1
    BYTES_MESSAGE = 2
    MAP_MESSAGE = 3
    STREAM_MESSAGE = 4
    OBJECT_MESSAGE = 5
    MESSAGE = 6
    SEND_REPLY = 9
    HELLO = 10
    HELLO_REPLY = 11
    AUTHENTICATE = 12
    AUTHENTICATE_REPLY = 13
    ADD_CONSUMER = 14
    ADD_CONSUMER_REPLY = 15
    DELETE_CONSUMER = 16
    DELETE_CONSUMER_REPLY = 17
    ADD_PRODUCER = 18
    ADD_PRODUCER_REPLY = 19
    START = 20
    STOP = 22
    STOP_REPLY = 23
    ACKNOWLEDGE = 24
    ACKNOWLEDGE_REPLY = 25
    BROWSE = 26
    BROWSE_REPLY = 27
    GOODBYE = 28
    GOODBYE_REPLY = 29
    ERROR = 30
    REDELIVER = 32
    CREATE_DESTINATION = 34
    CREATE_DESTINATION_REPLY = 35
    DESTROY_DESTINATION = 36
    DESTROY_DESTINATION_REPLY = 37
    AUTHENTICATE_REQUEST = 38
    VERIFY_DESTINATION = 40
    VERIFY_DESTINATION_REPLY = 41
    DELIVER = 42
    DELIVER_REPLY = 43
    START_TRANSACTION = 44
    START_TRANSACTION_REPLY = 45
    COMMIT_TRANSACTION = 46
    COMMIT_TRANSACTION_REPLY = 47
    ROLLBACK_TRANSACTION = 48
    ROLLBACK_TRANSACTION_REPLY = 49
    SET_CLIENTID = 50
    SET_CLIENTID_REPLY = 51
    RESUME_FLOW = 52
    PING = 54
    PING_REPLY = 55
    PREPARE_TRANSACTION = 56
    PREPARE_TRANSACTION_REPLY = 57
    END_TRANSACTION = 58
    END_TRANSACTION_REPLY = 59
    RECOVER_TRANSACTION = 60
    RECOVER_TRANSACTION_REPLY = 61
    GENERATE_UID = 62
    GENERATE_UID_REPLY = 63
    FLOW_PAUSED = 64
    DELETE_PRODUCER = 66
    DELETE_PRODUCER_REPLY = 67
    CREATE_SESSION = 68
    CREATE_SESSION_REPLY = 69
    DESTROY_SESSION = 70
    DESTROY_SESSION_REPLY = 71
    INFO_REQUEST = 72
    INFO = 73
    DEBUG = 74
    GET_LICENSE = 76
    GET_LICENSE_REPLY = 77
    VERIFY_TRANSACTION = 78
    VERIFY_TRANSACTION_REPLY = 79

    # Alias used by the 4.1 document for BROWSE_REPLY.
    MESSAGE_SET = 27


MESSAGE_TYPES = frozenset(range(1, 7))
# The six JMS message kinds by packet type, as the admin tools name them.
MESSAGE_KIND_NAMES: dict[int, str] = {
    PacketType.TEXT_MESSAGE: "text",
    PacketType.BYTES_MESSAGE: "bytes",
    PacketType.MAP_MESSAGE: "map",
    PacketType.STREAM_MESSAGE: "stream",
    PacketType.OBJECT_MESSAGE: "object",
    PacketType.MESSAGE: "message",
}
# Value 80 ("LAST") is an upper bound in the Java code, never a packet.
PACKET_TYPE_LIMIT = 80

_NAMES = {int(t): t.name for t in PacketType if t.name != "MESSAGE_SET"}


def packet_type_name(ptype: int) -> str:
    """The name OpenMQ uses for a packet type, or ``UNKNOWN(<n>)``."""
    return _NAMES.get(ptype, f"UNKNOWN({ptype})")


def reply_type(ptype: int) -> int:
    """The reply a request of this type gets: SEND_REPLY for messages, else type + 1."""
    if ptype in MESSAGE_TYPES:
        return PacketType.SEND_REPLY
    return ptype + 1


def is_reply(ptype: int) -> bool:
    """Odd types from 9 up are replies, and so is AUTHENTICATE_REQUEST (as Packet.isReply says)."""
    return (ptype >= 9 and ptype % 2 == 1) or ptype == PacketType.AUTHENTICATE_REQUEST


class Status(IntEnum):
    """``JMQStatus`` values (HTTP-like)."""

    OK = 200
    CREATED = 201
    ACCEPTED = 202
    MULTIPLE_CHOICES = 300
    MOVED_PERMANENTLY = 301
    MOVED_TEMPORARILY = 302
    SEE_OTHER = 303
    NOT_MODIFIED = 304
    BAD_REQUEST = 400
    UNAUTHORIZED = 401
    PAYMENT_REQUIRED = 402
    FORBIDDEN = 403
    NOT_FOUND = 404
    NOT_ALLOWED = 405
    NOT_ACCEPTABLE = 406
    PROXY_AUTH_REQUIRED = 407
    TIMEOUT = 408
    CONFLICT = 409
    GONE = 410
    LENGTH_REQUIRED = 411
    PRECONDITION_FAILED = 412
    INVALID_LOGIN = 413
    RESOURCE_FULL = 414
    UNSUPPORTED_TYPE = 415
    EXPECTATION_FAILED = 417
    ENTITY_TOO_LARGE = 423
    RETRY = 449
    ERROR = 500
    NOT_IMPLEMENTED = 501
    UNAVAILABLE = 503
    BAD_VERSION = 505


# The fixed header's bit flags (offset 62), plain ints for the hot path (IntFlag
# arithmetic is slow).  The others are unused: S 0x0008 (selectors processed),
# T 0x0080 (transacted), B 0x0200, W 0x1000 (wildcard).
FLAG_Q = 0x0001  # destination is a queue
FLAG_R = 0x0002  # redelivered
FLAG_P = 0x0004  # persistent
FLAG_A = 0x0010  # reply wanted
FLAG_L = 0x0020  # last message of a batch
FLAG_F = 0x0040  # connection flow paused
FLAG_C = 0x0100  # consumer / producer flow paused
FLAG_Z = 0x0400  # body is zlib-compressed
FLAG_I = 0x0800  # idempotent resend


class DestType(IntFlag):
    """``JMQDestType`` bits."""

    QUEUE = 0x0001
    TOPIC = 0x0002
    TEMP = 0x0010
    AUTO = 0x0020
    INTERNAL = 0x0040
    ADMIN = 0x0080
    # Legacy "flavor" bits (FLAVOURS below).
    FLAVOR_SINGLE = 0x0100
    FLAVOR_RROBIN = 0x0200
    FLAVOR_FAILOVER = 0x0400
    DMQ = 0x1000
    LOCAL = 0x2000


DEST_QUEUE = 0x0001
DEST_TOPIC = 0x0002
DEST_TEMP = 0x0010
DEST_DMQ = 0x1000
# The delivery-policy flavour bits a client may add to JMQDestType (none of the stock
# clients does); OpenMQ's broker keeps and reports them, and so do we, but neither acts
# on them: a queue's delivery policy is its attributes'.
FLAVOURS = int(DestType.FLAVOR_SINGLE | DestType.FLAVOR_RROBIN | DestType.FLAVOR_FAILOVER)

# Destination names the protocol fixes.  A temporary destination's name starts with
# TEMP_PREFIX (``temporary_destination://queue/<owner>/<port>/<n>``, as OpenMQ's client
# makes them); the broker's own destinations start with BROKER_PREFIX (``__JMQAdmin``,
# broker/protocol/admin_types.py's ADMIN_QUEUE) and the dead message queue is DMQ_NAME.
TEMP_PREFIX = "temporary_destination://"
TEMP_QUEUE_PREFIX = TEMP_PREFIX + "queue/"
TEMP_TOPIC_PREFIX = TEMP_PREFIX + "topic/"
BROKER_PREFIX = "__JMQ"
DMQ_NAME = "mq.sys.dmq"

# The Java classes a destination header names (JMQDestinationClass, JMQReplyToClass), as
# OpenMQ's client sends them.
QUEUE_CLASS = "com.sun.messaging.BasicQueue"
TOPIC_CLASS = "com.sun.messaging.BasicTopic"
TEMP_QUEUE_CLASS = "com.sun.messaging.jmq.jmsclient.TemporaryQueueImpl"
TEMP_TOPIC_CLASS = "com.sun.messaging.jmq.jmsclient.TemporaryTopicImpl"

# The OpenMQ release whose wire and admin protocol we follow (the vectors' imqcmd 6.9.0):
# the version the broker reports to clients and admin tools, and the Python client to
# the broker.
OPENMQ_VERSION = "6.9.0"


class AckMode(IntEnum):
    """``JMQAckMode`` on CREATE_SESSION."""

    NONE = 0  # also transacted
    AUTO_ACKNOWLEDGE = 1
    CLIENT_ACKNOWLEDGE = 2
    DUPS_OK_ACKNOWLEDGE = 3
    NO_ACKNOWLEDGE = 32768


class BodyType(IntEnum):
    """``JMQBodyType`` values for control packets."""

    NONE = 0
    CONSUMERID_I_SYSMESSAGEID = 1
    CONSUMERID_L_SYSMESSAGEID = 2
    SYSMESSAGEID = 3
    SESSIONID_SYSMESSAGEID = 4


class AckType(IntEnum):
    """``JMQAckType`` on ACKNOWLEDGE."""

    ACKNOWLEDGE = 0
    UNDELIVERABLE = 1
    DEAD = 2


class GoodbyeReason(IntEnum):
    """``JMQGoodbyeReason`` on a broker-initiated GOODBYE."""

    SHUTDOWN_BKR = 1
    RESTART_BKR = 2
    ADMIN_KILLED_CON = 3
    CON_FATAL_ERROR = 4
    CLIENT_CLOSED = 5
    OTHER = 6
    BKR_IN_TAKEOVER = 7
    REMOTE_BKR_RESTART = 8
    MSG_HOME_CHANGE = 9
    MIGRATE_PARTITION = 10


class XAFlag(IntFlag):
    """Standard JTA XAResource flags (``JMQXAFlags``)."""

    TMNOFLAGS = 0
    TMJOIN = 0x00200000
    TMENDRSCAN = 0x00800000
    TMSTARTRSCAN = 0x01000000
    TMSUSPEND = 0x02000000
    TMSUCCESS = 0x04000000
    TMRESUME = 0x08000000
    TMFAIL = 0x20000000
    TMONEPHASE = 0x40000000


class TransactionState(IntEnum):
    """Broker transaction states as the code numbers them."""

    NULL = -1
    CREATED = 0
    STARTED = 1
    FAILED = 2
    INCOMPLETE = 3
    COMPLETE = 4
    PREPARED = 5
    COMMITTED = 6
    ROLLEDBACK = 7
    TIMED_OUT = 8


class AutoRollback(IntEnum):
    """``JMQAutoRollback``."""

    ALL = 1
    NOT_PREPARED = 2
    NEVER = 3


class LimitBehavior(IntEnum):
    """Destination limitBehavior."""

    FLOW_CONTROL = 0
    REMOVE_OLDEST = 1
    REJECT_NEWEST = 2
    REMOVE_LOW_PRIORITY = 3


class DestState(IntEnum):
    """Destination state (``JMQDestState``; OpenMQ's DestState also has UNKNOWN = -1, which
    a pause request may not name)."""

    RUNNING = 0
    CONSUMERS_PAUSED = 1
    PRODUCERS_PAUSED = 2
    PAUSED = 3


DEST_STATE_UNKNOWN = -1


class ServiceState(IntEnum):
    """A connection service's state in the admin protocol's ServiceInfo."""

    UNINITIALIZED = 0
    INITIALIZED = 1
    STARTED = 2
    RUNNING = 3
    PAUSED = 4
    SHUTTINGDOWN = 5
    STOPPED = 6
    DESTROYED = 7
    QUIESCED = 8
