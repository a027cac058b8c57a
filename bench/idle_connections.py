"""Open N idle, authenticated connections and print the broker's resident memory.

    .venv/bin/python bench/idle_connections.py            # 10,000 connections
    .venv/bin/python bench/idle_connections.py --count 2000

Each connection does the real handshake (HELLO, digest AUTHENTICATE, CREATE_SESSION)
and then stays idle.  Memory is read from /proc/<broker pid>/status (VmRSS).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.protocol.auth import encode_auth_body, encode_basic_password  # noqa: E402
from broker.protocol.jtypes import JInt  # noqa: E402
from broker.protocol.packet import PacketReader, build_packet  # noqa: E402
from broker.protocol.types import PacketType  # noqa: E402
from broker.security.digest import digest_response, md5str  # noqa: E402

HELLO = build_packet(
    PacketType.HELLO,
    flags=0x10,
    consumer_id=1,
    props={
        "JMQProtocolLevel": JInt(500),
        "JMQVersion": "6.9.0",
        "JMQRBufferSize": JInt(100),
        "JMQUserAgent": "bench",
        "JMQReconnectable": False,
    },
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def open_one(host: str, port: int, keep: list) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    pr = PacketReader()
    pending: list = []

    async def recv():
        while not pending:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("closed")
            pending.extend(pr.feed(data))
        return pending.pop(0)

    writer.write(HELLO)
    await recv()  # HELLO_REPLY
    req = await recv()  # AUTHENTICATE_REQUEST
    kind = req.properties["JMQAuthType"]
    if kind == "basic":
        cred = encode_basic_password("guest")
    else:
        cred = digest_response(md5str("guest:guest"), req.body.decode())
    writer.write(
        build_packet(
            PacketType.AUTHENTICATE,
            flags=0x10,
            consumer_id=2,
            props={"JMQAuthType": kind},
            body=encode_auth_body("guest", cred),
        )
    )
    reply = await recv()
    if reply.properties["JMQStatus"] != 200:
        raise RuntimeError(f"login refused: {reply.properties}")
    writer.write(
        build_packet(
            PacketType.CREATE_SESSION, flags=0x10, consumer_id=3, props={"JMQAckMode": JInt(1)}
        )
    )
    await recv()
    keep.append(writer)


async def run(host: str, port: int, count: int, pid: int, parallel: int) -> None:
    keep: list = []
    sem = asyncio.Semaphore(parallel)
    base = rss_mb(pid)
    t0 = time.perf_counter()

    async def guarded() -> None:
        async with sem:
            await open_one(host, port, keep)

    results = await asyncio.gather(*(guarded() for _ in range(count)), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(2)
    rss = rss_mb(pid)
    print(
        f"{len(keep)} idle authenticated connections ({len(errors)} failed) in {elapsed:.1f} s; "
        f"broker RSS {rss:.0f} MB (was {base:.0f} MB before: "
        f"{(rss - base) * 1024 / max(len(keep), 1):.1f} KB per connection)"
    )
    if errors:
        print("first error:", repr(errors[0]))
    for w in keep:
        w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--parallel", type=int, default=200)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from broker.launcher import start_broker

    broker = start_broker(Path(tempfile.mkdtemp(prefix="imq-idle-")), "imq.log.level=WARNING")
    try:
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        asyncio.run(run(broker.host, broker.jms_port, args.count, broker.proc.pid, args.parallel))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
