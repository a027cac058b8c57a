"""A recording TCP relay between a real client and the broker's jms port.

It forwards bytes unchanged both ways and keeps them, so a test can read what the stock
C client wrote and what the broker answered on each connection.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

from broker.protocol.packet import Packet, PacketReader


@dataclass
class Recorded:
    """One relayed connection: the bytes each side wrote, in order."""

    client: bytearray = field(default_factory=bytearray)
    broker: bytearray = field(default_factory=bytearray)

    def client_packets(self) -> list[Packet]:
        return _parse(bytes(self.client))

    def broker_packets(self) -> list[Packet]:
        return _parse(bytes(self.broker))


def _parse(data: bytes) -> list[Packet]:
    packets = PacketReader(max_packet_size=1 << 30).feed(data)
    assert all(isinstance(p, Packet) for p in packets), packets
    return packets  # type: ignore[return-value]


class Relay:
    """Listen on a free loopback port and relay each connection to ``target``."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[Recorded] = []
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            rec = Recorded()
            self.connections.append(rec)
            for src, dst, buf in ((client, upstream, rec.client), (upstream, client, rec.broker)):
                t = threading.Thread(target=self._pump, args=(src, dst, buf), daemon=True)
                t.start()
                self._threads.append(t)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        try:
            while data := src.recv(1 << 16):
                buf += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # Pass the close on, so each side sees the other's EOF as it would directly.
            for s in (dst, src):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop accepting and wait until every relayed connection has ended."""
        self.server.close()
        for t in self._threads:
            t.join(30)
