"""Broker configuration properties (docs/operators/running.md).

Layering, lowest to highest priority: :data:`DEFAULTS` (what OpenMQ's shipped
``default.properties`` gives; each property is declared once in :mod:`broker.props`), the
cluster configuration file ``imq.cluster.url`` names (read by the broker process only,
:meth:`BrokerConfig.load_cluster_file`), the instance file
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
from typing import TypeVar, overload
from urllib.parse import urlparse
from urllib.request import url2pathname

from broker import props as imq
from broker.props import DEFAULT_INSTANCE, Prop, parse_count, parse_size

__all__ = [
    "CLUSTER_URL_TIMEOUT",
    "DEFAULTS",
    "DEFAULT_INSTANCE",
    "BrokerConfig",
    "ClusterFileError",
    "ConfigError",
    "format_properties",
    "parse_properties",
]


class ConfigError(ValueError):
    """A property file or property value that cannot be used."""


class ClusterFileError(ConfigError):
    """The cluster configuration file (``imq.cluster.url``) cannot be read."""


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


# How long a cluster configuration file on a web server may take to arrive.
CLUSTER_URL_TIMEOUT = 10.0


def read_cluster_file(url: str, timeout: float = CLUSTER_URL_TIMEOUT) -> dict[str, str]:
    """The properties of the cluster configuration file at ``url``: a ``file:`` URL (or
    a plain path), or an ``http:``/``https:`` URL on a web server, as OpenMQ's guide
    describes.  Raises :class:`ClusterFileError` saying why it cannot be read."""
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    try:
        if scheme in ("http", "https"):
            from urllib.request import urlopen

            with urlopen(url, timeout=timeout) as resp:  # noqa: S310 - scheme checked
                data = resp.read()
        elif scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise ClusterFileError(
                    f"imq.cluster.url={url}: a file: URL names a local path"
                    f" (file:///path), not host {parsed.netloc!r}"
                )
            data = Path(url2pathname(parsed.path)).read_bytes()
        elif not scheme:
            data = Path(url).read_bytes()
        else:
            raise ClusterFileError(
                f"imq.cluster.url={url}: scheme {scheme!r} is not supported"
                " (file:, http: or https:)"
            )
        return parse_properties(_decode_file(data))
    except ClusterFileError:
        raise
    except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors
        raise ClusterFileError(f"imq.cluster.url={url}: cannot read it: {exc}") from None


# The defaults OpenMQ's default.properties lists, from the declarations (broker/props.py).
DEFAULTS: dict[str, str] = imq.listed_defaults()

# --------------------------------------------------------------------------------------
# BrokerConfig
# --------------------------------------------------------------------------------------

_VAR = re.compile(r"\$\{([^}]*)\}")
_INT = re.compile(r"[+-]?\d+")
_SECONDS = re.compile(r"\+?(\d+\.?\d*|\.\d+)")
T = TypeVar("T")
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
        # The cluster configuration file's properties, once load_cluster_file read them.
        self._cluster: dict[str, str] = {}
        self._cluster_read = False
        self._computed: dict[str, str] = {}
        # Bumped by every change (set, a cluster file read): what a reader that keeps
        # values derived from the properties compares (the JMX Config MBeans' answers).
        self.version = 0
        instance = self._file.get(imq.INSTANCE_NAME.name) or DEFAULT_INSTANCE
        varhome = Path(self._file.get(imq.VARHOME.name) or "var")
        self._set_instance(instance, varhome)

    # -- construction -------------------------------------------------------------------

    def _set_instance(self, instance: str, varhome: Path) -> None:
        self.version += 1
        self.instance = instance
        self.varhome = varhome
        self.instance_dir = varhome / "instances" / instance
        # Facts about where this broker lives: no layer may contradict them.
        self._computed = {
            imq.INSTANCE_NAME.name: instance,
            imq.VARHOME.name: str(varhome),
            imq.INSTANCES_HOME.name: str(varhome / "instances"),
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

    def reread(self) -> BrokerConfig:
        """This instance's properties read again from its ``config.properties`` (an
        administrator may have edited it) with the same command-line overrides, and the
        cluster configuration file again if this one read it, as a new object; this one
        is unchanged.  Raises :class:`ClusterFileError` when that file cannot be read."""
        again = BrokerConfig.load(self.instance, self.varhome, self._overrides)
        if self._cluster_read:
            again.load_cluster_file()
        return again

    def load_cluster_file(self) -> str | None:
        """Read the cluster configuration file ``imq.cluster.url`` names (as given on the
        command line or in ``config.properties``) as the layer between the defaults and
        the instance's own file: every property in it applies to this broker unless the
        broker's own configuration sets it.  Returns the URL (None when there is none);
        raises :class:`ClusterFileError` when it cannot be read, leaving the layer empty."""
        self._cluster_read = True
        self.version += 1
        self._cluster = {}
        url = self._lookup(imq.CLUSTER_URL.name, with_cluster=False)
        url = self._expand(imq.CLUSTER_URL.name, url).strip() if url else None
        if not url:
            return None
        self._cluster = read_cluster_file(url)
        self.version += 1
        return url

    @property
    def cluster_file_properties(self) -> dict[str, str]:
        """What the cluster configuration file gave (empty when none was read)."""
        return dict(self._cluster)

    def cluster_file_shadowed(self) -> list[str]:
        """The cluster configuration file's properties this broker sets itself (on its
        command line or in its ``config.properties``): its own value is the one used."""
        own = (self._computed, self._overrides, self._file)
        return sorted(n for n in self._cluster if any(n in layer for layer in own))

    # -- lookup -------------------------------------------------------------------------

    def _raw(self, name: str) -> str | None:
        return self._lookup(name, with_cluster=True)

    def _lookup(self, name: str, *, with_cluster: bool) -> str | None:
        for layer in (self._computed, self._overrides, self._file):
            if name in layer:
                return layer[name]
        if with_cluster and name in self._cluster:
            return self._cluster[name]
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

    @overload
    def get(self, name: Prop[T]) -> T: ...

    @overload
    def get(self, name: str, default: str | None = None) -> str | None: ...

    def get(self, name, default=None):  # type: ignore[no-untyped-def]
        """The value of a declared property (``get(imq.PING_INTERVAL)``: typed, with its
        declared default), or of the property named ``name`` (expanded text, ``default``
        when it is not set)."""
        if isinstance(name, Prop):
            return name.read(self)
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

    def get_seconds(self, name: str, default: float) -> float:
        """Return ``name`` as seconds (``5``, ``0.5``); :class:`ConfigError` unless it is
        a finite number not below zero."""
        value = self._get_stripped(name)
        if value is None:
            return default
        if not _SECONDS.fullmatch(value):
            raise ConfigError(f"{name}: not a number of seconds: {value!r}")
        return float(value)

    def get_bool(self, name: str, default: bool) -> bool:
        """Return ``name`` as a bool with Java ``Boolean.parseBoolean`` semantics."""
        value = self._get_stripped(name)
        if value is None:
            return default
        return value.lower() == "true"

    def get_size(self, name: str, default_bytes: int) -> int:
        """Return a SizeString property in bytes (``10m``, ``512k``, ``100b``, ``100`` =
        bytes; :func:`broker.props.parse_size`).  Negative values mean unlimited and come
        back as ``-1``; :class:`ConfigError` when it is not a size."""
        value = self._get_stripped(name)
        if value is None:
            return default_bytes
        try:
            return parse_size(value, name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def get_count(self, name: str, default: int) -> int:
        """Return a count property; negative values mean unlimited and come back as -1
        (:func:`broker.props.parse_count`); :class:`ConfigError` when not an integer."""
        value = self._get_stripped(name)
        if value is None:
            return default
        try:
            return parse_count(value, name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def get_limit(self, name: str, default: int, *, size: bool, zero: str) -> int:
        """A count or size limit (:class:`broker.props.Limit`): -1 for no limit, and 0 as
        ``zero`` says (``unlimited``, ``refused``: :class:`ConfigError`, or ``zero``)."""
        number = self.get_size(name, default) if size else self.get_count(name, default)
        if number == 0:
            if zero == "unlimited":
                return imq.UNLIMITED
            if zero == "refused":
                raise ConfigError(f"{name}: 0 is not allowed (-1 for no limit)")
        return number

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
        self.version += 1

    @property
    def instance_file(self) -> Path:
        """The instance's ``config.properties`` path."""
        return self.instance_dir / "props" / "config.properties"

    def save_instance_file(self) -> None:
        """Write instance-layer properties that differ from :data:`DEFAULTS`."""
        changed = {k: v for k, v in self._file.items() if DEFAULTS.get(k) != v}
        for key in (imq.INSTANCE_NAME.name, imq.VARHOME.name):
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
        for layer in (self._cluster, self._file, self._overrides, self._computed):
            seen.update(dict.fromkeys(layer))
        return iter(seen)

    def as_dict(self) -> dict[str, str]:
        """Return all effective properties, expanded (for imqcmd query / getConfiguration)."""
        return {name: self.get(name) or "" for name in self.names()}

    def configured_names(self) -> dict[str, str]:
        """Every property set above the defaults, with where it was set (the highest layer
        that sets it): ``on the command line`` (``-D``), ``in config.properties`` (the
        instance's file) or ``in the cluster configuration file``."""
        out: dict[str, str] = {}
        for where, layer in (
            ("on the command line", self._overrides),
            ("in config.properties", self._file),
            ("in the cluster configuration file", self._cluster),
        ):
            for name in layer:
                out.setdefault(name, where)
        return out

    def configured(self, name: str) -> bool:
        """Whether ``name`` is set above the defaults (the instance file, ``-D``)."""
        return any(name in layer for layer in (self._computed, self._overrides, self._file))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._raw(name) is not None

    def __repr__(self) -> str:
        return f"BrokerConfig(instance={self.instance!r}, varhome={str(self.varhome)!r})"
