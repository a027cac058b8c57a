"""SIGKILL while a backlog is paged out and read back (issue 34): one round of the crash
soak (bench/crash_soak.py: the stock OpenMQ C client's producers, transacted producer and
consumers in every acknowledgement mode on one queue) against our broker with a memory
budget of 1 MB and a paging threshold of 1% of it, so nearly every body waits paged out
and is read back ahead of its delivery.  The broker is SIGKILLed twice under that load,
and once more between two final drains.  Nothing whose send or commit was confirmed may
be lost, nothing acknowledged may come again unflagged, no rolled-back transaction may
appear; and the broker's own metrics, read just before each kill, show it was paging and
reading back when it died."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from broker.launcher import ROOT


def _soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crash_soak", ROOT / "bench" / "crash_soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_sigkill_while_paging_and_reading_back_loses_nothing(tmp_path: Path) -> None:
    soak = _soak()
    exe = soak.build(tmp_path)
    args = argparse.Namespace(
        store="file",
        sync=False,
        prop=["imq.memory.limit=1m", "imq.swap.threshold=1", "imq.swap.readahead=8"],
        size=2000,
        kills=2,
        seed=5,
        # With the paging threshold at 10 KB a backlog pages out within a second of load:
        # 1-2 s of it before each kill is enough to be killed paging and reading back.
        min_gap=1.0,
        max_gap=2.0,
        client_kill_rate=0.3,
        # A drain reads a backlog already stored, a message every few milliseconds (read
        # back eight at a time): 2.5 s without one means the queue is empty.
        drain_idle=2.5,
        keep=False,
    )
    r = soak.run_round(args, exe, 0, None)
    summary = dict(r.notes)
    assert r.kills == 2, summary
    assert r.violations == [], r.violations[:20]
    assert r.sent and r.copies, summary
    assert summary.get("paged out before the kills", 0) > 0, summary
    assert summary.get("read back before the kills", 0) > 0, summary
