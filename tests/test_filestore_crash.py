"""The file store under SIGKILL: a writer process with sync on, killed at random moments
over the same preallocated segments, never loses a record it was told is durable.  Its own
module because it starts processes (the rest of tests/test_filestore.py is in process, in
the fast tier)."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .test_filestore import keys, load, seg_files

_KILL_CHILD = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from broker.store.filestore import FileStore
from tests.store_contract import qmsg
from broker.store.base import MsgSettle
from tests.store_contract import key

start, inline = int(sys.argv[3]), sys.argv[4] == "1"
store = FileStore(sys.argv[1], sync=True, segment_size=200_000, inline=inline)
store.load()

async def main():
    loop = asyncio.get_running_loop()
    store.start(loop)
    n = start
    while True:
        futs = []
        for _ in range(1 + n % 5):  # a few "producers" per turn
            fut = loop.create_future()
            store.submit([qmsg(n, raw=b"k" * (n % 1500))])
            if n % 7 == 3:
                store.submit([MsgSettle(key(n - 3), "")])
            store.after_durable(lambda f=fut, n=n: (print(n, flush=True), f.set_result(None)))
            futs.append(fut)
            n += 1
        await asyncio.gather(*futs)

asyncio.run(main())
"""


@pytest.mark.parametrize("inline", [False, True])
def test_sigkill_while_writing_loses_no_confirmed_record(tmp_path: Path, inline: bool) -> None:
    """A process appending with sync on is killed (SIGKILL) at random moments, several
    times over the same preallocated segments: every record it was told is durable
    comes back, each time."""
    d = tmp_path / "fs"
    root = Path(__file__).resolve().parent.parent
    confirmed: set[int] = set()
    rng = random.Random(4)
    start = 0
    for _ in range(4):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _KILL_CHILD,
                str(d),
                str(root),
                str(start),
                "1" if inline else "0",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # it runs (however slow the machine is)...
        time.sleep(0.2 + rng.random())  # ...and is killed somewhere in its stride
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        got = [int(x) for x in (first + out).split()]
        assert got, "the child confirmed nothing"
        # (Keys that are multiples of 7 may have been settled, with the record after them.)
        confirmed.update(n for n in got if n % 7)
        store, state = load(d, segment_size=200_000)
        store.close()
        present = {int.from_bytes(k[:4], "big") for k in keys(state)}
        lost = confirmed - present
        assert not lost, f"confirmed but lost: {sorted(lost)[:10]}"
        assert all("torn record" in r for r in state.repairs), state.repairs
        start = max(confirmed) + 1000
    assert len(seg_files(d)) > 1  # it rolled over preallocated segments on the way
