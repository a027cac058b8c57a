"""Broker configuration properties (spec/broker-properties.md).

Layering, lowest to highest priority: :data:`DEFAULTS` (what OpenMQ's shipped
``default.properties`` and broker code give), the instance file
``<varhome>/instances/<instance>/props/config.properties``, then command-line
overrides (``-D name=value``).  Values are strings, as in Java; typed getters parse
them on demand and ``${imq.x}`` variables expand at lookup, so an override of
``imq.instancename`` is seen by every property that refers to it.

No Django import: the broker runtime, tests and tools use this directly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "DEFAULTS",
    "DEFAULT_INSTANCE",
    "BrokerConfig",
    "ConfigError",
    "format_properties",
    "parse_properties",
]

DEFAULT_INSTANCE = "imqbroker"


class ConfigError(ValueError):
    """A property file or property value that cannot be used."""


# --------------------------------------------------------------------------------------
# Java .properties syntax
# --------------------------------------------------------------------------------------

_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= n:
            # A lone trailing backslash (continuation at EOF) contributes nothing.
            break
        c = s[i]
        if c == "u":
            hexdigits = s[i + 1 : i + 5]
            if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ConfigError(f"malformed \\uxxxx encoding: \\u{hexdigits}")
            out.append(chr(int(hexdigits, 16)))
            i += 5
        else:
            # \t \n \r \f are control characters; any other escaped character is itself.
            out.append(_ESCAPES.get(c, c))
            i += 1
    return "".join(out)


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    n = len(line)
    i = 0
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WS:
        j += 1
    # One '=' or ':' may follow the key, with or without surrounding whitespace.
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WS:
            j += 1
    return key, line[j:]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules).

    ``#``/``!`` comment lines, ``=``/``:``/whitespace separators, backslash line
    continuation (leading whitespace of the next line dropped), ``\\uXXXX`` and other
    escapes.  Later duplicates win.  ``${...}`` is left alone: it expands at lookup.
    """
    props: dict[str, str] = {}
    lines = _LINE_SPLIT.split(text)
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_odd_backslashes(line):
            line = line[:-1]
            if i >= n:
                break
            line += lines[i].lstrip(_WS)
            i += 1
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            # ASCII-only output reads the same as ISO-8859-1 (Java) and as UTF-8.
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(c))
        else:
            out.append(c)
    return "".join(out)


def _utf16_units(c: str) -> list[int]:
    data = c.encode("utf-16-be")
    return [int.from_bytes(data[k : k + 2], "big") for k in range(0, len(data), 2)]


def format_properties(props: Mapping[str, str], header: str | None = None) -> str:
    """Render ``props`` as ``.properties`` text (sorted keys, ASCII with escapes)."""
    lines: list[str] = []
    if header:
        lines.extend("#" + h for h in header.splitlines())
    lines.extend(
        f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in sorted(props.items())
    )
    return "\n".join(lines) + "\n"


def _decode_file(data: bytes) -> str:
    # Java reads these files as ISO-8859-1; people edit them as UTF-8.  Accept both.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


# --------------------------------------------------------------------------------------
# Defaults (spec/broker-properties.md; where file and code differ, the file value)
# --------------------------------------------------------------------------------------

_INSTANCE_DIR = "${imq.instanceshome}${/}${imq.instancename}"


