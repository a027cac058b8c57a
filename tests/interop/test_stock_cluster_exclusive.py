"""Exclusive queue consumers racing between two stock OpenMQ 6.9 brokers and in a mixed
cluster of a stock broker and ours (tests/stock_cluster.py, scenario "exclusive"; apart
from test_stock_cluster.py so the two long scenarios run in different workers).
"""

from __future__ import annotations

from pathlib import Path

from tests.stock_cluster import EXCLUSIVE_ROUNDS, assert_scenario

EXCLUSIVE = [
    f"{pair}_race_{i}"
    for pair in ("stock_stock", "stock_ours", "ours_stock")
    for i in range(EXCLUSIVE_ROUNDS)
]


def test_exclusive_consumers_racing_on_stock_brokers_and_in_a_mixed_cluster(
    tmp_path: Path,
) -> None:
    """ExclusiveRace.java (see tests/interop/test_java_exclusive.py for ours alone)."""
    assert_scenario(tmp_path, "exclusive", EXCLUSIVE)
