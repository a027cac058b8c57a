"""The ``imq.*`` broker properties: each declared once, with its name, type and default.

A call site reads a property through its declaration, typed and with the declared
default: ``config.get(props.EXPIRATION_INTERVAL)`` is an ``int``.  Defaults are written
as OpenMQ's ``default.properties`` writes them (text: ``"70m"``, ``"true"``).
``listed`` properties are the ones OpenMQ's shipped ``default.properties`` lists: they
make up :data:`broker.config.DEFAULTS` (what ``imqcmd query bkr`` and the broker's
property listing show); the others have a default only in the code that reads them, as
in OpenMQ.  Per-service properties (``imq.<service>.*``) are :class:`ServiceProp`
patterns.

:data:`REPORTED` names the properties a broker reports about itself (its admin
service's property listing) and never reads from its configuration.

Every property a stock ``config.properties`` may carry has a status here (checked against
OpenMQ's own ``default.properties`` by tests/test_props_inventory.py): honoured (the
default), honoured differently (:meth:`Prop.differs` says how), or not supported
(:class:`Ignored`, saying why).  Whole families (per JDBC vendor, per service) are
:class:`Family` patterns.  :func:`classify` finds a name's declaration; the broker warns at
start about what it does not honour (broker/propcheck.py).

No Django import: the broker runtime, tests and tools use this directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, Self, TypeVar

if TYPE_CHECKING:
    from broker.config import BrokerConfig

T = TypeVar("T")

# OpenMQ's SizeString: an optionally signed decimal int, then b (bytes), k (KiB) or m (MiB),
# either case; no g ("10g" is written "10240m").
_SIZE = re.compile(r"([+-]?\d+)([bkm]?)", re.IGNORECASE)
_COUNT = re.compile(r"[+-]?\d+")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 * 1024}
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UNLIMITED = -1


def parse_size(value: object, name: str = "size") -> int:
    """Bytes from an OpenMQ SizeString (``100``, ``100b``, ``512k``, ``10m``, upper case
    too) or an int; a negative value means unlimited and comes back as ``-1``.  ValueError
    saying what is wrong otherwise.  The one size parser: broker properties, destination
    attributes from imqcmd, the portal and the REST API."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a size in bytes, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        m = _SIZE.fullmatch(str(value).strip())
        if not m:
            raise ValueError(
                f"{name}: {value!r} is not a size (bytes, or a number with b, k or m: "
                "100b, 512k, 10m; -1 for no limit)"
            )
        number = int(m.group(1))
        if number > INT32_MAX or number < -INT32_MAX - 1:
            # OpenMQ reads the number part as a Java int.
            raise ValueError(f"{name}: {value!r} is too large (write 10240m, not 10g)")
        number *= _SIZE_UNITS[m.group(2).lower()]
    if number < 0:
        return UNLIMITED
    if number > INT64_MAX:
        raise ValueError(f"{name}: {value!r} is too large")
    return number


def parse_count(value: object, name: str = "count") -> int:
    """A count from a decimal integer (text or int); negative values mean unlimited and come
    back as ``-1``.  ValueError otherwise (units are for sizes only, as in OpenMQ)."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _COUNT.fullmatch(value.strip()):
        number = int(value)
    else:
        raise ValueError(f"{name}: {value!r} is not an integer (-1 for no limit)")
    if number < 0:
        return UNLIMITED
    if number > INT64_MAX:
        raise ValueError(f"{name}: {value!r} is too large")
    return number


_DECLARED: dict[str, Prop] = {}


HONOURED = "honoured"
DIFFERS = "honoured differently"
IGNORED = "not supported"


class Prop(Generic[T]):
    """One property: its name, its default as OpenMQ writes it, and how to read it."""

    __slots__ = ("default", "how", "listed", "name")

    def __init__(self, name: str, default: str | None, *, listed: bool = True) -> None:
        if name in _DECLARED:
            raise ValueError(f"{name} is declared twice")
        self.name = name
        self.default = default
        self.listed = listed and default is not None
        # Set by differs(): how this broker's reading differs from OpenMQ's.
        self.how = ""
        _DECLARED[name] = self

    def read(self, config: BrokerConfig) -> T:
        raise NotImplementedError

    def differs(self, how: str) -> Self:
        """Marks the property honoured differently from OpenMQ, saying how (the
        properties reference lists it)."""
        self.how = how
        return self

    @property
    def status(self) -> str:
        """HONOURED, DIFFERS or IGNORED."""
        return DIFFERS if self.how else HONOURED

    @property
    def why(self) -> str:
        return self.how

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.default!r})"


class Text(Prop[str]):
    """A string (``${...}`` expanded); an empty value counts as unset (the default)."""

    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> str:
        return config.get(self.name) or self.default or ""


class OptionalText(Prop[str | None]):
    """A string without a default: None when unset or empty."""

    def __init__(self, name: str) -> None:
        super().__init__(name, None)

    def read(self, config: BrokerConfig) -> str | None:
        return config.get(self.name) or None


class Int(Prop[int]):
    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> int:
        return config.get_int(self.name, int(self.default or 0))


class Seconds(Prop[float]):
    """A duration in seconds, fractions allowed (``0.5``): ours, where a test or a fast
    failover wants less than a second; a whole number reads as it always did."""

    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> float:
        return config.get_seconds(self.name, float(self.default or 0))


class Bool(Prop[bool]):
    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> bool:
        return config.get_bool(self.name, (self.default or "").lower() == "true")


class OptionalBool(Prop[bool | None]):
    """A boolean whose default depends on other settings (None when unset)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, None)

    def read(self, config: BrokerConfig) -> bool | None:
        value = config.get(self.name)
        return None if value is None or not value.strip() else value.strip().lower() == "true"


class Size(Prop[int]):
    """A SizeString in bytes (-1: unlimited)."""

    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> int:
        return config.get_size(self.name, parse_size(self.default or "-1", self.name))


class Limit(Prop[int]):
    """A count or (``size=True``) a SizeString that limits something, read as OpenMQ's
    broker reads it: negative values mean no limit and come back as -1.  ``zero`` says
    what 0 means: ``"unlimited"`` (message and destination sizes and counts), ``"refused"``
    (a limit OpenMQ refuses to start with at 0: producers, active consumers) or ``"zero"``."""

    __slots__ = ("size", "zero")

    def __init__(
        self, name: str, default: str, *, size: bool = False, zero: str, listed: bool = True
    ) -> None:
        super().__init__(name, default, listed=listed)
        self.size = size
        self.zero = zero

    def read(self, config: BrokerConfig) -> int:
        default = (parse_size if self.size else parse_count)(self.default or "-1", self.name)
        return config.get_limit(self.name, default, size=self.size, zero=self.zero)


