"""A stock OpenMQ 6.9 broker and ours in one cluster: administered configuration and the
master broker (issue 26).

Both run inside a private network namespace (tests/stock_cluster.py, scenario
``master``). The checks, one line each: with the stock broker as master and first to
start, ours reads its change record (a destination and a durable subscription made
before ours joined); a destination created with the stock ``imqcmd`` on either broker is
listed on the other, and destroyed likewise; a durable subscription made through ours is
recorded by the stock master (a fresh broker of ours gets it, and ours' destination, from
the stock's record); ``imqcmd list bkr`` (the stock one on both brokers, ours on ours)
lists both brokers OPERATING. With ours as master and first to start, a stock broker
gets our record and records its destination and durable subscription with us. An
unknown GPacket type and a G_CONFIG_CHANGE_EVENT whose body does not deserialise each
close their link with the reason logged once; a stock broker links again afterwards.
"""

from __future__ import annotations

from pathlib import Path

from tests.stock_cluster import assert_scenario

EXPECTED = [
    "stock_master_link_up",
    "ours_reads_the_stock_masters_record",
    "dst_created_on_stock_seen_on_ours",
    "dst_created_on_ours_seen_on_stock",
    "durable_made_through_ours_recorded_by_stock_master",
    "dst_destroyed_on_ours_gone_from_stock",
    "dst_destroyed_on_stock_gone_from_ours",
    "list_bkr_stock_master",
    "stock_master_recorded_ours_changes",
    "ours_master_link_up",
    "stock_reads_our_masters_record",
    "stock_member_changes_recorded_by_our_master",
    "list_bkr_our_master",
    "bad_unknown_gpacket_type_closes_the_link",
    "bad_change_event_not_deserialisable_closes_the_link",
    "stock_links_again_after_bad_input",
]


def test_stock_broker_and_ours_share_configuration_and_master(tmp_path: Path) -> None:
    assert_scenario(tmp_path, "master", EXPECTED)
