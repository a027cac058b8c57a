"""What the file store keeps in memory per waiting message, and a restart, in process.

    .venv/bin/python bench/store_index.py index 1000000        # N MsgAdds into the index
    .venv/bin/python bench/store_index.py make DIR 1000000 1024  # a store of N messages
    .venv/bin/python bench/store_index.py restart DIR           # load + recovery, paging

``index``: applies N MsgAdds (one queue, one producer's keys) to the file store's in-memory
index, then settles them all: resident memory per message, adds and settles per second
of CPU time (the machine is often shared: CPU time varies less than wall time).
``make``: writes N persistent messages of SIZE bytes into a file store at DIR (as the
broker stores them, without a broker).  ``restart``: what a paging broker's start does
with DIR: the store's load (heads only) and the router's recovery with a pager (64m
budget, bodies past 60%): CPU and wall seconds, resident memory before and after.
No broker process, no Django: the store and the router alone (bench/backlog.py measures
the whole broker).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

from broker.core.paging import Pager
from broker.core.router import MessageRouter
from broker.protocol.packet import OFF_SYSMSGID, Packet, build_packet, with_delivery_count_slot
from broker.protocol.types import DEST_QUEUE, PacketType
from broker.store import filestore as fs
from broker.store.base import QUEUE_INTEREST, DestAdd, MsgAdd, MsgSettle


def rss_mb(field: str = "VmRSS") -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def index(n: int) -> None:
    idx = fs.Index()
    # As one producer makes them: timestamp, source (its address and port), sequence.
    source = os.urandom(20)
    t0 = int(time.time() * 1000)
    keys = [(t0 + i // 50).to_bytes(8, "big") + source + i.to_bytes(4, "big") for i in range(n)]
    per_seg = 60_000  # 1 KB messages in a 64 MB segment
    gc.collect()
    before = rss_mb()
    t = time.process_time()  # CPU: the machine is often shared
    seg = None
    for i, k in enumerate(keys):
        if i % per_seg == 0:
            seg = idx.segs[i // per_seg + 1] = fs.Seg(i // per_seg + 1)
        assert seg is not None
        idx.apply(
            MsgAdd(k, "q", DEST_QUEUE, b"", (QUEUE_INTEREST,)), seg, (i % per_seg) * 1100, 1100
        )
    adds = n / (time.process_time() - t)
    gc.collect()
    per = (rss_mb() - before) * 1024 * 1024 / n
    t = time.process_time()
    assert seg is not None
    for k in keys:
        idx.apply(MsgSettle(k, QUEUE_INTEREST), seg, 0, 40)
    settles = n / (time.process_time() - t)
    print(f"{n:,} messages: {per:.1f} bytes each; {adds:,.0f} adds/s, {settles:,.0f} settles/s")


def make(d: Path, n: int, size: int) -> None:
    store = fs.FileStore(d, sync=False)
    store.reset()
    store.load()
    store._write_batch([DestAdd("q", DEST_QUEUE, {})])
    body = bytes(size)
    batch: list = []
    for i in range(n):
        raw = build_packet(PacketType.BYTES_MESSAGE, body=body, sequence=i, port=7676)
        raw = with_delivery_count_slot(Packet(raw))[0]  # as the broker stores a message
        key = raw[OFF_SYSMSGID : OFF_SYSMSGID + 32]
        batch.append(MsgAdd(key, "q", DEST_QUEUE, raw, (QUEUE_INTEREST,)))
        if len(batch) == 1000:
            store._write_batch(batch)
            batch = []
    if batch:
        store._write_batch(batch)
    store.close()
    print(f"{store.live_messages():,} messages in {d}")


def restart(d: Path) -> None:
    store = fs.FileStore(d, sync=False)
    store.lazy_bodies = True
    router = MessageRouter()
    gc.collect()
    before = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    state = store.load()
    t1, c1 = time.perf_counter(), time.process_time()
    router.attach_store(store)
    router.attach_pager(Pager(int((64 << 20) * 0.6), swap=None, store=store))
    n = router.recover(state)["messages"]
    t2, c2 = time.perf_counter(), time.process_time()
    del state
    gc.collect()
    after = rss_mb()
    msgs = store.writer.index.msgs if store.writer.index is not None else None
    index_mb = 0.0
    if hasattr(msgs, "recs"):  # (a version with the packed table)
        index_mb = (len(msgs.recs) + 4 * (len(msgs.slots) + len(getattr(msgs, "hs", ())))) / (
            1 << 20
        )
    runs_mb = 0.0
    for q in router.queues.values():
        for deep in q.dq.deep or ():
            if deep is not None:
                runs_mb += sum(len(run.recs) for run in deep.runs) / (1 << 20)
    print(
        f"{n:,} messages: load {c1 - c0:.1f} s CPU ({t1 - t0:.1f} s wall), recovery"
        f" {c2 - c1:.1f} s CPU ({t2 - t1:.1f} s wall); RSS {before:.0f} MB before,"
        f" {after:.0f} MB after ({(after - before) * 1024 * 1024 / max(n, 1):.0f} bytes a"
        f" message), peak {rss_mb('VmHWM'):.0f} MB; the store's packed table {index_mb:.0f} MB,"
        f" the queue's runs {runs_mb:.0f} MB"
    )


if __name__ == "__main__":
    what, *args = sys.argv[1:]
    if what == "index":
        index(int(args[0]) if args else 1_000_000)
    elif what == "make":
        make(Path(args[0]), int(args[1]), int(args[2]) if len(args) > 2 else 1024)
    elif what == "restart":
        restart(Path(args[0]))
    else:
        raise SystemExit(__doc__)
