"""How long the expiry job takes to reclaim a stopped broker's expired database-store rows.

Seeds one instance with N persistent 1 KB queue messages, half of them expired (those to
the DMQ, within a DMQ limit raised to hold them all), marks the instance stopped, and
times one reclamation (held_if_unowned + reclaim_expired_rows, one transaction), on a
SQLite file and on a private PostgreSQL server (tests/pg.py).

    .venv/bin/python bench/store_expiry.py [N]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from broker import models as m  # noqa: E402
from broker.jobs.dbexpiry import reclaim_expired_rows  # noqa: E402
from broker.protocol.packet import build_packet  # noqa: E402
from broker.protocol.types import PacketType  # noqa: E402
from broker.store import ownership  # noqa: E402
from tests.pg import PostgresServer, database_alias, find_pg_bin  # noqa: E402

INSTANCE = "bench-expiry"


def seed(using: str, n: int, now_ms: int) -> None:
    body = os.urandom(1024)
    msgs, interests = [], []
    for i in range(n):
        key = (i.to_bytes(8, "big") * 4).hex()
        raw = build_packet(
            PacketType.TEXT_MESSAGE, body=body, flags=0x0001,
            expiration=now_ms - 1000 if i % 2 else 0,
        )  # fmt: skip
        msgs.append(m.StoredMessage(broker_instance=INSTANCE, key=key, destination="q",
                                    dest_type=1, raw=raw))  # fmt: skip
        interests.append(m.StoredInterest(broker_instance=INSTANCE, key=key, interest=""))
    m.StoredMessage.objects.using(using).bulk_create(msgs, batch_size=500)
    m.StoredInterest.objects.using(using).bulk_create(interests, batch_size=500)
    m.StoredDestination.objects.using(using).create(
        broker_instance=INSTANCE, name="mq.sys.dmq", dest_type=1,
        attributes={"maxNumMsgs": -1, "maxTotalMsgBytes": -1},
    )  # fmt: skip
    epoch = ownership.claim(INSTANCE, using=using, interval=5, address="bench:7676", wait=10)
    ownership.release(INSTANCE, epoch, using=using)


def measure(using: str, n: int) -> str:
    now = int(time.time() * 1000)
    seed(using, n, now)
    owner = m.StoreOwner.objects.using(using).get(broker_instance=INSTANCE)
    started = time.perf_counter()
    with ownership.held_if_unowned(INSTANCE, owner.epoch, stale_beats=3, using=using) as held:
        assert held is not None
        rows = reclaim_expired_rows(held, now_ms=now + 1, using=using)
    took = time.perf_counter() - started
    (r,) = rows
    left = m.StoredMessage.objects.using(using).filter(broker_instance=INSTANCE).count()
    return (
        f"{n:,} messages, {r.to_dmq:,} expired to the DMQ in {took:.2f} s "
        f"({r.to_dmq / took:,.0f}/s); {left:,} rows left (kept + DMQ copies)"
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        with database_alias("bench_sqlite", url) as alias:
            print("SQLite:    ", measure(alias, n))
    bin_dir = find_pg_bin()
    if bin_dir is None:
        print("PostgreSQL: not installed")
        return
    server = PostgresServer(bin_dir)
    try:
        server.start()
        with database_alias("bench_pg", server.url) as alias:
            print("PostgreSQL:", measure(alias, n))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
