"""The port mapper's text protocol (docs/developers/protocol.md, "The port mapper").

The client writes its version line (``101``); the broker answers with a table of its
services and a ``.`` line.  Both directions are plain US-ASCII with ``\\n`` line ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ProtocolError

PORTMAPPER_VERSION = "101"
MAX_REQUEST_LINE = 128


class PortMapperError(ProtocolError):
    """A table or request line that does not follow the port-mapper protocol."""


@dataclass
class ServiceEntry:
    """One line of the table: ``<name> <protocol> <type> <port> [k=v,...]``."""

    name: str
    protocol: str
    type: str
    port: int
    properties: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        text = f"{self.name} {self.protocol} {self.type} {self.port}"
        if self.properties:
            props = ",".join(f"{k}={v}" for k, v in self.properties.items())
            text += f" [{props}]"
        return text


@dataclass
class PortMapperTable:
    """What the port mapper tells a client: the broker instance and its services."""

    instance: str
    packet_version: str
    services: list[ServiceEntry]

    def encode(self) -> bytes:
        lines = [f"{PORTMAPPER_VERSION} {self.instance} {self.packet_version}"]
        lines.extend(s.line() for s in self.services)
        lines.append(".")
        return ("\n".join(lines) + "\n").encode("ascii")

    def find(
        self, service_type: str = "NORMAL", protocol: str = "tcp", name: str | None = None
    ) -> ServiceEntry | None:
        """The service a client would pick: by name if given, else the first of the type."""
        for s in self.services:
            if name is not None:
                if s.name == name:
                    return s
            elif s.protocol == protocol and s.type == service_type:
                return s
        return None


def parse_table(data: bytes) -> PortMapperTable:
    """Parse a port-mapper reply as the Java client does."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as exc:
        raise PortMapperError("port mapper reply is not ASCII") from exc
    lines = text.split("\n")
    head = lines[0].split()
    if len(head) < 3 or head[0] != PORTMAPPER_VERSION:
        raise PortMapperError(f"bad port mapper header {lines[0]!r}")
    services = []
    for line in lines[1:]:
        line = line.strip()
        if line == ".":
            break
        if not line:
            continue
        props: dict[str, str] = {}
        # Four words, then the properties in brackets: a word may hold brackets itself
        # (OpenMQ's STOMP bridge: "stomp[bridge] stomp[TCP] stomp[bridge] 7672").
        parts = line.split(None, 4)
        if len(parts) < 4:
            raise PortMapperError(f"bad service line {line!r}")
        if len(parts) == 5 and parts[4].startswith("["):
            for item in parts[4].strip()[1:].rstrip("]").split(","):
                if "=" in item:
                    k, _, v = item.partition("=")
                    props[k.strip()] = v.strip()
        try:
            port = int(parts[3])
        except ValueError as exc:
            raise PortMapperError(f"bad port in {line!r}") from exc
        services.append(ServiceEntry(parts[0], parts[1], parts[2], port, props))
    return PortMapperTable(head[1], head[2], services)


def encode_request() -> bytes:
    """What a client writes on the port-mapper connection."""
    return (PORTMAPPER_VERSION + "\n").encode("ascii")