class Ignored(Prop[str]):
    """A stock property this broker does not read: setting it changes nothing, and the
    broker says so once at start with ``why``.  Listed (``imqcmd query bkr``) only where
    it was before; its value reads as text."""

    __slots__ = ("reason",)

    def __init__(self, name: str, default: str | None, why: str, *, listed: bool = False) -> None:
        super().__init__(name, default, listed=listed)
        self.reason = why

    def read(self, config: BrokerConfig) -> str:
        return config.get(self.name) or self.default or ""

    @property
    def status(self) -> str:
        return IGNORED

    @property
    def why(self) -> str:
        return self.reason


_FAMILIES: list[Family] = []
_FAMILY_TOKENS = {
    "<service>": "(?:"
    + "|".join(["jms", "admin", "ssljms", "ssladmin", "httpjms", "httpsjms", "wsjms", "wssjms"])
    + ")",
    "<proto>": "(?:tcp|tls|http|https|ws|wss)",
    "<any>": "[^.]+",
    "*": ".+",
}


class Family:
    """Properties named by a pattern (``imq.persist.jdbc.<any>.*``, ``imq.<service>.
    min_threads``): ``<service>`` a service this broker runs, ``<proto>`` a protocol,
    ``<any>`` one name part, ``*`` the rest.  A declared :class:`Prop` wins over a
    family; the first family declared that matches wins over later ones."""

    __slots__ = ("pattern", "prefix", "regex", "status", "why")

    def __init__(self, pattern: str, status: str = HONOURED, why: str = "") -> None:
        if status != HONOURED and not why:
            raise ValueError(f"{pattern}: say why it is {status}")
        self.pattern = pattern
        self.status = status
        self.why = why
        parts = re.split(r"(<service>|<proto>|<any>|\*)", pattern)
        self.prefix = parts[0]
        self.regex = re.compile(
            "".join(_FAMILY_TOKENS.get(part, re.escape(part)) for part in parts)
        )
        _FAMILIES.append(self)

    def matches(self, name: str) -> bool:
        return self.regex.fullmatch(name) is not None

    def __repr__(self) -> str:
        return f"Family({self.pattern!r}, {self.status!r})"


class List(Prop[list[str]]):
    """A comma-separated list of trimmed, non-empty items."""

    def __init__(self, name: str, default: str, *, listed: bool = True) -> None:
        super().__init__(name, default, listed=listed)

    def read(self, config: BrokerConfig) -> list[str]:
        return config.get_list(self.name, [i.strip() for i in (self.default or "").split(",")])


_INSTANCE_DIR = "${imq.instanceshome}${/}${imq.instancename}"
DEFAULT_INSTANCE = "imqbroker"

# --- instance layout (computed values are set by BrokerConfig itself)
INSTANCE_NAME = Text("imq.instancename", DEFAULT_INSTANCE)
VARHOME = OptionalText("imq.varhome")
INSTANCES_HOME = OptionalText("imq.instanceshome")
# The Java broker points this at the installation's etc; a Python install has none, so it
# is the instance's etc directory.
ETCHOME = Text("imq.etchome", _INSTANCE_DIR + "${/}etc").differs(
    "the instance's etc directory (a Python install has no installation etc); read where "
    "other properties refer to ${imq.etchome}"
)
HOSTNAME = OptionalText("imq.hostname")  # unset: all interfaces
BROKER_ID = OptionalText("imq.brokerid")
JDBC_BROKER_ID = OptionalText("imq.persist.jdbc.brokerid")

# --- connection services and port mapper
SERVICE_LIST = Ignored(
    "imq.service.list",
    "jms,admin,ssljms,httpjms,httpsjms,ssladmin,wsjms,wssjms",
    "the services are built in (jms, admin, ssljms, ssladmin, httpjms, httpsjms); "
    "imq.service.activelist chooses which run",
    listed=True,
)
SERVICE_ACTIVELIST = List("imq.service.activelist", "jms,admin")
# Per service, BrokerConfig.service_prop(service, suffix) reads imq.<service>.<suffix>:
# protocoltype, servicetype, <protocol>.port / .hostname / .backlog, max_connections,
# authentication.type, authentication.<type>.user_repository, accesscontrol.enabled.
# The HTTP tunnel services (broker/server/tunnel.py): per service, the pull period told
# to clients (seconds between pulls when idle; -1: a pull always waiting) and the
# connection timeout (seconds without any request before the client is taken for gone).
# servletHost/servletPort are OpenMQ's link to its tunnel servlet, which this broker
# does not need (it serves the tunnel itself); they are listed, and not read.
TUNNEL_PROPS: dict[str, tuple[Int, Int]] = {
    "httpjms": (
        Int("imq.httpjms.http.pullPeriod", "-1"),
        Int("imq.httpjms.http.connectionTimeout", "300"),
    ),
    "httpsjms": (
        Int("imq.httpsjms.https.pullPeriod", "-1"),
        Int("imq.httpsjms.https.connectionTimeout", "300"),
    ),
}
_SERVLET = (
    "the broker serves the HTTP tunnel itself (imq.httpjms.http.port, "
    "imq.httpsjms.https.port): there is no tunnel servlet to reach"
)
TUNNEL_SERVLET_PROPS = (
    Ignored("imq.httpjms.http.servletHost", "localhost", _SERVLET, listed=True),
    Ignored("imq.httpjms.http.servletPort", "7675", _SERVLET, listed=True),
    Ignored("imq.httpsjms.https.servletHost", "localhost", _SERVLET, listed=True),
    Ignored("imq.httpsjms.https.servletPort", "7674", _SERVLET, listed=True),
)
# OpenMQ's STOMP bridge (imq.bridge.*, the stock names; docs/reference/stomp.md): the STOMP
# TCP listener runs when the bridge service is on and stomp is in its active list.
BRIDGE_ENABLED = Bool("imq.bridge.enabled", "false", listed=False)
BRIDGE_ACTIVELIST = List("imq.bridge.activelist", "", listed=False)
STOMP_TCP_ENABLED = Bool("imq.bridge.stomp.tcp.enabled", "true", listed=False)
STOMP_TCP_PORT = Int("imq.bridge.stomp.tcp.port", "7672", listed=False)
# JMX over RMI (docs/reference/jmx.md): the stock names and, as the stock broker, jmxrmi
# on by default (empty: no JMX).
JMX_CONNECTOR_ACTIVELIST = List("imq.jmx.connector.activelist", "jmxrmi", listed=False)
JMX_HOSTNAME = OptionalText("imq.jmx.hostname")  # unset: imq.hostname, then all interfaces
JMX_RMI_PORT = Int("imq.jmx.connector.jmxrmi.port", "0", listed=False)
JMX_SSL_PORT = Int("imq.jmx.connector.ssljmxrmi.port", "0", listed=False)
# An RMI registry in the broker process, and the service URLs naming it (the stock form
# service:jmx:rmi://HOST/jndi/rmi://HOST:PORT/BROKERHOST/PORTMAPPERPORT/CONNECTOR).
JMX_REGISTRY_START = Bool("imq.jmx.rmiregistry.start", "false", listed=False)
JMX_REGISTRY_USE = Bool("imq.jmx.rmiregistry.use", "false", listed=False)
JMX_REGISTRY_PORT = Int("imq.jmx.rmiregistry.port", "1099", listed=False)
# The TLS listener (off by default, as OpenMQ's), with the broker's key material (security/tls.py).
STOMP_TLS_ENABLED = Bool("imq.bridge.stomp.tls.enabled", "false", listed=False)
STOMP_TLS_PORT = Int("imq.bridge.stomp.tls.port", "7673", listed=False)
# Ours (the stock bridge answers heart-beat:0,0 and has no such limits): what CONNECTED
# offers (ms, 0 = none), the frame limits, and the deliveries in flight per subscription.
STOMP_HEARTBEAT_SEND = Int("imq.bridge.stomp.heartbeat.send", "10000", listed=False)
STOMP_HEARTBEAT_RECEIVE = Int("imq.bridge.stomp.heartbeat.receive", "10000", listed=False)
STOMP_MAX_FRAME = Size("imq.bridge.stomp.frame.max_size", "70m", listed=False)
STOMP_MAX_HEADERS = Int("imq.bridge.stomp.frame.max_headers", "1000", listed=False)
STOMP_MAX_HEADER_LINE = Size("imq.bridge.stomp.frame.max_header_size", "64k", listed=False)
STOMP_PREFETCH = Int("imq.bridge.stomp.consumer.prefetch", "1000", listed=False)

