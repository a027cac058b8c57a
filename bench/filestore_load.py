"""How long the file store takes to load (replay) a segment of 200,000 records.

Writes one segment of mixed records (messages to a queue and a topic, settles, delivery
counts, transactions) and prints the best of N loads (CPU time, so a busy machine skews
it less) and the best decode-only pass over the same bytes.

    .venv/bin/python bench/filestore_load.py [--records 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.store import filecodec, filestore  # noqa: E402
from broker.store.base import (  # noqa: E402
    DestAdd,
    DurableAdd,
    MsgAdd,
    MsgDelivered,
    MsgSettle,
    Record,
    TxnAck,
    TxnRemove,
    TxnSend,
    TxnState,
)


def records(n: int) -> list[Record]:
    out: list[Record] = [
        DestAdd("q1", 1, {"maxNumMsgs": 100, "x": b"\x01"}),
        DestAdd("t1", 2, {}),
        DurableAdd("sub1", "cid", "d1", "t1", None, False, None),
    ]
    i = 0
    while len(out) < n:
        key = i.to_bytes(32, "big")
        if i % 2:
            out.append(MsgAdd(key, "q1", 1, b"m" * 300, ("",)))
            if i % 4 == 1:
                out.append(MsgSettle(key, ""))
            elif i % 8 == 3:
                out.append(MsgDelivered(key, "", 1))
        else:
            out.append(MsgAdd(key, "t1", 2, b"t" * 300, ("sub1", "sub2")))
            if i % 10 == 0:
                out += [
                    TxnState(i, 5, {"xid": b"abc", "n": 1}),
                    TxnSend(i, key + b"x", "q1", 1, b"raw"),
                    TxnAck(i, key, "sub1"),
                    TxnRemove(i),
                ]
        i += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="imq-fsload-"))
    try:
        recs = records(args.records)
        data = filestore.MAGIC + b"".join(filecodec.frame_record(r) for r in recs)
        (directory / "0000000001.seg").write_bytes(data)
        best_load = best_decode = float("inf")
        live = 0
        for _ in range(args.runs):
            store = filestore.FileStore(directory, sync=False)
            start = time.process_time()
            state = store.load()
            best_load = min(best_load, time.process_time() - start)
            store.close()
            live = len(state.messages)
            start = time.process_time()
            pos, end = len(filestore.MAGIC), len(data)
            header = filecodec.FRAME_HEADER.unpack_from
            while pos < end:
                length, _crc = header(data, pos)
                filecodec.decode(data, pos + 8, pos + 8 + length)
                pos += 8 + length
            best_decode = min(best_decode, time.process_time() - start)
        print(
            f"file store load: {len(recs):,} records ({live:,} live messages), best of"
            f" {args.runs}: load {best_load * 1000:.0f} ms CPU, decode only"
            f" {best_decode * 1000:.0f} ms CPU"
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
