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

No Django import: the broker runtime, tests and tools use this directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

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


def as_limit(number: int) -> int:
    """A limit as OpenMQ applies it: 0 and negative values mean no limit (-1)."""
    return number if number > 0 else UNLIMITED


_DECLARED: dict[str, Prop] = {}


class Prop(Generic[T]):
    """One property: its name, its default as OpenMQ writes it, and how to read it."""

    __slots__ = ("default", "listed", "name")

    def __init__(self, name: str, default: str | None, *, listed: bool = True) -> None:
        if name in _DECLARED:
            raise ValueError(f"{name} is declared twice")
        self.name = name
        self.default = default
        self.listed = listed and default is not None
        _DECLARED[name] = self

    def read(self, config: BrokerConfig) -> T:
        raise NotImplementedError

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
ETCHOME = Text("imq.etchome", _INSTANCE_DIR + "${/}etc")
HOSTNAME = OptionalText("imq.hostname")  # unset: all interfaces
BROKER_ID = OptionalText("imq.brokerid")
JDBC_BROKER_ID = OptionalText("imq.persist.jdbc.brokerid")

# --- connection services and port mapper
SERVICE_LIST = List("imq.service.list", "jms,admin,ssljms,httpjms,httpsjms,ssladmin,wsjms,wssjms")
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
TUNNEL_SERVLET_PROPS = (
    Text("imq.httpjms.http.servletHost", "localhost"),
    Int("imq.httpjms.http.servletPort", "7675"),
    Text("imq.httpsjms.https.servletHost", "localhost"),
    Int("imq.httpsjms.https.servletPort", "7674"),
)
# OpenMQ's STOMP bridge (imq.bridge.*, the stock names; docs/reference/stomp.md): the STOMP
# TCP listener runs when the bridge service is on and stomp is in its active list.
BRIDGE_ENABLED = Bool("imq.bridge.enabled", "false", listed=False)
BRIDGE_ACTIVELIST = List("imq.bridge.activelist", "", listed=False)
STOMP_TCP_ENABLED = Bool("imq.bridge.stomp.tcp.enabled", "true", listed=False)
STOMP_TCP_PORT = Int("imq.bridge.stomp.tcp.port", "7672", listed=False)
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
PORTMAPPER_SOLINGER = Int("imq.portmapper.solinger", "-1")
PORTUNIF_ENABLED = Bool("imq.portunif.enabled", "false")
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
QUEUE_DELIVERY_POLICY = OptionalText("imq.queue.deliverypolicy")  # single/failover/round-robin
PRODUCER_MAX_BATCH = Int("imq.producer.maxBatch", "1000")
EXPIRE_DELIVERED = Bool("imq.destination.expireDeliveredMessages", "false")
PURGE_DELIVERED = Bool("imq.destination.purgeDeliveredMessages", "false")
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
MEMORY_LEVELS = List("imq.memory.levels", "green,yellow,orange,red")
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
MEMORY_OVERHEAD = Int("imq.memory.overhead", "10240")
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
TRANSACTION_DETACHED_TIMEOUT = Int("imq.transaction.detachedTimeout", "0")
TRANSACTION_PRODUCER_MAX = Int("imq.transaction.producer.maxNumMsgs", "1000")
TRANSACTION_CONSUMER_MAX = Int("imq.transaction.consumer.maxNumMsgs", "100")
FIX_JMS_MESSAGE_ID = Bool("imq.fix.JMSMessageID", "true")

# --- persistence
PERSIST_STORE = Text("imq.persist.store", "file")
PERSIST_FILE_SYNC = Bool("imq.persist.file.sync.enabled", "false")
PERSIST_FILE_DIRPATH = OptionalText("imq.persist.file.dirpath")  # unset: <instance>/filestore
PERSIST_FILE_PREALLOCATE = OptionalBool("imq.persist.file.preallocate")  # unset: with sync
PERSIST_FILE_SYNC_INLINE = Bool("imq.persist.file.sync.inline", "true", listed=False)
# The database store creates its tables at start when none exists (else it refuses).
PERSIST_STORE_CREATE_ALL = Bool("imq.persist.storecreate.all", "true")
PERSIST_JDBC_HEARTBEAT = Int("imq.persist.jdbc.heartbeat.interval", "5", listed=False)
_FILE_STORE_TUNING = [
    Text("imq.persist.file.message.max_record_size", "1m"),
    Text("imq.persist.file.message.vrfile.initial_size", "1m"),
    Text("imq.persist.file.message.vrfile.block_size", "256"),
    Text("imq.persist.file.message.filepool.cleanratio", "0"),
    Text("imq.persist.file.destination.message.filepool.limit", "100"),
    Text("imq.persist.file.message.cleanup", "false"),
    Text("imq.persist.file.transaction.memorymappedfile.enabled", "true"),
    Text("imq.persist.file.txnLog.nonTransactedMsgSend.enabled", "false"),
    Text("imq.persist.file.txnLog.file.size", "10m"),
]

