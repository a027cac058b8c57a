"""Exclusive consumers across a cluster with the stock Java client (ExclusiveRace.java).

Two brokers of ours whose auto-created queues allow one active consumer
(``imq.autocreate.queue.maxNumActiveConsumers=1``): a stock Java consumer attaches on each
at the same moment, round after round, then each broker gets 10 messages.  Each broker
takes the position's cluster lock (G_LOCK ``queue:<name>_0``, as OpenMQ's brokers do)
before its consumer becomes active, so exactly one of them receives, and it receives all
20; the other is refused (no backups allowed) or waits as a backup.  The same race
between two stock brokers and in a mixed cluster is in tests/stock_cluster.py (they need
a private network namespace).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster_procs import start_cluster

pytestmark = pytest.mark.timeout(400)

ROUNDS = 10


@pytest.mark.parametrize("backups", ["0", "-1"], ids=["single", "failover"])
def test_two_consumers_racing_on_two_brokers_one_is_active(
    tmp_path: Path, java_programs: Any, backups: str
) -> None:
    brokers = start_cluster(
        tmp_path,
        2,
        "imq.autocreate.queue.maxNumActiveConsumers=1",
        f"imq.autocreate.queue.maxNumBackupConsumers={backups}",
    )
    try:
        a, b = brokers
        r = java_programs.run(
            "ExclusiveRace",
            a,
            b.host,
            str(b.portmapper_port),
            str(ROUNDS),
            "race_single_" if backups == "0" else "race_failover_",
        )
        r.assert_ok([f"race_{i}" for i in range(ROUNDS)])
        rounds = [line.split(" ", 2)[2] for line in r.lines if line.startswith("info round_")]
        assert len(rounds) == ROUNDS, r.explain()
        if backups == "0":
            # The loser is refused, as the stock broker refuses it (X_S_QUEUE_ATTACH_FAILED).
            assert all("refused" in line for line in rounds), rounds
        else:
            assert not any("refused" in line for line in rounds), rounds
        for broker in brokers:
            # Since its (last) start: a start the launcher retried on a taken port logs one.
            text = broker.log_text()
            assert "Traceback" not in text[text.rfind(" ready") :]
    finally:
        for broker in brokers:
            broker.stop()