PORTMAPPER_PORT = Int("imq.portmapper.port", "7676")
PORTMAPPER_HOSTNAME = OptionalText("imq.portmapper.hostname")  # unset: imq.hostname
PORTMAPPER_BACKLOG = Int("imq.portmapper.backlog", "50")
PORTMAPPER_SOTIMEOUT = Int("imq.portmapper.sotimeout", "500")  # milliseconds
PORTMAPPER_BIND = Bool("imq.portmapper.bind", "true")
PORTMAPPER_SOLINGER = Ignored(
    "imq.portmapper.solinger",
    "-1",
    "the port mapper closes its sockets without SO_LINGER",
    listed=True,
)
PORTUNIF_ENABLED = Ignored(
    "imq.portunif.enabled",
    "false",
    "port unification is not supported: each service has a port of its own",
    listed=True,
)
PING_ENABLED = Bool("imq.ping.enabled", "true")
PING_INTERVAL = Int("imq.ping.interval", "120")
PING_REPLY_ENABLE = Bool("imq.ping.reply.enable", "true")
PING_CLOSE_INTERVAL = Int("imq.ping.close.interval", "5")
AUTH_RESPONSE_TIMEOUT = Int("imq.authentication.client.response.timeout", "180")

# --- destinations and auto-creation
AUTOCREATE_QUEUE = Bool("imq.autocreate.queue", "true")
AUTOCREATE_TOPIC = Bool("imq.autocreate.topic", "true")
AUTOCREATE_REAPTIME = Int("imq.autocreate.reaptime", "120")
# Counts and sizes: Limit (0 means what OpenMQ's broker makes of it, negative no limit).
AUTOCREATE_QUEUE_MAX_ACTIVE = Limit(
    "imq.autocreate.queue.maxNumActiveConsumers", "-1", zero="refused"
)
AUTOCREATE_QUEUE_MAX_BACKUP = Limit("imq.autocreate.queue.maxNumBackupConsumers", "0", zero="zero")
AUTOCREATE_QUEUE_FLOW_LIMIT = Limit("imq.autocreate.queue.consumerFlowLimit", "1000", zero="zero")
AUTOCREATE_TOPIC_FLOW_LIMIT = Limit("imq.autocreate.topic.consumerFlowLimit", "1000", zero="zero")
AUTOCREATE_QUEUE_LOCAL_PREFERRED = Bool("imq.autocreate.queue.localDeliveryPreferred", "false")
AUTOCREATE_TOPIC_MAX_SHARED = Limit("imq.autocreate.topic.maxNumSharedConsumers", "-1", zero="zero")
AUTOCREATE_TOPIC_SHARED_FLOW_LIMIT = Limit(
    "imq.autocreate.topic.sharedConsumerFlowLimit", "5", zero="zero"
)
# The attributes of auto-created destinations (imq.autocreate.destination.<attribute>).
_AUTO = "imq.autocreate.destination."
AUTOCREATE_DEST_ATTRIBUTES: dict[str, Prop] = {
    "maxNumMsgs": Limit(_AUTO + "maxNumMsgs", "100000", zero="unlimited"),
    "maxTotalMsgBytes": Limit(_AUTO + "maxTotalMsgBytes", "10240m", size=True, zero="unlimited"),
    "maxBytesPerMsg": Limit(_AUTO + "maxBytesPerMsg", "10m", size=True, zero="unlimited"),
    "maxNumProducers": Limit(_AUTO + "maxNumProducers", "100", zero="refused"),
    "limitBehavior": Text(_AUTO + "limitBehavior", "REJECT_NEWEST"),
    "useDMQ": Bool(_AUTO + "useDMQ", "true"),
    "isLocalOnly": Bool(_AUTO + "isLocalOnly", "false"),
    # Ours: OpenMQ has no broker-side redelivery limit; unset (or -1) = unlimited.
    "maxDeliveryCount": Limit(_AUTO + "maxDeliveryCount", "-1", zero="refused", listed=False),
}
AUTOCREATE_USE_DMQ = AUTOCREATE_DEST_ATTRIBUTES["useDMQ"]
QUEUE_DELIVERY_POLICY = OptionalText("imq.queue.deliverypolicy").differs(
    "single, failover or round-robin for auto-created queues (MQ 3.0's name; the stock "
    "6.9 broker ignores it)"
)
PRODUCER_MAX_BATCH = Int("imq.producer.maxBatch", "1000")
EXPIRE_DELIVERED = Ignored(
    "imq.destination.expireDeliveredMessages",
    "false",
    "no switch for expiring messages already delivered and not yet acknowledged: the "
    "expiry sweep's own rules apply",
    listed=True,
)
PURGE_DELIVERED = Ignored(
    "imq.destination.purgeDeliveredMessages",
    "false",
    "no switch for purging messages already delivered and not yet acknowledged: a "
    "purge's own rules apply",
    listed=True,
)
DROP_LOG_INTERVAL = Int("imq.destination.limit.log.interval", "30", listed=False)  # ours

