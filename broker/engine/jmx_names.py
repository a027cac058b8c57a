"""javax.management.ObjectName's grammar, as far as the served calls need it: parsing,
the canonical form (keys sorted) and pattern matching for queryNames/queryMBeans."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from broker.protocol.errors import ProtocolError


class MalformedObjectName(ProtocolError):
    """Not an ObjectName (Java would throw MalformedObjectNameException)."""


@dataclass(frozen=True, slots=True)
class ObjectName:
    domain: str
    keys: tuple[tuple[str, str], ...]  # sorted by key
    property_pattern: bool = False  # ",*" at the end: other keys may follow
    # The canonical form and the hash, made once (a poll names the same MBeans again
    # and again, and looks each name up in several tables).
    _canonical: str | None = field(default=None, init=False, compare=False, repr=False)
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __hash__(self) -> int:
        h = self._hash
        if not h:
            h = hash((self.domain, self.keys, self.property_pattern)) or 1
            object.__setattr__(self, "_hash", h)
        return h

    @classmethod
    def parse(cls, text: str) -> ObjectName:
        domain, sep, rest = text.partition(":")
        if not sep:
            raise MalformedObjectName(f"no ':' in object name {text!r}")
        keys: dict[str, str] = {}
        pattern = False
        for part in rest.split(",") if rest else []:
            if part == "*":
                pattern = True
                continue
            key, eq, value = part.partition("=")
            if not eq or not key or key in keys:
                raise MalformedObjectName(f"bad key property {part!r} in {text!r}")
            keys[key] = value
        if not keys and not pattern:
            raise MalformedObjectName(f"object name {text!r} has no key properties")
        return cls(domain, tuple(sorted(keys.items())), pattern)

    @property
    def canonical(self) -> str:
        text = self._canonical
        if text is None:
            props = ",".join(f"{k}={v}" for k, v in self.keys)
            if self.property_pattern:
                props = f"{props},*" if props else "*"
            text = f"{self.domain}:{props}"
            object.__setattr__(self, "_canonical", text)
        return text

    @property
    def is_pattern(self) -> bool:
        return self.property_pattern or any(c in self.domain for c in "*?")

    def matches(self, name: ObjectName) -> bool:
        """Whether ``name`` (not a pattern) is one this pattern selects."""
        if not fnmatchcase(name.domain, self.domain or "*"):
            return False
        theirs = dict(name.keys)
        for key, value in self.keys:
            if theirs.get(key) != value:
                return False
        return self.property_pattern or len(theirs) == len(self.keys)
