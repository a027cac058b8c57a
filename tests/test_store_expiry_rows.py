"""The job's side of database-store expiry, on the rows themselves (SQLite and a real
PostgreSQL): which rows go where (topics with durables, useDMQ=false, the DMQ's limits,
transactions) and when the job must leave an instance alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from broker import models as m
from broker.jobs.dbexpiry import reclaim_expired_rows
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DMQ_NAME, PacketType
from broker.store import ownership
from tests.pg import database_alias, postgres_url  # noqa: F401

QUEUE, TOPIC = 1, 2
INSTANCE = "rows"


@pytest.fixture(params=["postgresql", "sqlite"])
def db(request) -> Iterator[str]:
    alias = request.getfixturevalue("pg_alias" if request.param == "postgresql" else "sqlite_alias")
    yield alias
    for model in (m.StoredMessage, m.StoredInterest, m.StoredDestination, m.StoredDurable,
                  m.StoredTxnWork, m.StoreOwner):  # fmt: skip
        model.objects.using(alias).filter(broker_instance=INSTANCE).delete()


def now_ms() -> int:
    return int(time.time() * 1000)


def put(db: str, n: int, dest: str, dest_type: int, interests: dict[str, int], **kw) -> str:
    """Store message ``n`` with its open interests (interest -> delivery count)."""
    key = n.to_bytes(4, "big").hex() * 8
    raw = build_packet(PacketType.TEXT_MESSAGE, body=f"m{n}".encode(), flags=0x0001, **kw)
    m.StoredMessage.objects.using(db).create(
        broker_instance=INSTANCE, key=key, destination=dest, dest_type=dest_type, raw=raw
    )
    for interest, count in interests.items():
        m.StoredInterest.objects.using(db).create(
            broker_instance=INSTANCE, key=key, interest=interest, delivery_count=count
        )
    return key


def stopped(db: str) -> m.StoreOwner:
    epoch = ownership.claim(INSTANCE, using=db, interval=1, address="h:7676", wait=10)
    ownership.release(INSTANCE, epoch, using=db)
    return m.StoreOwner.objects.using(db).get(broker_instance=INSTANCE)


def reclaim(db: str):
    owner = m.StoreOwner.objects.using(db).get(broker_instance=INSTANCE)
    with ownership.held_if_unowned(INSTANCE, owner.epoch, stale_beats=3, using=db) as held:
        assert held is not None
        return sorted(
            (r.destination, r.is_topic, r.to_dmq, r.discarded)
            for r in reclaim_expired_rows(held, now_ms=now_ms(), using=db)
        )


def dmq_rows(db: str) -> list[tuple[str, dict]]:
    """(body, properties) of the instance's DMQ rows, oldest first."""
    out = []
    for (raw,) in (
        m.StoredMessage.objects.using(db)
        .filter(broker_instance=INSTANCE, destination=DMQ_NAME)
        .order_by("id")
        .values_list("raw")
    ):
        pkt = parse_packet(bytes(raw))
        out.append((pkt.body.decode(), dict(pkt.properties)))
    return out


def keys_left(db: str) -> set[str]:
    return set(
        m.StoredMessage.objects.using(db)
        .filter(broker_instance=INSTANCE)
        .exclude(destination=DMQ_NAME)
        .values_list("key", flat=True)
    )


