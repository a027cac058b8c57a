"""UMS gateway throughput over HTTP: sends/s and receives/s through /ums/simple with 1 and
50 concurrent HTTP clients, then 1,000 clients long-polling a receive at once (errors and
the portal process's memory).

Starts redis + a broker + daphne (tests/portal_server.py) and the UMS gateway process
(uvicorn, as ``manage.py up`` runs it; tests/ums_stack.py) unless ``--url`` names a running
one, and measures the gateway, or with ``--via portal`` daphne's /ums/ (the same lean ASGI
path in front of Django).  The HTTP clients are plain asyncio keep-alive connections
(HTTP/1.1), so the client side costs little next to the gateway.

    .venv/bin/python bench/ums.py [--seconds 10] [--pollers 1000] [--via gateway|portal]
                                  [--clients 1,50] [--url http://...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class HttpConn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        assert self.reader is not None and self.writer is not None
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        data = await self.reader.readexactly(n) if n else b""
        return status, headers, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def run_phase(
    host, port, clients: int, seconds: float, make_path, body: bytes
) -> tuple[int, int, int]:
    """(ok, empty receives, errors) with ``clients`` connections for ``seconds``."""
    counts = [0, 0, 0]
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        c = HttpConn(host, port)
        await c.open()
        try:
            while time.monotonic() < deadline:
                status, headers, _ = await c.post(make_path(), body)
                if status != 200:
                    counts[2] += 1
                elif headers.get("ums.status") == "404":
                    counts[1] += 1
                else:
                    counts[0] += 1
        finally:
            c.close()

    await asyncio.gather(*(worker() for _ in range(clients)))
    return counts[0], counts[1], counts[2]


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def long_poll(host, port, n: int, timeout_ms: int, pid: int | None) -> None:
    dest = f"poll_{uuid.uuid4().hex[:8]}"
    conns = [HttpConn(host, port) for _ in range(n)]
    await asyncio.gather(*(c.open() for c in conns))
    before = rss_kb(pid) if pid else 0
    path = f"/ums/simple?service=receive&destination={dest}&timeout={timeout_ms}"
    start = time.monotonic()
    tasks = [asyncio.create_task(c.post(path)) for c in conns]
    await asyncio.sleep(timeout_ms / 2000)
    during = rss_kb(pid) if pid else 0
    results = await asyncio.gather(*tasks, return_exceptions=True)
    took = time.monotonic() - start
    errors = sum(1 for r in results if isinstance(r, BaseException) or r[0] != 200)
    empty = sum(
        1 for r in results if not isinstance(r, BaseException) and r[1].get("ums.status") == "404"
    )
    for c in conns:
        c.close()
    print(
        f"long-poll: {n} receives of {timeout_ms} ms at once: {empty} empty (404), {errors} errors, "
        f"all answered in {took:.1f} s"
    )
    if pid:
        print(
            f"  server RSS: {before / 1024:.0f} MB before, {during / 1024:.0f} MB while waiting "
            f"({(during - before) / n:.1f} KB per waiting receive)"
        )


async def main_async(args, host: str, port: int, pid: int | None) -> None:
    dest = f"bench_{uuid.uuid4().hex[:8]}"
    body = b"x" * args.size
    send = f"/ums/simple?service=send&destination={dest}"
    recv = f"/ums/simple?service=receive&destination={dest}&timeout=0"
    await run_phase(host, port, 4, 1.0, lambda: send, body)  # warm-up: pools, producers
    for clients in args.clients:
        ok, _, err = await run_phase(host, port, clients, args.seconds, lambda: send, body)
        print(f"{clients:>3} clients: send    {ok / args.seconds:8.0f}/s  ({err} errors)")
        ok, empty, err = await run_phase(host, port, clients, args.seconds, lambda: recv, b"")
        print(
            f"{clients:>3} clients: receive {ok / args.seconds:8.0f}/s  ({empty} empty, {err} errors)"
        )
    await long_poll(host, port, args.pollers, args.poll_timeout, pid)
    # The machine may be shared: the load says how much of it the run had.
    print("load average (1/5/15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=100, help="text body bytes")
    ap.add_argument("--pollers", type=int, default=1000)
    ap.add_argument("--poll-timeout", type=int, default=10000)
    ap.add_argument("--url", help="a running portal or gateway (default: start one)")
    ap.add_argument(
        "--via",
        choices=["gateway", "portal"],
        default="gateway",
        help="the uvicorn UMS gateway process (default) or daphne's portal",
    )
    ap.add_argument(
        "--clients",
        type=lambda t: [int(n) for n in t.split(",")],
        default=[1, 50],
        help="concurrent HTTP clients, comma-separated (default 1,50)",
    )
    args = ap.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print("load average (1/5/15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    if args.url:
        u = urlsplit(args.url)
        asyncio.run(main_async(args, u.hostname or "127.0.0.1", u.port or 80, None))
        return
    os.environ.setdefault("IMQ_LOG_LEVEL", "WARNING")
    from tests.portal_server import start_stack
    from tests.ums_stack import start_gateway

    with start_gateway(start_stack(None, "imq.log.level=WARNING")) as stack:
        server = stack.portal.proc if args.via == "portal" else stack.proc
        port = stack.portal.port if args.via == "portal" else stack.port
        what = "daphne portal" if args.via == "portal" else "uvicorn gateway"
        b = stack.broker
        print(
            f"{what} http://127.0.0.1:{port} (pid {server.pid}), broker {b.host}:{b.portmapper_port}"
        )
        asyncio.run(main_async(args, "127.0.0.1", port, server.pid))


if __name__ == "__main__":
    main()