def _service_defaults() -> dict[str, str]:
    # (service, protocol type, service type, backlog, min threads, max threads)
    services = [
        ("jms", "tcp", "NORMAL", "100", "10", "1000"),
        ("admin", "tcp", "ADMIN", "5", "4", "10"),
        ("ssljms", "tls", "NORMAL", "100", "10", "1000"),
        ("ssladmin", "tls", "ADMIN", "5", "4", "10"),
        ("httpjms", "http", "NORMAL", None, "10", "1000"),
        ("httpsjms", "https", "NORMAL", None, "10", "1000"),
        ("wsjms", "ws", "NORMAL", None, "10", "1000"),
        ("wssjms", "wss", "NORMAL", None, "10", "1000"),
    ]
    d: dict[str, str] = {}
    for svc, proto, stype, backlog, tmin, tmax in services:
        d[f"imq.{svc}.protocoltype"] = proto
        d[f"imq.{svc}.servicetype"] = stype
        d[f"imq.{svc}.min_threads"] = tmin
        d[f"imq.{svc}.max_threads"] = tmax
        d[f"imq.{svc}.threadpool_model"] = "dedicated"
        if backlog is not None:
            # Socket services only; the HTTP/WebSocket ones ride on a web container.
            d[f"imq.{svc}.{proto}.port"] = "0"
            d[f"imq.{svc}.{proto}.backlog"] = backlog
    for proto in ("tcp", "tls"):
        d[f"imq.protocol.{proto}.nodelay"] = "true"
        d[f"imq.protocol.{proto}.inbufsz"] = "2048"
        d[f"imq.protocol.{proto}.outbufsz"] = "2048"
    return d