# --- dead message queue
DMQ_TRUNCATE_BODY = Bool("imq.destination.DMQ.truncateBody", "false")
LOG_DEAD_MSGS = Bool("imq.destination.logDeadMsgs", "false")

# --- messages, memory, transactions
EXPIRATION_INTERVAL = Int("imq.message.expiration.interval", "60")
# 0 means no limit, as on OpenMQ's broker (its 3.0 guide says so; -1 since).
SYSTEM_MAX_COUNT = Limit("imq.system.max_count", "-1", zero="unlimited")
SYSTEM_MAX_SIZE = Limit("imq.system.max_size", "-1", size=True, zero="unlimited")
MESSAGE_MAX_SIZE = Limit("imq.message.max_size", "70m", size=True, zero="unlimited")
MEMORY_LEVELS = Ignored(
    "imq.memory.levels",
    "green,yellow,orange,red",
    "the four memory states green, yellow, orange and red are fixed "
    "(imq.<state>.threshold and imq.<state>.count are read)",
    listed=True,
)
MEMORY_THRESHOLDS = {
    "green": Int("imq.green.threshold", "0"),
    "yellow": Int("imq.yellow.threshold", "80"),
    "orange": Int("imq.orange.threshold", "90"),
    "red": Int("imq.red.threshold", "98"),
}
MEMORY_COUNTS = {
    "green": Int("imq.green.count", "5000"),
    "yellow": Int("imq.yellow.count", "500"),
    "orange": Int("imq.orange.count", "50"),
    "red": Int("imq.red.count", "0"),
}
MEMORY_OVERHEAD = Ignored(
    "imq.memory.overhead",
    "10240",
    "the memory states are measured against imq.memory.limit, without a fixed overhead",
    listed=True,
)
MEMORY_LIMIT = Size("imq.memory.limit", "-1", listed=False)  # ours: the memory budget
# Ours (OpenMQ's broker swaps without settings): paging message bodies out of memory
# (broker/core/paging.py).  The threshold is a percent of the memory budget; the swap
# area holds what the message store cannot give back (unset: <instance>/swap).
SWAP_ENABLED = Bool("imq.swap.enabled", "true", listed=False)
SWAP_THRESHOLD = Int("imq.swap.threshold", "60", listed=False)
SWAP_DIRPATH = OptionalText("imq.swap.dirpath")
SWAP_READAHEAD = Int("imq.swap.readahead", "256", listed=False)
# Producers are held while the swap area's or the message store's filesystem has less
# free space than this (-1: never).
SWAP_MIN_FREE = Size("imq.swap.minFreeSpace", "64m", listed=False)
PERSIST_MIN_FREE = Size("imq.persist.minFreeSpace", "64m", listed=False)
TRANSACTION_AUTOROLLBACK = Bool("imq.transaction.autorollback", "false")
TRANSACTION_DETACHED_TIMEOUT = Ignored(
    "imq.transaction.detachedTimeout",
    "0",
    "no separate timeout for detached XA transactions (the lifetime a client gives a "
    "transaction still applies)",
    listed=True,
)
_TXN_LIMIT = "a transaction may hold any number of messages (no per-transaction limit)"
TRANSACTION_PRODUCER_MAX = Ignored(
    "imq.transaction.producer.maxNumMsgs", "1000", _TXN_LIMIT, listed=True
)
TRANSACTION_CONSUMER_MAX = Ignored(
    "imq.transaction.consumer.maxNumMsgs", "100", _TXN_LIMIT, listed=True
)
FIX_JMS_MESSAGE_ID = Ignored(
    "imq.fix.JMSMessageID",
    "true",
    "the message ids the broker reports (imqcmd, the portal) always start with ID:, as "
    "OpenMQ's default true gives",
    listed=True,
)

# --- persistence
PERSIST_STORE = Text("imq.persist.store", "file").differs(
    "jdbc is the Django database (DATABASES), not a JDBC driver's"
)
PERSIST_FILE_SYNC = Bool("imq.persist.file.sync.enabled", "false")
PERSIST_FILE_DIRPATH = OptionalText("imq.persist.file.dirpath")  # unset: <instance>/filestore
PERSIST_FILE_PREALLOCATE = OptionalBool("imq.persist.file.preallocate")  # unset: with sync
PERSIST_FILE_SYNC_INLINE = Bool("imq.persist.file.sync.inline", "true", listed=False)
# The database store creates its tables at start when none exists (else it refuses).
PERSIST_STORE_CREATE_ALL = Bool("imq.persist.storecreate.all", "true")
# Seconds between the database store's heartbeats, fractions allowed (ownership.py).
PERSIST_JDBC_HEARTBEAT = Seconds("imq.persist.jdbc.heartbeat.interval", "5", listed=False)
# OpenMQ's file store keeps a variable-record file and a pool of message files per
# destination and a transaction log; this one appends every record to numbered segment
# files (broker/store/filestore.py), so its tuning keys have nothing to act on.
_SEGMENTS = "the file store appends every record to segment files"
_FILE_STORE_TUNING = [
    Ignored(
        "imq.persist.file.message.max_record_size",
        "1m",
        _SEGMENTS + ": a record bigger than a segment gets a segment of its own",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.message.vrfile.initial_size",
        "1m",
        _SEGMENTS + " (imq.persist.file.preallocate zero-fills them ahead)",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.message.vrfile.block_size",
        "256",
        _SEGMENTS + ", unblocked",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.message.filepool.cleanratio",
        "0",
        _SEGMENTS + "; there is no pool of message files",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.destination.message.filepool.limit",
        "100",
        _SEGMENTS + "; there is no pool of message files",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.message.cleanup",
        "false",
        _SEGMENTS + " and reclaims their space as it goes (not at shutdown)",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.transaction.memorymappedfile.enabled",
        "true",
        _SEGMENTS + ", transactions included; nothing is memory-mapped",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.txnLog.nonTransactedMsgSend.enabled",
        "false",
        _SEGMENTS + "; there is no separate transaction log "
        "(imq.persist.file.sync.enabled makes every persistent send durable)",
        listed=True,
    ),
    Ignored(
        "imq.persist.file.txnLog.file.size",
        "10m",
        _SEGMENTS + "; there is no separate transaction log",
        listed=True,
    ),
]

