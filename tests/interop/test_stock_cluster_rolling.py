"""Rolling replacement: a cluster of two stock OpenMQ 6.9 brokers becomes a cluster of
two of ours, one broker at a time, under load (issue 26).

One scenario run (tests/stock_cluster.py, ``rolling``, inside a private network
namespace): two stock brokers, a stock Java producer sending numbered persistent
messages to a queue (each send followed by a 50 ms pause) and a stock Java consumer
(CLIENT_ACKNOWLEDGE), both with an ``imqAddressList`` naming both brokers and reconnect
enabled. Stock broker 1 is stopped (SIGTERM) and one of ours started at its address and
port-mapper port; once it linked with stock broker 2, that one is replaced the same way.
Then: every number the
producer was told was sent was received, a number received again only with
JMSRedelivered, and neither client program gave up or saw an exception from its
connection (a send refused while a broker shut down is sent again; an acknowledgement
refused after a failover is followed by ``Session.recover()``, as the stock client asks).
"""

from __future__ import annotations

from pathlib import Path

from tests.stock_cluster import assert_scenario

EXPECTED = [
    "ours_in_place_of_stock1_links_with_stock2",
    "ours_in_place_of_stock2_links_with_ours1",
    "every_sent_message_received",
    "repeats_only_with_jmsredelivered",
    "producer_went_on",
    "consumer_went_on",
]


def test_stock_brokers_replaced_by_ours_one_by_one_under_load(tmp_path: Path) -> None:
    assert_scenario(tmp_path, "rolling", EXPECTED)
