"""The bridge admin protocol (OpenMQ's ``imqbridgemgr``), without I/O.

``imqbridgemgr`` opens an admin connection as imqcmd does and sends a HELLO
(``JMQMessageType`` 28) to the queue ``__JMQBridgeAdmin``; the HELLO_REPLY (29) names, in
its JMSReplyTo, a temporary queue of the broker's bridge service, and every later
command (LIST 18, PAUSE 20, RESUME 22, START 24, STOP 26, DEBUG 16) goes there, each
with ``JMQBridgeName`` / ``JMQBridgeType`` / ``JMQLinkName`` as the command line gave
them.  Each reply carries ``JMQMessageType`` n + 1, ``JMQStatus`` and, on a refusal,
``JMQErrorString``; a LIST of all bridges carries a serialised
``ArrayList<BridgeCmdSharedReplyData>`` (a ``MultiColumnPrinter`` table the tool prints).

:func:`answer` decides a command's reply from the bridges' states, as the stock broker's
``bridge.admin.handlers.*``, ``BridgeServiceManagerImpl`` and ``StompBridge`` do for a
STOMP bridge (the statuses and messages are theirs, checked against the stock broker in
tests/interop/test_bridgemgr.py); the caller carries out the start or stop it asks
for.  Our broker's only bridge is the STOMP one (docs/reference/stomp.md).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .admin_types import BRIDGE_ADMIN_QUEUE
from .errors import ProtocolError
from .javaser import (
    SC_SERIALIZABLE,
    SC_WRITE_METHOD,
    JavaArray,
    JavaClass,
    JavaObject,
    JBlock,
    ObjectStreamWriter,
)
from .jtypes import JInt
from .names import (
    JMQ_ASYNC_STARTED,
    JMQ_BRIDGE_NAME,
    JMQ_BRIDGE_TYPE,
    JMQ_COMMAND_ARG,
    JMQ_DEBUG,
    JMQ_ERROR_STRING,
    JMQ_LINK_NAME,
    JMQ_LOCALE_COUNTRY,
    JMQ_LOCALE_LANGUAGE,
    JMQ_LOCALE_VARIANT,
    JMQ_MESSAGE_TYPE,
    JMQ_STATUS,
    JMQ_TARGET,
)

# JMQMessageType (bridge/admin/util/AdminMessageType.Type); a reply is n + 1.
DEBUG = 16
LIST = 18
PAUSE = 20
RESUME = 22
START = 24
STOP = 26
HELLO = 28
LAST = 30
COMMANDS = {DEBUG: "debug", LIST: "list", PAUSE: "pause", RESUME: "resume", START: "start"}
COMMANDS[STOP] = "stop"

# Properties (AdminMessageType.PropName).
BRIDGE_NAME = JMQ_BRIDGE_NAME
BRIDGE_TYPE = JMQ_BRIDGE_TYPE
LINK_NAME = JMQ_LINK_NAME
CMD_ARG = JMQ_COMMAND_ARG
TARGET = JMQ_TARGET
DEBUG_MODE = JMQ_DEBUG
ASYNC_STARTED = JMQ_ASYNC_STARTED
LOCALE_LANG = JMQ_LOCALE_LANGUAGE
LOCALE_COUNTRY = JMQ_LOCALE_COUNTRY
LOCALE_VARIANT = JMQ_LOCALE_VARIANT

JMS_TYPE = "JMS"
STOMP_TYPE = "STOMP"
STARTED = "STARTED"
STOPPED = "STOPPED"

OK = 200
ERROR = 500
NOT_IMPLEMENTED = 501
UNAVAILABLE = 503

# The stock broker's texts (BridgeManagerResources, StompBridgeResources, BrokerResources),
# with their codes, as its replies carry them.
NOT_ENABLED = "[B2214]: Bridge service is not enabled"
NAME_NOT_FOUND = "[BB4006]: Bridge name {0} not found"
TYPE_MISMATCH = "[BB4007]: Bridge {0} has type {1}, not type {2}"
INVALID_TYPE = "Invalid bridge type {0}"
PAUSE_NO_TYPE = "[BB4008]: Bridge type must be specified to pause a bridge  "
RESUME_NO_TYPE = "[BB4009]: Bridge type must be specified to resume a bridge  "
INVALID_NAME = "[BB3009]: Invalid bridge name {0}"
INVALID_LINK = "[BB3010]: Invalid link name {0}"
NO_BRIDGE_NAME = "[BB3011]: Bridge name is not specified"
UNEXPECTED_TYPE = "[BB4013]: Unexpected bridge admin message type {0}"
DEBUG_NO_ARG = "[BB4014]: debug argument not specified"
DEBUG_BAD_ARG = "[BB4015]: Unsupported debug argument {0} "
DEBUG_NO_NAME = "[BB4016]: debug {0} name not specified"
LINK_NOT_SUPPORTED = "[BB4017]: Link name is not supported for bridge admin message {0}"
STOMP_NO_SUPPORT = "[BSS4000]: Operation {0} is not supported by {1} type bridge"

_NAMES = {0: "NULL", DEBUG: "DEBUG", DEBUG + 1: "DEBUG_REPLY", LIST: "LIST"}
_NAMES.update({LIST + 1: "LIST_REPLY", PAUSE: "PAUSE", PAUSE + 1: "PAUSE_REPLY"})
_NAMES.update({RESUME: "RESUME", RESUME + 1: "RESUME_REPLY", START: "START"})
_NAMES.update({START + 1: "START_REPLY", STOP: "STOP", STOP + 1: "STOP_REPLY"})
_NAMES.update({HELLO: "HELLO", HELLO + 1: "HELLO_REPLY"})


def type_name(msg_type: int) -> str:
    """AdminMessageType.getString: ``LIST(18)``, ``INVALID_TYPE(99)``."""
    if msg_type < 0 or msg_type >= LAST:
        return f"INVALID_TYPE({msg_type})"
    return f"{_NAMES.get(msg_type, 'TBD')}({msg_type})"


@dataclass
class BridgeView:
    """One bridge as the commands see it."""

    name: str
    type: str
    state: str  # STARTED or STOPPED


@dataclass
class Answer:
    """A command's reply, and what the caller must do before sending it: ``start`` and
    ``stop`` name the bridges to start or stop (in order)."""

    status: int = OK
    error: str | None = None
    reply_type: int | None = None  # None: the reply carries no JMQMessageType
    body: bytes = b""
    start: list[str] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)

    def properties(self) -> dict[str, object]:
        props: dict[str, object] = {JMQ_STATUS: JInt(self.status)}
        if self.reply_type is not None:
            props[JMQ_MESSAGE_TYPE] = JInt(self.reply_type)
        if self.error is not None:
            props[JMQ_ERROR_STRING] = self.error
        return props


class Refused(ProtocolError):
    """A request the bridge service refuses: the reply's status and error string (a
    ProtocolError, as every error broker/protocol raises)."""

    def __init__(self, error: str, status: int = ERROR) -> None:
        super().__init__(error)
        self.status = status
        self.error = error


def _text(props: dict, name: str) -> str | None:
    value = props.get(name)
    return None if value is None else str(value).strip()


__all__ = ["BRIDGE_ADMIN_QUEUE", "Answer", "BridgeView", "answer", "list_body"]


def answer(msg_type: object, props: dict, bridges: list[BridgeView]) -> Answer:
    """The reply to one command sent to the bridge service's queue (not HELLO, which the
    broker answers on ``__JMQBridgeAdmin``)."""
    if not isinstance(msg_type, int) or isinstance(msg_type, bool):
        return Answer(ERROR, f"bridge admin message without {'JMQMessageType'}")
    if msg_type < 0 or msg_type >= LAST:
        return Answer(ERROR, UNEXPECTED_TYPE.format(type_name(msg_type)))
    if msg_type not in COMMANDS and msg_type != HELLO:
        return Answer(ERROR, f"No bridge admin handler for message type {type_name(msg_type)}")
    out = Answer(reply_type=msg_type + 1)
    try:
        if msg_type == HELLO:
            raise Refused(f"Internal Error: unexpected call {type_name(msg_type)}")
        if msg_type == DEBUG:
            _debug(props)
        else:
            _command(msg_type, props, {b.name: b for b in bridges}, out)
    except Refused as exc:
        out.status, out.error = exc.status, exc.error
        out.body, out.start, out.stop = b"", [], []
    return out


def _debug(props: dict) -> None:
    arg, target = props.get(CMD_ARG), _text(props, TARGET)
    if arg is None:
        raise Refused(DEBUG_NO_ARG)
    if str(arg).strip() != "fault":
        raise Refused(DEBUG_BAD_ARG.format(arg))
    if not target:
        raise Refused(DEBUG_NO_NAME.format(arg))
    # The stock broker's fault injection (a test hook of its JMS bridge) has no
    # counterpart here.
    raise Refused("fault injection is not supported by this broker", NOT_IMPLEMENTED)


def _command(msg_type: int, props: dict, bridges: dict[str, BridgeView], out: Answer) -> None:
    bname, lname = _text(props, BRIDGE_NAME), _text(props, LINK_NAME)
    btype = _text(props, BRIDGE_TYPE)
    btype = btype.upper() if btype is not None else None
    if bname is not None and lname is not None:
        if not bname:
            raise Refused(INVALID_NAME.format(bname))
        if not lname:
            raise Refused(INVALID_LINK.format(lname))
        args: list[str] | None = ["-ln", lname]
    else:
        if lname is not None:
            if msg_type == LIST:
                raise Refused(NO_BRIDGE_NAME)
            raise Refused(LINK_NOT_SUPPORTED.format(_describe(props)))
        if bname is not None and not bname:
            # StopHandler's own text (no code), the others' BB3009.
            raise Refused(
                f"Invalid bridge name: {bname}" if msg_type == STOP else INVALID_NAME.format(bname)
            )
        args = None
    if btype is not None and btype not in (JMS_TYPE, STOMP_TYPE):
        # listBridge uses getString (no code), the others getKString.
        raise Refused(INVALID_TYPE.format(btype) if msg_type == LIST else _coded(btype))
    if msg_type == LIST:
        if bname is None:
            out.body = list_body([b for b in bridges.values() if btype in (None, b.type)])
            return
        if bname not in bridges:
            raise Refused(NAME_NOT_FOUND.format(bname))
        raise Refused(STOMP_NO_SUPPORT.format("list", bridges[bname].type))
    if msg_type in (PAUSE, RESUME) and bname is None and btype is None:
        raise Refused(PAUSE_NO_TYPE if msg_type == PAUSE else RESUME_NO_TYPE)
    if bname is not None:
        b = bridges.get(bname)
        if b is None:
            raise Refused(NAME_NOT_FOUND.format(bname))
        if btype is not None and btype != b.type:
            raise Refused(TYPE_MISMATCH.format(bname, b.type, btype))
        chosen = [b]
    else:
        chosen = [b for b in bridges.values() if btype in (None, b.type)]
    for b in chosen:
        _one(msg_type, b, args, out)


def _coded(btype: str) -> str:
    return "[BB4005]: " + INVALID_TYPE.format(btype)


def _one(msg_type: int, b: BridgeView, args: list[str] | None, out: Answer) -> None:
    """What the STOMP bridge does with one command (StompBridge)."""
    if msg_type == START:
        # A link name is ignored (logged by the stock broker): the bridge starts.
        if b.state != STARTED:
            out.start.append(b.name)
    elif msg_type == STOP:
        if args is not None:
            raise Refused(STOMP_NO_SUPPORT.format(f"stop(.., {' '.join(args)} )", b.type))
        if b.state != STOPPED:
            out.stop.append(b.name)
    elif msg_type == PAUSE:
        raise Refused(STOMP_NO_SUPPORT.format("pause", b.type))
    elif msg_type == RESUME:
        # Resuming a running bridge is a no-op; anything else is unsupported.
        if b.state == STARTED and args is None:
            return
        raise Refused(STOMP_NO_SUPPORT.format("resume", b.type))


def _describe(props: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(props.items()))


# -- the LIST reply's body ----------------------------------------------------------------

_OBJECT_ARRAY = JavaClass("[Ljava.lang.Object;", -0x6F31A760EF8CD694, ())
_STRING_ARRAY = JavaClass("[Ljava.lang.String;", -0x522DA91816E284B9, ())
_INT_ARRAY = JavaClass("[I", 0x4DBA602676EAB2A5, ())
_VECTOR = JavaClass(
    "java.util.Vector",
    -0x266882A47FC450FF,
    (
        ("I", "capacityIncrement", None),
        ("I", "elementCount", None),
        ("[", "elementData", "[Ljava/lang/Object;"),
    ),
    flags=SC_SERIALIZABLE | SC_WRITE_METHOD,
)
_PRINTER = JavaClass(
    "com.sun.messaging.jmq.util.MultiColumnPrinter",
    -0x6F35C5EB2E258008,
    (
        ("I", "numCol", None),
        ("I", "gap", None),
        ("I", "align", None),
        ("I", "titleAlign", None),
        ("L", "border", "Ljava/lang/String;"),
        ("I", "indent", None),
        ("L", "table", "Ljava/util/Vector;"),
        ("L", "titleTable", "Ljava/util/Vector;"),
        ("L", "titleSpanTable", "Ljava/util/Vector;"),
        ("[", "curLength", "[I"),
        ("Z", "sortNeeded", None),
        ("[", "keyCriteria", "[I"),
    ),
)
_REPLY_DATA = JavaClass(
    "com.sun.messaging.bridge.api.BridgeCmdSharedReplyData", 0x37C60A4ECCD8F564, (), _PRINTER
)
_ARRAY_LIST = JavaClass(
    "java.util.ArrayList",
    0x7881D21D99C7619D,
    (("I", "size", None),),
    flags=SC_SERIALIZABLE | SC_WRITE_METHOD,
)
TITLES = ("Bridge Name", "Bridge Type", "Bridge State")


def _vector(items: list[object]) -> JavaObject:
    capacity = 10  # new Vector(), doubling as elements are added
    while capacity < len(items):
        capacity *= 2
    padded = [*items, *([None] * (capacity - len(items)))]
    return JavaObject(
        _VECTOR,
        {
            "capacityIncrement": 0,
            "elementCount": len(items),
            "elementData": JavaArray(_OBJECT_ARRAY, padded),
        },
    )


def list_body(bridges: list[BridgeView]) -> bytes:
    """``ArrayList<BridgeCmdSharedReplyData>`` of one table (name, type, state), as the
    stock broker's listBridge fills it: 3 columns, a gap of 4, border ``-``."""
    rows = [JavaArray(_OBJECT_ARRAY, [b.name, b.type, b.state]) for b in bridges]
    table = JavaObject(
        _REPLY_DATA,
        {
            "numCol": 3,
            "gap": 4,
            "border": "-",
            "sortNeeded": True,
            "curLength": JavaArray(_INT_ARRAY, [JInt(0)] * 3),
            "table": _vector(list(rows)),
            "titleTable": _vector([JavaArray(_STRING_ARRAY, list(TITLES))]),
            "titleSpanTable": _vector([JavaArray(_INT_ARRAY, [JInt(1)] * 3)]),
        },
    )
    out = JavaObject(
        _ARRAY_LIST,
        {"size": 1},
        custom={_ARRAY_LIST.name: [JBlock(struct.pack(">i", 1)), table]},
    )
    writer = ObjectStreamWriter()
    writer.value(out)
    return bytes(writer.out)