# --- security
AUTH_TYPE = Text("imq.authentication.type", "digest")
# Ours: the shared database's users (OpenMQ's default is the passwd "file").
USER_REPOSITORY = {
    "basic": Text("imq.authentication.basic.user_repository", "database"),
    "digest": Text("imq.authentication.digest.user_repository", "database"),
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
KEYSTORE_DIRPATH = Text("imq.keystore.file.dirpath", "${imq.etchome}")
KEYSTORE_NAME = Text("imq.keystore.file.name", "keystore")
KEYSTORE_PASSWORD = OptionalText("imq.keystore.password")
PASSFILE_ENABLED = Bool("imq.passfile.enabled", "false")
PASSFILE_DIRPATH = Text("imq.passfile.dirpath", "${imq.etchome}")
PASSFILE_NAME = Text("imq.passfile.name", "passfile")
IMQCMD_PASSWORD = OptionalText("imq.imqcmd.password")  # a passfile line, never configured

# --- logging
LOG_LEVEL = Text("imq.log.level", "INFO")
LOG_FILE_DIRPATH = Text("imq.log.file.dirpath", _INSTANCE_DIR + "${/}log")
LOG_FILE_NAME = Text("imq.log.file.filename", "log.txt")
# OpenMQ 6.9's own name for the log file's path (java.util.logging; %t, %h, %g, %u, %%):
# set, it wins over the two above, which the stock 6.9 broker ignores.
LOG_FILE_PATTERN = OptionalText("java.util.logging.FileHandler.pattern")
# Which categories go to each output: ERROR|WARNING|INFO|... (| between), ALL or NONE
# (broker/logsetup.py); the console's stream ERR (stderr) or OUT (stdout).
LOG_FILE_OUTPUT = Text("imq.log.file.output", "ALL")
LOG_CONSOLE_OUTPUT = Text("imq.log.console.output", "ERROR|WARNING")
LOG_CONSOLE_STREAM = Text("imq.log.console.stream", "ERR")
LOG_ROLLOVER_SIZE = Size("imq.log.file.rolloversize", "-1")
LOG_ROLLOVER_BYTES = Size("imq.log.file.rolloverbytes", "-1", listed=False)  # older spelling
LOG_ROLLOVER_SECS = Int("imq.log.file.rolloversecs", "604800")
LOG_TIMEZONE = OptionalText("imq.log.timezone")  # unset: the machine's
# Syslog (OpenMQ: Solaris only; here wherever there is a syslog daemon): the facility, the
# process id after the identity, the console when syslog cannot be reached, the categories.
LOG_SYSLOG_FACILITY = Text("imq.log.syslog.facility", "LOG_DAEMON")
LOG_SYSLOG_LOGPID = Bool("imq.log.syslog.logpid", "true")
LOG_SYSLOG_LOGCONSOLE = Bool("imq.log.syslog.logconsole", "false")
LOG_SYSLOG_IDENTITY = Text("imq.log.syslog.identity", "imqbrokerd_${imq.instancename}")
LOG_SYSLOG_OUTPUT = Text("imq.log.syslog.output", "ERROR")
# Not OpenMQ: where syslog is (a local socket's path, or host:port for UDP); NONE: off.
LOG_SYSLOG_ADDRESS = Text("imq.log.syslog.address", "/dev/log")
_LOG_OUTPUTS = [
    Text("imq.log.destination.output", "WARNING"),
    Text("imq.log.destination.timetolive", "300"),
    Text("imq.log.destination.persist", "false"),
    Text("imq.log.jmx.output", "ALL"),
]
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
_RESTART = [Text("imq.restart.code", "255")]
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
CLUSTER_HOSTNAME = OptionalText("imq.cluster.hostname")  # unset: imq.hostname
# HA: seconds between heartbeats and monitor passes; missed beats before a takeover.
CLUSTER_MONITOR_INTERVAL = Text("imq.cluster.monitor.interval", "30")
CLUSTER_MONITOR_THRESHOLD = Text("imq.cluster.monitor.threshold", "3")
CLUSTER_LOCKTIMEOUT = Int("imq.cluster.locktimeout", "60")
_CLUSTER = [
    Text("imq.cluster.nomasterbroker", "false"),
    CLUSTER_PORT,
    CLUSTER_TRANSPORT,
    Text("imq.cluster.consumerFlowLimit", "1000"),
    CLUSTER_PING_INTERVAL,
    Text("imq.cluster.heartbeat.interval", "5"),
    Text("imq.cluster.heartbeat.threshold", "3"),
    CLUSTER_MONITOR_INTERVAL,
    CLUSTER_MONITOR_THRESHOLD,
    CLUSTER_LOCKTIMEOUT,
    Text("imq.cluster.waitReplyTimeout", "180"),
    Text("imq.cluster.nowaitForMasterBroker", "false"),
    Text("imq.cluster.dynamicChangeMasterBrokerEnabled", "false"),
]
CLUSTER_HA = Text("imq.cluster.ha", "false")
CLUSTER_ID = OptionalText("imq.cluster.clusterid")
CLUSTER_URL = OptionalText("imq.cluster.url")
CLUSTER_BROKERLIST = OptionalText("imq.cluster.brokerlist")
CLUSTER_MASTERBROKER = OptionalText("imq.cluster.masterbroker")

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
    ("wsjms", "ws", "NORMAL", None, "10", "1000"),
    ("wssjms", "wss", "NORMAL", None, "10", "1000"),
)


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
            # Socket services only: OpenMQ's HTTP/WebSocket services ride on a web
            # container, so its default.properties has no port for them (this broker's
            # tunnel reads imq.httpjms.http.port all the same, 0 when unset).
            yield service_port(svc, proto), "0"
            yield f"imq.{svc}.{proto}.backlog", backlog
    for proto in ("tcp", "tls"):
        yield f"imq.protocol.{proto}.nodelay", "true"
        yield f"imq.protocol.{proto}.inbufsz", "2048"
        yield f"imq.protocol.{proto}.outbufsz", "2048"


def declared() -> dict[str, Prop]:
    """Every property declared here by name, in declaration order."""
    return dict(_DECLARED)


def listed_defaults() -> dict[str, str]:
    """The defaults of OpenMQ's shipped ``default.properties`` (name -> text)."""
    out = {p.name: p.default for p in _DECLARED.values() if p.listed and p.default is not None}
    out.update(_service_defaults())
    return out  # type: ignore[return-value]