def test_topics_durables_use_dmq_and_transactions(db: str) -> None:
    past = now_ms() - 1000
    m.StoredDurable.objects.using(db).create(
        broker_instance=INSTANCE, sub_id="d1", name="d1", topic="t"
    )
    m.StoredDurable.objects.using(db).create(
        broker_instance=INSTANCE, sub_id="d2", name="d2", topic="t"
    )
    m.StoredDestination.objects.using(db).create(
        broker_instance=INSTANCE, name="nodmq", dest_type=QUEUE, attributes={"useDMQ": False}
    )
    # A topic message with two durables' interests (one delivered twice) and a stale one.
    put(db, 1, "t", TOPIC, {"d1": 0, "d2": 2, "gone": 0}, expiration=past)
    put(db, 2, "nodmq", QUEUE, {"": 0}, expiration=past)  # discarded: useDMQ false
    held = put(db, 3, "q", QUEUE, {"": 1}, expiration=past)  # acked in an open transaction
    m.StoredTxnWork.objects.using(db).create(
        broker_instance=INSTANCE, txn_id=7, kind=m.StoredTxnWork.Kind.ACK, key=held
    )
    kept = put(db, 4, "q", QUEUE, {"": 0}, expiration=now_ms() + 3_600_000)
    never = put(db, 5, "q", QUEUE, {"": 0})
    stopped(db)
    assert reclaim(db) == [("nodmq", False, 0, 1), ("t", True, 2, 0)]
    assert keys_left(db) == {held, kept, never}
    copies = dmq_rows(db)
    assert sorted((body, p["JMS_SUN_DMQ_DELIVERY_COUNT"]) for body, p in copies) == [
        ("m1", 0),
        ("m1", 2),
    ]
    for _, p in copies:
        assert p["JMS_SUN_DMQ_UNDELIVERED_REASON"] == "EXPIRED"
        assert p["JMS_SUN_DMQ_DEAD_BROKER"] == "h:7676"
    # Each copy is a queue message of its own in the DMQ.
    assert (
        m.StoredInterest.objects.using(db)
        .filter(broker_instance=INSTANCE, key__in=m.StoredMessage.objects.using(db)
                .filter(broker_instance=INSTANCE, destination=DMQ_NAME).values("key"))
        .count()
        == 2
    )  # fmt: skip


def test_dmq_limits_make_the_oldest_give_way(db: str) -> None:
    past = now_ms() - 1000
    m.StoredDestination.objects.using(db).create(
        broker_instance=INSTANCE, name=DMQ_NAME, dest_type=QUEUE, attributes={"maxNumMsgs": 2}
    )
    put(db, 10, DMQ_NAME, QUEUE, {"": 0})  # already dead before the broker stopped
    for n in range(3):
        put(db, 20 + n, "q", QUEUE, {"": 0}, expiration=past)
    gone = put(db, 30, "q", QUEUE, {"": 0}, expiration=past,
               props={"JMS_SUN_PRESERVE_UNDELIVERED": False})  # fmt: skip
    stopped(db)
    assert reclaim(db) == [("q", False, 3, 1)]
    assert [body for body, _ in dmq_rows(db)] == ["m21", "m22"]
    assert gone not in keys_left(db)


def test_the_job_leaves_a_live_or_reclaimed_instance_alone(db: str) -> None:
    put(db, 40, "q", QUEUE, {"": 0}, expiration=now_ms() - 1000)
    epoch = ownership.claim(INSTANCE, using=db, interval=60, address="h:7676", wait=10)
    # Running with a fresh heartbeat: not a candidate, and not taken if asked anyway.
    assert INSTANCE not in [
        o.broker_instance for o in ownership.candidates(stale_beats=3, using=db)
    ]
    with ownership.held_if_unowned(INSTANCE, epoch, stale_beats=3, using=db) as held:
        assert held is None
    # Silent for more than three beats: unowned.
    m.StoreOwner.objects.using(db).filter(broker_instance=INSTANCE).update(
        heartbeat=timezone.now() - timedelta(seconds=181)
    )
    assert [o.epoch for o in ownership.candidates(stale_beats=3, using=db)
            if o.broker_instance == INSTANCE] == [epoch]  # fmt: skip
    # A broker claiming after the job looked: the job's epoch is stale, it backs off.
    newer = ownership.claim(INSTANCE, using=db, interval=60, address="h:7676", wait=10)
    with ownership.held_if_unowned(INSTANCE, epoch, stale_beats=3, using=db) as held:
        assert held is None
    # Reclaiming bumps the epoch: the broker that held ``newer`` finds its rows taken.
    ownership.release(INSTANCE, newer, using=db)
    assert reclaim(db) == [("q", False, 1, 0)]
    assert not ownership.beat(INSTANCE, newer, using=db)