# --- security
AUTH_TYPE = Text("imq.authentication.type", "digest")
# Ours: the shared database's users (OpenMQ's default is the passwd "file").
USER_REPOSITORY = {
    "basic": Text("imq.authentication.basic.user_repository", "database").differs(
        "default database (the portal's users); file (OpenMQ's default) and ldap as in OpenMQ"
    ),
    "digest": Text("imq.authentication.digest.user_repository", "database").differs(
        "default database (the portal's users); file (OpenMQ's default) as in OpenMQ"
    ),
}
USER_FILE_NAME = Text("imq.user_repository.file.filename", "passwd")
USER_FILE_DIRPATH = Text("imq.user_repository.file.dirpath", _INSTANCE_DIR + "${/}etc")
LDAP_PREFIX = (
    "imq.user_repository.ldap."  # server, base, uidattr, ... (broker/security/ldaprepo.py)
)
LDAP_TIMEOUT = Text(LDAP_PREFIX + "timeout", "180")
# Ours (RabbitMQ's loopback_users idea): the shipped accounts (admin/admin, guest/guest)
# still on their shipped passwords log in from loopback addresses only
# (broker/security/shipped.py); false as in OpenMQ, true in the Docker stack.
SHIPPED_LOOPBACK_ONLY = Bool("imq.user.shipped_passwords.loopback_only", "false", listed=False)
ACCESSCONTROL_ENABLED = Bool("imq.accesscontrol.enabled", "true")
ACCESSCONTROL_TYPE = Text("imq.accesscontrol.type", "file")
ACCESSCONTROL_FILE_NAME = Text("imq.accesscontrol.file.filename", "accesscontrol.properties")
ACCESSCONTROL_FILE_DIRPATH = Text("imq.accesscontrol.file.dirpath", _INSTANCE_DIR + "${/}etc")
ACCESSCONTROL_FILE_URL = Ignored(
    "imq.accesscontrol.file.url",
    None,
    "the access control file is read from imq.accesscontrol.file.dirpath and "
    "imq.accesscontrol.file.filename, not from a URL",
)
KEYSTORE_DIRPATH = Text("imq.keystore.file.dirpath", "${imq.etchome}")
KEYSTORE_NAME = Text("imq.keystore.file.name", "keystore")
KEYSTORE_PASSWORD = OptionalText("imq.keystore.password")
PASSFILE_ENABLED = Bool("imq.passfile.enabled", "false")
PASSFILE_DIRPATH = Text("imq.passfile.dirpath", "${imq.etchome}")
PASSFILE_NAME = Text("imq.passfile.name", "passfile")
IMQCMD_PASSWORD = OptionalText("imq.imqcmd.password")  # a passfile line, never configured

# --- logging
LOG_LEVEL = Text("imq.log.level", "INFO")
_GUIDE_NAMES = "read as the administrator's guide says; the stock 6.9 broker ignores it"
LOG_FILE_DIRPATH = Text("imq.log.file.dirpath", _INSTANCE_DIR + "${/}log").differs(_GUIDE_NAMES)
LOG_FILE_NAME = Text("imq.log.file.filename", "log.txt").differs(_GUIDE_NAMES)
# OpenMQ 6.9's own name for the log file's path (java.util.logging; %t, %h, %g, %u, %%):
# set, it wins over the two above, which the stock 6.9 broker ignores.
LOG_FILE_PATTERN = OptionalText("java.util.logging.FileHandler.pattern")
# OpenMQ 6.9's name for rollover by size (bytes; 0: none), read when set and
# imq.log.file.rolloversize is not: the stock file's 256 MiB is not this broker's default.
LOG_FILE_LIMIT = Size("java.util.logging.FileHandler.limit", "0", listed=False).differs(
    "read only when set (the stock default.properties' 268435456 is not this broker's "
    "default: no rollover by size), and only while imq.log.file.rolloversize is unset"
)
# Which categories go to each output: ERROR|WARNING|INFO|... (| between), ALL or NONE
# (broker/logsetup.py); the console's stream ERR (stderr) or OUT (stdout).
LOG_FILE_OUTPUT = Text("imq.log.file.output", "ALL").differs(_GUIDE_NAMES)
LOG_CONSOLE_OUTPUT = Text("imq.log.console.output", "ERROR|WARNING").differs(_GUIDE_NAMES)
LOG_CONSOLE_STREAM = Text("imq.log.console.stream", "ERR").differs(_GUIDE_NAMES)
LOG_ROLLOVER_SIZE = Size("imq.log.file.rolloversize", "-1")
LOG_ROLLOVER_BYTES = Size("imq.log.file.rolloverbytes", "-1", listed=False)  # older spelling
LOG_ROLLOVER_SECS = Int("imq.log.file.rolloversecs", "604800")
LOG_TIMEZONE = OptionalText("imq.log.timezone")  # unset: the machine's
# Syslog (OpenMQ: Solaris only; here wherever there is a syslog daemon): the facility, the
# process id after the identity, the console when syslog cannot be reached, the categories.
LOG_SYSLOG_FACILITY = Text("imq.log.syslog.facility", "LOG_DAEMON").differs(
    "syslog wherever a daemon listens (OpenMQ: Solaris only), at imq.log.syslog.address"
)
LOG_SYSLOG_LOGPID = Bool("imq.log.syslog.logpid", "true")
LOG_SYSLOG_LOGCONSOLE = Bool("imq.log.syslog.logconsole", "false")
LOG_SYSLOG_IDENTITY = Text("imq.log.syslog.identity", "imqbrokerd_${imq.instancename}")
LOG_SYSLOG_OUTPUT = Text("imq.log.syslog.output", "ERROR")
# Not OpenMQ: where syslog is (a local socket's path, or host:port for UDP); NONE: off.
LOG_SYSLOG_ADDRESS = Text("imq.log.syslog.address", "/dev/log")
# The broker's log as messages on the topic mq.log.broker while it has subscribers
# (broker/server/log_topic.py): records at this level and above (NONE: none), their
# time to live, whether persistent, and how many the topic holds (oldest dropped).
LOG_DESTINATION_OUTPUT = Text("imq.log.destination.output", "WARNING")
LOG_DESTINATION_TIMETOLIVE = Int("imq.log.destination.timetolive", "300").differs(
    "seconds, as documented; the stock 6.9 broker adds the value in milliseconds, so its "
    "log messages expire 0.3 s after they are sent"
)
LOG_DESTINATION_PERSIST = Bool("imq.log.destination.persist", "false")
LOG_DESTINATION_CAPACITY = Int("imq.log.destination.capacity", "100", listed=False)
LOG_DESTINATION_TOPIC = Ignored(
    "imq.log.destination.topic",
    None,
    "the broker's log goes to the topic mq.log.broker, the name OpenMQ's clients know",
)
LOG_JMX_OUTPUT = Ignored(
    "imq.log.jmx.output", "ALL", "JMX is not supported (no JMX log notifications)", listed=True
)
# Not OpenMQ: the shared-database log table behind the portal (broker/logsetup.py).
LOG_DATABASE_ENABLED = Bool("imq.log.database.enabled", "true")
LOG_DATABASE_OUTPUT = Text("imq.log.database.output", "WARNING")

