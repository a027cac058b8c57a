"""The inventory of broker properties (broker/props.py) against the stock broker's own
``default.properties`` and the code that reads them.

* every property the stock OpenMQ 6.9 broker's ``default.properties`` lists (and the
  administrator's guide's names below) has a status here: honoured, honoured
  differently (saying how) or not supported (saying why);
* every property declared honoured (or honoured differently) is read by something in
  broker/: its declaration is referred to, its name appears as a string, an f-string
  ``imq.{...}.name`` pattern or a ``service_prop(x, "suffix")`` call matches it, or it
  is expanded (``${name}``) in another declaration's default.  A property declared and
  never read must be declared :class:`~broker.props.Ignored` (and is then warned about
  at start) instead.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from broker import props
from broker.config import DEFAULTS, parse_properties
from broker.launcher import REALBROKER, ROOT

pytestmark = pytest.mark.fast

STOCK_DEFAULTS = REALBROKER / "mq" / "lib" / "props" / "broker" / "default.properties"
STOCK_INSTALL = REALBROKER / "mq" / "lib" / "props" / "broker" / "install.properties"

# Named by OpenMQ's administrator's guide (../shared/spec/broker-properties.md) and not
# in the stock default.properties: one instance of each pattern it gives.
GUIDE_NAMES = (
    "imq.adminkey",
    "imq.accesscontrol.file.url",
    "imq.persist.jdbc.dbVendor",
    "imq.persist.jdbc.mysql.opendburl",
    "imq.persist.jdbc.mysql.user",
    "imq.persist.jdbc.mysql.password",
    "imq.persist.jdbc.mysql.needpassword",
    "imq.persist.jdbc.connection.limit",
    "imq.cluster.heartbeat.hostname",
    "imq.cluster.heartbeat.port",
    "imq.cluster.ha",
    "imq.cluster.clusterid",
    "imq.cluster.url",
    "imq.cluster.brokerlist",
    "imq.cluster.masterbroker",
    "imq.cluster.hostname",
    "imq.user_repository.ldap.server",
    "imq.user_repository.ldap.base",
    "imq.log.file.rolloverbytes",
    "imq.log.file.dirpath",
    "imq.log.file.filename",
    "imq.log.destination.topic",
    "imq.log.destination.capacity",
    "imq.jms.tcp.hostname",
    "imq.ssljms.tls.port",
    "imq.admin.authentication.type",
    "imq.jms.authentication.digest.user_repository",
    "imq.keystore.password",
    "imq.brokerid",
    "imq.hostname",
    "imq.queue.deliverypolicy",
)


# A comment line of the stock default.properties that lost its "#" (it reads as a
# property named so, with an empty value).
NOT_A_PROPERTY = "(LogHandlers)."


def _stock_names() -> list[str]:
    if not STOCK_DEFAULTS.is_file():
        pytest.fail(f"the stock broker's default.properties is missing: {STOCK_DEFAULTS}")
    names = list(parse_properties(STOCK_DEFAULTS.read_text(encoding="latin-1")))
    if STOCK_INSTALL.is_file():
        names += parse_properties(STOCK_INSTALL.read_text(encoding="latin-1"))
    return [n for n in names if n != NOT_A_PROPERTY]


def _status(name: str) -> tuple[str, str] | None:
    found = props.classify(name)
    return None if found is None else (found.status, found.why)


def test_every_stock_property_has_a_status() -> None:
    names = _stock_names()
    assert len(names) > 300  # the whole file was read
    missing = [n for n in names if _status(n) is None]
    assert not missing, f"stock properties without a status in broker/props.py: {missing}"


def test_every_property_of_the_guide_has_a_status() -> None:
    missing = [n for n in GUIDE_NAMES if _status(n) is None]
    assert not missing, missing


def test_what_is_not_honoured_says_why() -> None:
    for prop in props.declared().values():
        if prop.status != props.HONOURED:
            assert len(prop.why) > 15, prop
    for family in props.families():
        if family.status != props.HONOURED:
            assert len(family.why) > 15, family


def test_the_shipped_defaults_are_classified() -> None:
    # What imqcmd query bkr lists: each a declaration or a family.
    assert [n for n in DEFAULTS if props.classify(n) is None] == []


# -- who reads what ----------------------------------------------------------------------

# An f-string pattern counts as a reader when it carries this many letters besides
# "imq" ("imq.{service}.{suffix}" reads anything, so it names nothing).
_MIN_LETTERS = 5


_IDENTIFIER = re.compile(r"\b[A-Z][A-Z0-9_]*\b")  # props' bindings are upper case
_STRING = re.compile(r"""(?<![A-Za-z0-9_])([fr]?)(["'])([^"'\n]*)\2""")
_SERVICE_PROP = re.compile(r"""service_prop\(\s*[^,()]+,\s*(f?)(["'])([^"'\n]+)\2""")
_COMMENT = re.compile(r"^\s*#.*$", re.MULTILINE)


class _Readers:
    """What broker/ (but props.py) refers to: upper-case identifiers, string literals,
    f-string name patterns and service_prop suffixes.  Read with regular expressions
    (comment lines left out): parsing every module would cost seconds of the fast tier."""

    def __init__(self) -> None:
        self.identifiers: set[str] = set()
        self.strings: set[str] = set()
        self.patterns: list[re.Pattern[str]] = []
        for path in sorted((ROOT / "broker").rglob("*.py")):
            if path == ROOT / "broker" / "props.py":
                continue
            self._scan(_COMMENT.sub("", path.read_text(encoding="utf-8")))

    def _scan(self, text: str) -> None:
        self.identifiers.update(_IDENTIFIER.findall(text))
        for prefix, _quote, body in _STRING.findall(text):
            if prefix != "f":
                self.strings.add(body)
                continue
            regex, letters = _pattern(body)
            if regex.startswith(r"imq\.") and letters >= _MIN_LETTERS:
                self.patterns.append(re.compile(regex))
        for prefix, _quote, suffix in _SERVICE_PROP.findall(text):
            pattern = _pattern(suffix)[0] if prefix else re.escape(suffix)
            self.patterns.append(re.compile(r"imq\.[^.]+\." + pattern))

    def reads(self, name: str, bindings: set[str]) -> bool:
        return (
            bool(bindings & self.identifiers)
            or name in self.strings
            or any(p.fullmatch(name) for p in self.patterns)
        )


def _pattern(fstring: str) -> tuple[str, int]:
    """An f-string's text as a pattern of the names it makes (each {...} one name part),
    and how many letters it fixes besides a leading "imq"."""
    parts = re.split(r"\{[^{}]*\}", fstring)
    regex = "[^.]+".join(re.escape(part) for part in parts)
    letters = sum(c.isalpha() for part in parts for c in part)
    return regex, letters - (3 if fstring.startswith("imq.") else 0)


@cache
def _readers() -> _Readers:
    return _Readers()


def _bindings() -> dict[int, set[str]]:
    """props' public names by the id of what they are bound to (a declaration, or a
    dict/list/tuple of them, or a family's prefix)."""
    out: dict[int, set[str]] = {}
    for key, value in vars(props).items():
        if key.startswith("_"):
            continue
        members: list[object] = [value]
        inner = list(value.values()) if isinstance(value, dict) else value
        if isinstance(inner, list | tuple):
            for item in inner:
                # (a dict of pairs: TUNNEL_PROPS)
                members += item if isinstance(item, tuple) else [item]
        for member in members:
            out.setdefault(id(member), set()).add(key)
        for family in props.families():
            if value == family.prefix and isinstance(value, str):
                out.setdefault(id(family), set()).add(key)
    return out


def _sample(family: props.Family) -> str:
    return (
        family.pattern.replace("<service>", "jms")
        .replace("<proto>", "tcp")
        .replace("<any>", "digest")
        .replace("*", "server")
    )


def test_honoured_properties_are_read() -> None:
    readers, bindings = _readers(), _bindings()
    expanded = {
        m for p in props.declared().values() for m in re.findall(r"\$\{([^}]+)\}", p.default or "")
    }
    read_families = [
        f
        for f in props.families()
        if f.status != props.IGNORED and readers.reads(_sample(f), bindings.get(id(f), set()))
    ]
    unread = []
    for name, prop in props.declared().items():
        if prop.status == props.IGNORED or name in expanded:
            continue
        if readers.reads(name, bindings.get(id(prop), set())):
            continue
        if any(f.matches(name) for f in read_families):
            continue  # read with its family (the LDAP repository's timeout)
        unread.append(name)
    assert not unread, (
        f"declared honoured, read by nothing in broker/: {unread} "
        "(read them, or declare them Ignored with the reason)"
    )
    unread_families = [
        f.pattern for f in props.families() if f.status != props.IGNORED and f not in read_families
    ]
    assert not unread_families, unread_families


def test_the_reader_check_sees_an_unread_declaration() -> None:
    # The check itself: a name no code mentions is not taken for read.
    assert not _readers().reads("imq.nothing.reads.this", {"NOTHING_READS_THIS"})
    assert _readers().reads(props.PING_INTERVAL.name, {"PING_INTERVAL"})


def test_the_properties_reference_names_what_is_not_honoured() -> None:
    # docs/reference/properties.md lists every property honoured differently or not
    # supported, by its declared name or pattern.
    text = (ROOT / "docs" / "reference" / "properties.md").read_text(encoding="utf-8")
    names = [p.name for p in props.declared().values() if p.status != props.HONOURED]
    names += [f.pattern for f in props.families() if f.status != props.HONOURED]
    assert [n for n in names if f"| `{n}` |" not in text] == []
