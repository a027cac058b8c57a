"""The ceiling of this machine for producers that wait for each reply.

A minimal server (asyncio on uvloop, like the broker) does per message only what a store
must: it writes each 1 KB record with one ``pwrite`` into a preallocated file and, with
sync on, makes everything that arrived in one loop turn durable with ONE ``fdatasync``
(group commit) before it answers each sender with 40 bytes. Its producers are blocking
sockets, one process each, sending 1,100 bytes and waiting for the answer (the fastest
client shape measured here). A broker does more per message than this server, so what it
reaches is a practical ceiling on this machine and disk for that many waiting producers;
bench/persistent.py prints the broker's rate as a share of it.

    .venv/bin/python bench/sync_floor.py          # 1 and 8 producers, sync on and off
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import socket
import tempfile
import time
from pathlib import Path

RECORD = 1100  # a 1 KB body with its packet header, about what the store writes
_FILE_SIZE = 64 << 20


def _server(lsock: socket.socket, path: str, sync: bool, stop_at: float) -> None:
    try:
        import uvloop  # the broker's loop too; the fastest server measured here

        uvloop.install()
    except ImportError:
        pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.pwrite(fd, bytes(_FILE_SIZE), 0)  # real blocks: syncs then change no metadata
    os.fsync(fd)
    answer = b"k" * 40
    off = 0
    waiting: list[asyncio.Transport] = []

    def sync_turn() -> None:
        # One fdatasync for everything that arrived in this loop turn (group commit).
        os.fdatasync(fd)
        ready = waiting[:]
        waiting.clear()
        for t in ready:
            t.write(answer)

    class Echo(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.t = transport
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def data_received(self, data: bytes) -> None:
            nonlocal off
            if off + len(data) > _FILE_SIZE:
                off = 0
            os.pwrite(fd, data, off)
            off += len(data)
            if not sync:
                self.t.write(answer)
                return
            if not waiting:
                asyncio.get_running_loop().call_soon(sync_turn)
            waiting.append(self.t)

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Echo, sock=lsock)
        await asyncio.sleep(max(0.0, stop_at - time.time()))
        server.close()

    try:
        asyncio.run(serve())
    finally:
        os.close(fd)
        os.unlink(path)


def _producer(port: int, start: float, end: float, out) -> None:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * RECORD
    n = 0
    while time.time() < start:  # warm-up
        sock.sendall(msg)
        sock.recv(100)
    while time.time() < end:
        sock.sendall(msg)
        sock.recv(100)
        n += 1
    sock.close()
    out.put(n)


def floor_rate(producers: int, sync: bool, seconds: float = 3.0, directory=None) -> float:
    """Messages per second ``producers`` waiting producers reach against the minimal
    server, syncing (``sync``) or not; the file lives in ``directory``."""
    ctx = mp.get_context("fork")  # the children need nothing imported: fork is quickest
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(64)
    port = lsock.getsockname()[1]
    fd, path = tempfile.mkstemp(prefix=".floor-", dir=directory)
    os.close(fd)
    start = time.time() + 1.0
    end = start + seconds
    server = ctx.Process(target=_server, args=(lsock, path, sync, end + 1.0))
    server.start()
    out = ctx.Queue()
    clients = [
        ctx.Process(target=_producer, args=(port, start, end, out)) for _ in range(producers)
    ]
    for c in clients:
        c.start()
    total = sum(out.get() for _ in clients)
    for c in clients:
        c.join()
    server.join()
    lsock.close()
    Path(path).unlink(missing_ok=True)
    return total / seconds


def main() -> None:
    print("minimal server, waiting producers in processes of their own (see the docstring)")
    # Sync off is no ceiling: on a VM a round trip is quicker while the cores are busy
    # (no idle vCPU to wake), so the broker's own rates can beat this server's there.
    for sync in (True, False):
        one = floor_rate(1, sync)
        eight = floor_rate(8, sync)
        print(
            f"sync {'on ' if sync else 'off'}: 1 producer {one:9,.0f}/s;"
            f" 8 producers {eight:9,.0f}/s = {eight / one:.1f}x"
        )


if __name__ == "__main__":
    main()