# --- metrics
# The periodic metrics report in the broker log (broker/server/metrics_topics.py): on,
# and seconds between two reports (0: none).
METRICS_ENABLED = Bool("imq.metrics.enabled", "true")
METRICS_INTERVAL = Int("imq.metrics.interval", "0")
# The metrics topics (mq.metrics.*): on; seconds between two maps; whether they are
# persistent; their time to live in seconds (0: they never expire).
METRICS_TOPIC_ENABLED = Bool("imq.metrics.topic.enabled", "true")
METRICS_TOPIC_INTERVAL = Int("imq.metrics.topic.interval", "60")
METRICS_TOPIC_PERSIST = Bool("imq.metrics.topic.persist", "false")
METRICS_TOPIC_TIMETOLIVE = Int("imq.metrics.topic.timetolive", "300")
# The exit status of a broker that an administrator restarts (imqcmd restart bkr):
# configured, runbroker exits with it for a supervisor (systemd, a wrapper script) to
# start it again, as imqbrokerd does; unset, runbroker starts the broker again itself.
RESTART_CODE = Int("imq.restart.code", "255").differs(
    "only when set: runbroker then exits with it and leaves the restart to whatever "
    "supervises it; unset, runbroker starts the broker again in the same process"
)
# Ours (broker/server/events.py): the samples behind the portal's live pages and history.
METRICS_SAMPLE_INTERVAL = Int("imq.metrics.sample.interval", "10", listed=False)
METRICS_SAMPLE_RETENTION = Int("imq.metrics.sample.retention", "86400", listed=False)
METRICS_RAW_ENABLED = Bool("imq.metrics.raw.enabled", "true", listed=False)
METRICS_RAW_URL = OptionalText("imq.metrics.raw.url")
METRICS_RAW_FLUSH_INTERVAL = Int("imq.metrics.raw.flush.interval", "300", listed=False)
# Ours (broker/server/looplag.py): the event-loop lag probe's window (s) and warning (ms).
LOOP_LAG_WINDOW = Int("imq.loop.lag.window", "10", listed=False)
LOOP_LAG_WARN = Int("imq.loop.lag.warn", "100", listed=False)
# Ours: freeze the start-up heap out of full garbage collections (looplag.py).
GC_FREEZE = Bool("imq.gc.freeze", "true", listed=False)
# Ours: defer full garbage collections while more messages than this are queued (0: never),
# for at most imq.gc.defer.maxwait seconds (looplag.FullCollections).
GC_DEFER_MESSAGES = Int("imq.gc.defer.messages", "20000", listed=False)
GC_DEFER_MAXWAIT = Int("imq.gc.defer.maxwait", "600", listed=False)

# --- cluster
CLUSTER_PORT = Int("imq.cluster.port", "0")
CLUSTER_TRANSPORT = Text("imq.cluster.transport", "tcp")
CLUSTER_PING_INTERVAL = Int("imq.cluster.ping.interval", "60")
# Ours: seconds a new cluster link has to finish its handshake before it is dropped.
CLUSTER_HANDSHAKE_TIMEOUT = Int("imq.cluster.handshake.timeout", "10", listed=False)
CLUSTER_HOSTNAME = OptionalText("imq.cluster.hostname")  # unset: imq.hostname
# HA: seconds between heartbeats and monitor passes; missed beats before a takeover.
CLUSTER_MONITOR_INTERVAL = Text("imq.cluster.monitor.interval", "30")
CLUSTER_MONITOR_THRESHOLD = Text("imq.cluster.monitor.threshold", "3")
CLUSTER_LOCKTIMEOUT = Int("imq.cluster.locktimeout", "60")
_HEARTBEAT = "the cluster links' liveness is imq.cluster.ping.interval (no separate UDP heartbeat)"
# The master broker may move (imqcmd changemaster cls; broker/cluster/mastership.py).
CLUSTER_DYNAMIC_MASTER = Bool("imq.cluster.dynamicChangeMasterBrokerEnabled", "false")
_CLUSTER = [
    Ignored(
        "imq.cluster.nomasterbroker",
        "false",
        "a cluster has a master broker when imq.cluster.masterbroker names one; the shared "
        "JDBC change record (imq.cluster.sharecc.*) is not supported",
        listed=True,
    ),
    CLUSTER_PORT,
    CLUSTER_TRANSPORT,
    Ignored(
        "imq.cluster.consumerFlowLimit",
        "1000",
        "messages for a remote consumer follow that consumer's own prefetch window",
        listed=True,
    ),
    CLUSTER_PING_INTERVAL,
    Ignored("imq.cluster.heartbeat.interval", "5", _HEARTBEAT, listed=True),
    Ignored("imq.cluster.heartbeat.threshold", "3", _HEARTBEAT, listed=True),
    Ignored("imq.cluster.heartbeat.hostname", None, _HEARTBEAT),
    Ignored("imq.cluster.heartbeat.port", None, _HEARTBEAT),
    CLUSTER_MONITOR_INTERVAL,
    CLUSTER_MONITOR_THRESHOLD,
    CLUSTER_LOCKTIMEOUT,
    Ignored(
        "imq.cluster.waitReplyTimeout",
        "180",
        "a cluster request has no separate reply timeout: it ends with its reply or with "
        "the link to that broker",
        listed=True,
    ),
    Ignored(
        "imq.cluster.nowaitForMasterBroker",
        "false",
        "a broker whose master broker is away starts and serves; changes that need the "
        "change record are refused until the master broker is back",
        listed=True,
    ),
    CLUSTER_DYNAMIC_MASTER,
]
CLUSTER_HA = Text("imq.cluster.ha", "false")
CLUSTER_ID = OptionalText("imq.cluster.clusterid")
CLUSTER_URL = OptionalText("imq.cluster.url")
CLUSTER_BROKERLIST = OptionalText("imq.cluster.brokerlist")
CLUSTER_MASTERBROKER = OptionalText("imq.cluster.masterbroker")