DEFAULTS: dict[str, str] = {
    # --- instance layout (computed values are set by BrokerConfig itself)
    "imq.instancename": DEFAULT_INSTANCE,
    # The Java broker points this at the installation's etc; a Python install has
    # none, so it is the instance's etc directory.
    "imq.etchome": _INSTANCE_DIR + "${/}etc",
    # --- connection services and port mapper
    "imq.service.list": "jms,admin,ssljms,httpjms,httpsjms,ssladmin,wsjms,wssjms",
    "imq.service.activelist": "jms,admin",
    **_service_defaults(),
    "imq.portmapper.port": "7676",
    "imq.portmapper.backlog": "50",
    "imq.portmapper.sotimeout": "500",
    "imq.portmapper.bind": "true",
    "imq.portmapper.solinger": "-1",
    "imq.portunif.enabled": "false",
    "imq.ping.enabled": "true",
    "imq.ping.interval": "120",
    "imq.ping.reply.enable": "true",
    "imq.ping.close.interval": "5",
    "imq.authentication.client.response.timeout": "180",
    # --- destinations and auto-creation
    "imq.autocreate.queue": "true",
    "imq.autocreate.topic": "true",
    "imq.autocreate.reaptime": "120",
    "imq.autocreate.queue.maxNumActiveConsumers": "-1",
    "imq.autocreate.queue.maxNumBackupConsumers": "0",
    "imq.autocreate.queue.consumerFlowLimit": "1000",
    "imq.autocreate.topic.consumerFlowLimit": "1000",
    "imq.autocreate.queue.localDeliveryPreferred": "false",
    "imq.autocreate.topic.maxNumSharedConsumers": "-1",
    "imq.autocreate.topic.sharedConsumerFlowLimit": "5",
    "imq.autocreate.destination.maxNumMsgs": "100000",
    "imq.autocreate.destination.maxTotalMsgBytes": "10240m",
    "imq.autocreate.destination.maxBytesPerMsg": "10m",
    "imq.autocreate.destination.maxNumProducers": "100",
    "imq.autocreate.destination.limitBehavior": "REJECT_NEWEST",
    "imq.autocreate.destination.useDMQ": "true",
    "imq.autocreate.destination.isLocalOnly": "false",
    "imq.producer.maxBatch": "1000",
    "imq.destination.expireDeliveredMessages": "false",
    "imq.destination.purgeDeliveredMessages": "false",
    # --- dead message queue
    "imq.destination.DMQ.truncateBody": "false",
    "imq.destination.logDeadMsgs": "false",
    # --- messages, memory, transactions
    "imq.message.expiration.interval": "60",
    "imq.system.max_count": "-1",
    "imq.system.max_size": "-1",
    "imq.message.max_size": "70m",
    "imq.memory.levels": "green,yellow,orange,red",
    "imq.green.threshold": "0",
    "imq.yellow.threshold": "80",
    "imq.orange.threshold": "90",
    "imq.red.threshold": "98",
    "imq.green.count": "5000",
    "imq.yellow.count": "500",
    "imq.orange.count": "50",
    "imq.red.count": "0",
    "imq.memory.overhead": "10240",
    "imq.transaction.autorollback": "false",
    "imq.transaction.detachedTimeout": "0",
    "imq.transaction.producer.maxNumMsgs": "1000",
    "imq.transaction.consumer.maxNumMsgs": "100",
    "imq.fix.JMSMessageID": "true",
    # --- persistence
    "imq.persist.store": "file",
    "imq.persist.file.sync.enabled": "false",
    "imq.persist.file.message.max_record_size": "1m",
    "imq.persist.file.message.vrfile.initial_size": "1m",
    "imq.persist.file.message.vrfile.block_size": "256",
    "imq.persist.file.message.filepool.cleanratio": "0",
    "imq.persist.file.destination.message.filepool.limit": "100",
    "imq.persist.file.message.cleanup": "false",
    "imq.persist.file.transaction.memorymappedfile.enabled": "true",
    "imq.persist.file.txnLog.nonTransactedMsgSend.enabled": "false",
    "imq.persist.file.txnLog.file.size": "10m",
    "imq.persist.storecreate.all": "true",
    # --- security
    "imq.authentication.type": "digest",
    # Ours: the shared database's users (OpenMQ's default is the passwd "file").
    "imq.authentication.basic.user_repository": "database",
    "imq.authentication.digest.user_repository": "database",
    "imq.user_repository.file.filename": "passwd",
    "imq.user_repository.file.dirpath": _INSTANCE_DIR + "${/}etc",
    "imq.user_repository.ldap.timeout": "180",
    "imq.accesscontrol.enabled": "true",
    "imq.accesscontrol.type": "file",
    "imq.accesscontrol.file.filename": "accesscontrol.properties",
    "imq.accesscontrol.file.dirpath": _INSTANCE_DIR + "${/}etc",
    "imq.keystore.file.dirpath": "${imq.etchome}",
    "imq.keystore.file.name": "keystore",
    "imq.passfile.enabled": "false",
    "imq.passfile.dirpath": "${imq.etchome}",
    "imq.passfile.name": "passfile",
    # --- logging
    "imq.log.level": "INFO",
    "imq.log.file.dirpath": _INSTANCE_DIR + "${/}log",
    "imq.log.file.filename": "log.txt",
    "imq.log.file.output": "ALL",
    "imq.log.file.rolloversize": "-1",
    "imq.log.file.rolloversecs": "604800",
    "imq.log.console.output": "ERROR|WARNING",
    "imq.log.console.stream": "ERR",
    "imq.log.syslog.facility": "LOG_DAEMON",
    "imq.log.syslog.identity": "imqbrokerd_${imq.instancename}",
    "imq.log.syslog.output": "ERROR",
    "imq.log.destination.output": "WARNING",
    "imq.log.destination.timetolive": "300",
    "imq.log.destination.persist": "false",
    "imq.log.jmx.output": "ALL",
    # Not OpenMQ: the shared-database log table behind the portal (broker/logsetup.py).
    "imq.log.database.enabled": "true",
    "imq.log.database.output": "WARNING",
    # --- metrics
    "imq.metrics.enabled": "true",
    "imq.metrics.interval": "0",
    "imq.metrics.topic.enabled": "true",
    "imq.metrics.topic.interval": "60",
    "imq.metrics.topic.persist": "false",
    "imq.metrics.topic.timetolive": "300",
    "imq.restart.code": "255",
    # --- cluster
    "imq.cluster.nomasterbroker": "false",
    "imq.cluster.port": "0",
    "imq.cluster.transport": "tcp",
    "imq.cluster.ha": "false",
    "imq.cluster.consumerFlowLimit": "1000",
    "imq.cluster.ping.interval": "60",
    "imq.cluster.heartbeat.interval": "5",
    "imq.cluster.heartbeat.threshold": "3",
    "imq.cluster.monitor.interval": "30",
    "imq.cluster.monitor.threshold": "3",
    "imq.cluster.locktimeout": "60",
    "imq.cluster.waitReplyTimeout": "180",
    "imq.cluster.nowaitForMasterBroker": "false",
    "imq.cluster.dynamicChangeMasterBrokerEnabled": "false",
}

