"""A stock OpenMQ 6.9 broker and ours in one conventional cluster (issue 26, first phase).

Both run inside a private network namespace (tests/stock_cluster.py: the stock broker
refuses loopback addresses for a cluster).  The scenario's checks, one line each: the link
comes up on both sides with either broker started first and stays up across pings (four
of ours, the messages of the checks below crossing meanwhile); a queue message produced on one broker (stock Java client) is consumed on the other, both
ways, and 2,500 more than a consumer's window (the home broker's flow depends on the acks);
JMS transactions, CLIENT_ACKNOWLEDGE recover and XA transactions (an XASession of the
stock client) across the link, both ways (commit, rollback then commit, recover then
acknowledge, XA start/end/prepare/commit, XA start/end/rollback then again to a commit:
each message once, again only marked redelivered, never after its commit); the stock ``imqcmd list bkr`` lists ours; each
side's GOODBYE is understood by the other; a truncated LINK_INIT and a BROKER_INFO body that does not deserialise each close that
link with the reason logged once, and the stock broker links again afterwards.  The
second round runs with ``imq.cluster.transport=ssl`` on both brokers and one key pair (ours
from ``imqkeytool``, the stock broker's JKS keystore converted from it): the stock broker
presents that certificate, a queue message crosses the TLS link both ways, and a peer
speaking plain TCP to our TLS cluster port is refused with the refusal logged once.
"""

from __future__ import annotations

from pathlib import Path

from tests.stock_cluster import TXN_CHECKS, assert_scenario

EXPECTED = [
    "stock_first_link_up_on_ours",
    "stock_first_link_up_on_stock",
    "queue_message_stock_to_ours",
    "queue_message_ours_to_stock",
    "queue_beyond_the_window_stock_to_ours",
    "queue_beyond_the_window_ours_to_stock",
    *TXN_CHECKS,
    "link_stays_up",
    "stock_refused_no_acknowledgement",
    "stock_imqcmd_list_bkr_lists_ours",
    "our_goodbye_closes_the_stock_link",
    "ours_first_link_up_on_ours",
    "ours_first_link_up_on_stock",
    "ssl_stock_presents_the_shared_certificate",
    "ssl_queue_message_stock_to_ours",
    "ssl_queue_message_ours_to_stock",
    "ssl_plain_tcp_peer_refused_and_logged",
    "stock_goodbye_heard_by_ours",
    "bad_handshake_truncated_link_init_closes_the_link",
    "bad_handshake_broker_info_not_deserialisable_closes_the_link",
    "stock_links_again_after_bad_input",
]


def test_stock_broker_and_ours_link_both_ways(tmp_path: Path) -> None:
    assert_scenario(tmp_path, "handshake", EXPECTED)
