"""Expiry reclamation on Celery: a real redis-server, a real worker and beat (schedule
set in django-celery-beat's tables) and a real broker whose own sweep is far off, so
only the job's RECLAIM_EXPIRED can reclaim the short-lived messages."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.protocol.types import DMQ_NAME
from openmq_client import Queue, TextMessage

from .celery_procs import CeleryProc, env_for, manage, query, wait_for
from .redis import RedisServer, redis_binary
from .test_client_live import name, open_conn
from .test_dmq_limits import drain

pytestmark = pytest.mark.timeout(240)


async def send_short_lived(b, queue: str) -> None:
    conn = await open_conn(b)
    sess = await conn.create_session()
    prod = await sess.create_producer(Queue(queue))
    await prod.send(TextMessage("to the dmq 1"), ttl_ms=100)
    await prod.send(TextMessage("to the dmq 2"), ttl_ms=100)
    gone = TextMessage("not kept", properties={"JMS_SUN_PRESERVE_UNDELIVERED": False})
    await prod.send(gone, ttl_ms=100)
    await prod.send(TextMessage("stays"))
    await conn.close()


def test_expired_messages_are_reclaimed_on_schedule(own_broker, redis_url, tmp_path: Path):
    b = own_broker("imq.message.expiration.interval=3600")
    db = tmp_path / "db.sqlite3"
    env = env_for(f"sqlite:///{db}", redis_url)
    queue = name("jobexp")
    asyncio.run(send_short_lived(b, queue))
    address = f"127.0.0.1:{b.portmapper_port}"
    manage(
        env,
        code="from portal.jobs.actions import update_schedule as u; "
        f"u('expiry-reclamation', 1, True, kwargs={{'brokers': [{address!r}]}}); "
        "u('log-table-rollover', 3600, False)",
    )
    worker = CeleryProc("worker", env, tmp_path / "worker.log")
    beat = CeleryProc("beat", env, tmp_path / "beat.log")
    try:
        run = wait_for(
            lambda: query(
                db,
                "SELECT r.id, r.broker, r.error FROM jobs_expiryrun r JOIN jobs_expiryrunitem i"
                " ON i.run_id = r.id WHERE r.status = 'ok' AND i.destination = ?",
                queue,
            ),
            what="an expiry run with the queue's counts",
        )[0]
    finally:
        beat.stop()
        worker.stop()
    run_id, broker, _ = run
    assert broker == f"{b.instance} ({address})"
    items = query(
        db,
        "SELECT destination, dest_type, to_dmq, discarded FROM jobs_expiryrunitem WHERE run_id = ?",
        run_id,
    )
    assert items == [(queue, "queue", 2, 1)]
    assert "portal.jobs.tasks.reclaim_expired" in worker.output()
    # Beat ran it again and again; the later runs found nothing more to reclaim.
    assert query(db, "SELECT count(*) FROM jobs_expiryrunitem WHERE destination = ?", queue) == [
        (1,)
    ]
    dead = asyncio.run(drain(b, Queue(DMQ_NAME)))
    assert sorted(m.text for m in dead if m.destination.name == queue) == [
        "to the dmq 1",
        "to the dmq 2",
    ]
    assert [m.text for m in asyncio.run(drain(b, Queue(queue)))] == ["stays"]


def test_redis_down_the_job_fails_recorded_and_the_broker_serves(own_broker, tmp_path: Path):
    b = own_broker("imq.message.expiration.interval=3600")
    db = tmp_path / "db.sqlite3"
    redis = RedisServer(redis_binary())
    redis.start()
    env = env_for(f"sqlite:///{db}", redis.url)
    redis.stop()  # Redis is down from here on
    out = manage(
        env,
        code="from portal.jobs.actions import run_now, ScheduleError\n"
        "try:\n    run_now('expiry-reclamation')\n"
        "except ScheduleError as e:\n    print('refused:', e)\n",
    )
    assert "refused: cannot queue portal.jobs.tasks.reclaim_expired" in out
    rows = query(db, "SELECT broker, status, error FROM jobs_expiryrun")
    assert len(rows) == 1 and rows[0][:2] == ("(not queued)", "failed"), rows
    assert "cannot queue" in rows[0][2]
    queue = name("stillserving")

    async def roundtrip() -> list[str]:
        conn = await open_conn(b)
        sess = await conn.create_session()
        prod = await sess.create_producer(Queue(queue))
        await prod.send(TextMessage("hello"))
        await conn.close()
        return [m.text for m in await drain(b, Queue(queue))]

    assert asyncio.run(roundtrip()) == ["hello"]