# --- per-service and per-protocol properties (read with BrokerConfig.service_prop)
_WS_ORIGINS = "any origin may open a WebSocket connection (no Origin check)"
_WS_SUBSERVICES = "the WebSocket services serve STOMP (mqstomp) only, not mqjms or mqjsonstomp"
SERVICE_PROPS = (
    Family("imq.<service>.protocoltype"),
    Family("imq.<service>.servicetype"),
    Family("imq.<service>.<proto>.port"),
    Family("imq.<service>.<proto>.hostname"),
    Family("imq.<service>.<proto>.backlog"),
    Family("imq.<service>.authentication.type"),
    Family("imq.<service>.authentication.<any>.user_repository"),
    Family("imq.<service>.accesscontrol.enabled"),
    Family("imq.<service>.accesscontrol.file.filename"),
    Family("imq.<service>.accesscontrol.file.dirpath"),
    Family("imq.<service>.max_connections"),  # ours: the service's connection limit
    Family(
        "imq.<service>.max_threads",
        DIFFERS,
        "one event loop serves every connection: a value set here limits the service's "
        "connections (the shipped defaults do not), and imqcmd shows it",
    ),
    Family(
        "imq.<service>.min_threads",
        DIFFERS,
        "one event loop serves every connection: imqcmd shows the value, nothing else reads it",
    ),
    Family(
        "imq.<service>.threadpool_model",
        IGNORED,
        "one event loop serves every connection (no thread pools)",
    ),
    # The WebSocket services carry STOMP only (docs/reference/stomp.md): no origin check,
    # no choice of sub-services.
    Family("imq.wsjms.allowedOrigins", IGNORED, _WS_ORIGINS),
    Family("imq.wssjms.allowedOrigins", IGNORED, _WS_ORIGINS),
    Family("imq.wsjms.services", IGNORED, _WS_SUBSERVICES),
    Family("imq.wssjms.services", IGNORED, _WS_SUBSERVICES),
    Family(
        "imq.protocol.<proto>.nodelay",
        IGNORED,
        "TCP_NODELAY is always on for the broker's connections",
    ),
    Family(
        "imq.protocol.<proto>.inbufsz",
        IGNORED,
        "the event loop sizes its connections' buffers",
    ),
    Family(
        "imq.protocol.<proto>.outbufsz",
        IGNORED,
        "the event loop sizes its connections' buffers",
    ),
)
# The LDAP user repository reads its properties under this prefix (security/ldaprepo.py).
LDAP_PROPS = Family(LDAP_PREFIX + "*")

# --- stock properties this broker has nothing to act on
_DJANGO_DB = (
    "the database store is the Django database (DATABASES, or DATABASE_URL), its tables "
    "made by migrations"
)
UNSUPPORTED_FAMILIES = (
    # After the declared imq.persist.jdbc.* properties, which win over a family.
    Family("imq.persist.jdbc.*", IGNORED, _DJANGO_DB),
    Family(
        "imq.cluster.sharecc.*",
        IGNORED,
        "the cluster's change record is kept by its master broker "
        "(imq.cluster.masterbroker): no shared JDBC change record",
    ),
    Family(
        "imq.jmx.*",
        IGNORED,
        "of JMX only imq.jmx.connector.activelist (jmxrmi, ssljmxrmi), imq.jmx.hostname, "
        "imq.jmx.connector.<name>.port and imq.jmx.rmiregistry.start/use/port are "
        "honoured (docs/reference/jmx.md)",
    ),
    Family(
        "imq.bridge.*",
        IGNORED,
        "the JMS bridge, and the STOMP bridge settings other than its TCP and TLS listeners' "
        "(docs/reference/stomp.md), are not supported",
    ),
    Family("imq.user_repository.jaas.*", IGNORED, "JAAS user repositories are not supported"),
    Family(
        "imq.instanceconfig.*",
        IGNORED,
        "the stock broker's own bookkeeping of its configuration file",
    ),
    Family("imq.partitionmode.*", IGNORED, "the stock broker's partitioned store is not supported"),
    Family("imq.storemigration.*", IGNORED, "the stock broker's store migration does not apply"),
    Family(
        "java.util.logging.*",
        IGNORED,
        "the log's outputs are set with imq.log.level and imq.log.<output>.output "
        "(java.util.logging.FileHandler.pattern and .limit are read)",
    ),
)
_UNSUPPORTED = [
    Ignored(
        "imq.config.version",
        None,
        "the layout version of OpenMQ's properties file: nothing to configure",
    ),
    Ignored(
        "imq.shared.connectionMonitor_limit",
        None,
        "one event loop serves every connection (no shared thread pool)",
    ),
    Ignored(
        "handlers",
        None,
        "java.util.logging's handler list: the outputs are the imq.log.<output>.output properties",
    ),
    Ignored(
        "imq.packet.read.override",
        None,
        "a debugging switch of OpenMQ's packet reader",
    ),
    Ignored("imq.diag.all", None, "OpenMQ's diagnostic dumps are not supported"),
    Ignored(
        ".level",
        None,
        "java.util.logging's root level: the broker's level is imq.log.level (or -loglevel)",
    ),
    Ignored(
        "imq.adminkey",
        None,
        "the administration key of OpenMQ's Windows service; admin clients log in as "
        "users of the admin group",
    ),
]

# --- what a broker reports about itself (never configured)
PRODUCT_VERSION = "imq.product.version"
PRODUCT_MAJOR = "imq.product.major"
PRODUCT_MINOR = "imq.product.minor"
PRODUCT_NAME = "imq.product.name"
PRODUCT_NAME_SHORT = "imq.product.name.short"
BUILD_NUMBER = "imq.build.number"
BUILD_MILESTONE = "imq.build.milestone"
EMBEDDED = "imq.embedded"
BROKER_STATE = "imq.broker.state"
MEMORY_STATE = "imq.memory.state"
CURRENT_COUNT = "imq.system.current_count"
CURRENT_SIZE = "imq.system.current_size"
CURRENT_CONNECTIONS = "imq.system.current_connections"
DMQ_CURRENT_COUNT = "imq.dmq.current_count"
DMQ_CURRENT_SIZE = "imq.dmq.current_size"
LOOP_LAG_MAX = "imq.loop.lag.max"
LOOP_LAG_P99 = "imq.loop.lag.p99"
CLUSTER_BROKERLIST_ACTIVE = "imq.cluster.brokerlist.active"
# Ours: the shipped accounts still on their shipped passwords (comma-separated), reported
# while a service listens beyond loopback (the portal's overview warns).
SHIPPED_PASSWORDS_IN_USE = "imq.user.shipped_passwords.in_use"
REPORTED: tuple[str, ...] = (
    PRODUCT_VERSION,
    PRODUCT_MAJOR,
    PRODUCT_MINOR,
    PRODUCT_NAME,
    PRODUCT_NAME_SHORT,
    BUILD_NUMBER,
    BUILD_MILESTONE,
    EMBEDDED,
    BROKER_STATE,
    MEMORY_STATE,
    CURRENT_COUNT,
    CURRENT_SIZE,
    CURRENT_CONNECTIONS,
    DMQ_CURRENT_COUNT,
    DMQ_CURRENT_SIZE,
    LOOP_LAG_MAX,
    LOOP_LAG_P99,
    CLUSTER_BROKERLIST_ACTIVE,
    SHIPPED_PASSWORDS_IN_USE,
)