# --------------------------------------------------------------------------------------
# BrokerConfig
# --------------------------------------------------------------------------------------

_VAR = re.compile(r"\$\{([^}]*)\}")
_INT = re.compile(r"[+-]?\d+")
_SIZE = re.compile(r"([+-]?\d+)\s*([bkm]?)", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024 * 1024}
_INT32_MAX = 2**31 - 1
_MAX_EXPANSION_DEPTH = 32


class BrokerConfig:
    """The effective broker properties of one instance.

    ``props`` are layered over :data:`DEFAULTS` and act as the instance-file layer
    (what :meth:`save_instance_file` writes back).  Use :meth:`load` to read an
    instance's ``config.properties`` and apply command-line overrides.
    """

    instance: str
    varhome: Path
    instance_dir: Path

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self._file: dict[str, str] = dict(props or {})
        self._overrides: dict[str, str] = {}
        self._computed: dict[str, str] = {}
        instance = self._file.get("imq.instancename") or DEFAULT_INSTANCE
        varhome = Path(self._file.get("imq.varhome") or "var")
        self._set_instance(instance, varhome)

    # -- construction -------------------------------------------------------------------

    def _set_instance(self, instance: str, varhome: Path) -> None:
        self.instance = instance
        self.varhome = varhome
        self.instance_dir = varhome / "instances" / instance
        # Facts about where this broker lives: no layer may contradict them.
        self._computed = {
            "imq.instancename": instance,
            "imq.varhome": str(varhome),
            "imq.instanceshome": str(varhome / "instances"),
        }

    @classmethod
    def load(
        cls,
        instance: str,
        varhome: Path,
        overrides: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Read ``<varhome>/instances/<instance>/props/config.properties`` (if present)
        over :data:`DEFAULTS`, then apply ``overrides`` (``-D`` on the command line)."""
        varhome = Path(varhome)
        path = varhome / "instances" / instance / "props" / "config.properties"
        file_props: dict[str, str] = {}
        if path.exists():
            try:
                file_props = parse_properties(_decode_file(path.read_bytes()))
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from exc
            except OSError as exc:
                raise ConfigError(f"{path}: cannot read: {exc}") from exc
        config = cls(file_props)
        config._overrides = dict(overrides or {})
        config._set_instance(instance, varhome)
        return config

    # -- lookup -------------------------------------------------------------------------

    def _raw(self, name: str) -> str | None:
        for layer in (self._computed, self._overrides, self._file):
            if name in layer:
                return layer[name]
        return DEFAULTS.get(name)

    def _expand(self, name: str, value: str, depth: int = 0) -> str:
        if "${" not in value:
            return value
        if depth > _MAX_EXPANSION_DEPTH:
            raise ConfigError(f"{name}: variable expansion too deep (cycle?) in {value!r}")

        def repl(m: re.Match[str]) -> str:
            var = m.group(1)
            if var == "/":
                return os.sep
            raw = self._raw(var)
            if raw is None:
                # Like OpenMQ: an unknown variable stays as written.
                return m.group(0)
            return self._expand(name, raw, depth + 1)

        return _VAR.sub(repl, value)

    def get(self, name: str, default: str | None = None) -> str | None:
        """Return the expanded value of ``name``, or ``default`` when it is not set."""
        raw = self._raw(name)
        if raw is None:
            return default
        return self._expand(name, raw)

    def _get_stripped(self, name: str) -> str | None:
        value = self.get(name)
        if value is None:
            return None
        value = value.strip()
        # "imq.x=" in a file means "not configured", not "parse the empty string".
        return value or None

    def get_int(self, name: str, default: int) -> int:
        """Return ``name`` as an int; raise :class:`ConfigError` if it is not one."""
        value = self._get_stripped(name)
        if value is None:
            return default
        if not _INT.fullmatch(value):
            raise ConfigError(f"{name}: not an integer: {value!r}")
        return int(value)

    def get_bool(self, name: str, default: bool) -> bool:
        """Return ``name`` as a bool with Java ``Boolean.parseBoolean`` semantics."""
        value = self._get_stripped(name)
        if value is None:
            return default
        return value.lower() == "true"

    def get_size(self, name: str, default_bytes: int) -> int:
        """Return a SizeString property in bytes (``10m``, ``512k``, ``100`` = bytes).

        Negative values mean unlimited and come back as ``-1``.
        """
        value = self._get_stripped(name)
        if value is None:
            return default_bytes
        m = _SIZE.fullmatch(value)
        if not m:
            raise ConfigError(f"{name}: not a size (number with optional b/k/m): {value!r}")
        number = int(m.group(1))
        if number > _INT32_MAX or number < -_INT32_MAX - 1:
            # Java parses the number part as an int: "10g" is spelled "10240m".
            raise ConfigError(f"{name}: size number out of range: {value!r}")
        if number < 0:
            return -1
        return number * _SIZE_UNITS[m.group(2).lower()]

    def get_list(self, name: str, default: list[str] | None = None) -> list[str]:
        """Return a comma-separated property as a list of trimmed, non-empty items."""
        value = self.get(name)
        if value is None:
            return list(default) if default is not None else []
        return [item.strip() for item in value.split(",") if item.strip()]

    def service_prop(self, service: str, suffix: str, default: str | None = None) -> str | None:
        """Return ``imq.<service>.<suffix>`` (e.g. ``service_prop("jms", "tcp.port")``).

        No fall-back to the broker-wide ``imq.<suffix>``: pass it as ``default``.
        """
        return self.get(f"imq.{service}.{suffix}", default)

    # -- update -------------------------------------------------------------------------

    def set(self, name: str, value: str) -> None:
        """Set ``name`` at run time; it is written by :meth:`save_instance_file`."""
        if name in self._computed:
            raise ConfigError(f"{name}: fixed by the broker instance, cannot be set")
        self._file[name] = str(value)
        # An admin update outranks the -D value the broker was started with.
        self._overrides.pop(name, None)

    @property
    def instance_file(self) -> Path:
        """The instance's ``config.properties`` path."""
        return self.instance_dir / "props" / "config.properties"

    def save_instance_file(self) -> None:
        """Write instance-layer properties that differ from :data:`DEFAULTS`."""
        changed = {k: v for k, v in self._file.items() if DEFAULTS.get(k) != v}
        for key in ("imq.instancename", "imq.varhome"):
            changed.pop(key, None)
        path = self.instance_file
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
        text = format_properties(changed, header=f"Broker instance properties\n{stamp}")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="ascii")
        os.replace(tmp, path)

    # -- introspection ------------------------------------------------------------------

    def names(self) -> Iterator[str]:
        """Iterate over every property name that has a value."""
        seen = dict.fromkeys(DEFAULTS)
        for layer in (self._file, self._overrides, self._computed):
            seen.update(dict.fromkeys(layer))
        return iter(seen)

    def as_dict(self) -> dict[str, str]:
        """Return all effective properties, expanded (for imqcmd query / getConfiguration)."""
        return {name: self.get(name) or "" for name in self.names()}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._raw(name) is not None

    def __repr__(self) -> str:
        return f"BrokerConfig(instance={self.instance!r}, varhome={str(self.varhome)!r})"