# --- per-service defaults
# (service, protocol type, service type, backlog, min threads, max threads)
SERVICES = (
    ("jms", "tcp", "NORMAL", "100", "10", "1000"),
    ("admin", "tcp", "ADMIN", "5", "4", "10"),
    ("ssljms", "tls", "NORMAL", "100", "10", "1000"),
    ("ssladmin", "tls", "ADMIN", "5", "4", "10"),
    ("httpjms", "http", "NORMAL", None, "10", "500"),
    ("httpsjms", "https", "NORMAL", None, "10", "500"),
    ("wsjms", "ws", "NORMAL", "100", "10", "1000"),
    ("wssjms", "wss", "NORMAL", "100", "10", "1000"),
)
# A browser cannot ask the port mapper: OpenMQ's WebSocket services have fixed ports.
FIXED_PORTS = {"ws": "7670", "wss": "7671"}


def service_port(service: str, protocol: str) -> str:
    """``imq.<service>.<protocol>.port`` (0: a free port, published by the port mapper)."""
    return f"imq.{service}.{protocol}.port"


def _service_defaults() -> Iterator[tuple[str, str]]:
    for svc, proto, stype, backlog, tmin, tmax in SERVICES:
        yield f"imq.{svc}.protocoltype", proto
        yield f"imq.{svc}.servicetype", stype
        yield f"imq.{svc}.min_threads", tmin
        yield f"imq.{svc}.max_threads", tmax
        yield f"imq.{svc}.threadpool_model", "dedicated"
        if backlog is not None:
            # Socket services only: OpenMQ's HTTP services ride on a web container, so
            # its default.properties has no port for them (this broker's tunnel reads
            # imq.httpjms.http.port all the same, 0 when unset).
            yield service_port(svc, proto), FIXED_PORTS.get(proto, "0")
            yield f"imq.{svc}.{proto}.backlog", backlog
    for proto in ("tcp", "tls"):
        yield f"imq.protocol.{proto}.nodelay", "true"
        yield f"imq.protocol.{proto}.inbufsz", "2048"
        yield f"imq.protocol.{proto}.outbufsz", "2048"


def classify(name: str) -> Prop | Family | None:
    """The declaration that covers property ``name``: its :class:`Prop`, else the first
    :class:`Family` that matches it; None for a name this broker does not know."""
    prop = _DECLARED.get(name)
    if prop is not None:
        return prop
    for family in _FAMILIES:
        if family.matches(name):
            return family
    return None


def families() -> list[Family]:
    """Every declared family, in declaration order."""
    return list(_FAMILIES)


def declared() -> dict[str, Prop]:
    """Every property declared here by name, in declaration order."""
    return dict(_DECLARED)


def listed_defaults() -> dict[str, str]:
    """The defaults of OpenMQ's shipped ``default.properties`` (name -> text)."""
    out = {p.name: p.default for p in _DECLARED.values() if p.listed and p.default is not None}
    out.update(_service_defaults())
    return out  # type: ignore[return-value]


# --------------------------------------------------------------------------------------
# What an administrator may change at run time (admin UPDATE_BROKER_PROPS; imqcmd update
# bkr; the definitions an import applies; a value's check: broker/propcheck.py
# property_value_problem)
# --------------------------------------------------------------------------------------

# Broker properties UPDATE_BROKER_PROPS may change at run time, with their value kind
# (imqcmd update bkr's list, plus the other auto-creation defaults and housekeeping
# settings the broker reads live).
RUNTIME_PROPERTIES: dict[str, str] = {
    AUTOCREATE_QUEUE.name: "bool",
    AUTOCREATE_TOPIC.name: "bool",
    AUTOCREATE_REAPTIME.name: "int",
    AUTOCREATE_QUEUE_MAX_ACTIVE.name: "count",
    AUTOCREATE_QUEUE_MAX_BACKUP.name: "count",
    AUTOCREATE_QUEUE_FLOW_LIMIT.name: "count",
    AUTOCREATE_TOPIC_FLOW_LIMIT.name: "count",
    AUTOCREATE_TOPIC_MAX_SHARED.name: "count",
    AUTOCREATE_TOPIC_SHARED_FLOW_LIMIT.name: "count",
    AUTOCREATE_DEST_ATTRIBUTES["maxNumMsgs"].name: "count",
    AUTOCREATE_DEST_ATTRIBUTES["maxTotalMsgBytes"].name: "size",
    AUTOCREATE_DEST_ATTRIBUTES["maxBytesPerMsg"].name: "size",
    AUTOCREATE_DEST_ATTRIBUTES["maxNumProducers"].name: "count",
    AUTOCREATE_DEST_ATTRIBUTES["maxDeliveryCount"].name: "count",
    AUTOCREATE_DEST_ATTRIBUTES["limitBehavior"].name: "behavior",
    AUTOCREATE_USE_DMQ.name: "bool",
    AUTOCREATE_DEST_ATTRIBUTES["isLocalOnly"].name: "bool",
    QUEUE_DELIVERY_POLICY.name: "policy",
    SYSTEM_MAX_COUNT.name: "count",
    SYSTEM_MAX_SIZE.name: "size",
    MESSAGE_MAX_SIZE.name: "size",
    EXPIRATION_INTERVAL.name: "positive",
    DMQ_TRUNCATE_BODY.name: "bool",
    LOG_DEAD_MSGS.name: "bool",
    TRANSACTION_AUTOROLLBACK.name: "bool",
    LOG_LEVEL.name: "level",
    LOG_ROLLOVER_SECS.name: "int",
    LOG_ROLLOVER_BYTES.name: "size",
    LOG_ROLLOVER_SIZE.name: "size",
    PORTMAPPER_PORT.name: "port",
    SWAP_THRESHOLD.name: "int",  # (broker/server/paging.py RUNTIME)
    SWAP_MIN_FREE.name: "size",
    PERSIST_MIN_FREE.name: "size",
}
