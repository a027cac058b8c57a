"""A stock OpenMQ 6.9 broker and ours in one cluster: topics, durable and shared
subscriptions and client IDs across the link (issue 26, second phase).

One scenario run (tests/stock_cluster.py, ``topics``, inside a private network
namespace), stock Java clients on both brokers, one line per check: a topic message
published on either broker reaches the subscribers on both (persistent and not); a
durable subscription made on the stock broker gets, exactly once, what was published on
ours while it was away, and its unsubscribe reaches ours; JMS 2.0 shared subscriptions
with a consumer on each broker consume each message once; a client ID in use on either
broker is refused on the other and free there once its connection closes; a subscriber
on ours with a small prefetch gets everything the stock broker publishes; OpenMQ's own
JMQShare subscriptions (one client ID shared by a subscriber on each broker), non-durable
and durable, get each message once between the two, and the durable one, after both
subscribers were away, what was published meanwhile, once, with each subscriber back on
the other broker; STOMP (stomp.py on ours): a SEND on ours reaches a stock queue consumer
on the stock broker, and what a stock client publishes there reaches a STOMP subscriber
on ours; the link stays up throughout.

Not yet: a durable subscription whose consumer is on ours, fed by the stock broker
(docs/operators/clusters.md, "With stock OpenMQ brokers")."""

from __future__ import annotations

from pathlib import Path

from tests.stock_cluster import JMQSHARE_CHECKS, STOMP_CHECKS, assert_scenario

EXPECTED = [
    "topic_published_on_stock_reaches_subscribers_on_both",
    "topic_published_on_ours_reaches_subscribers_on_both",
    "durable_on_stock_published_on_ours_exactly_once",
    "durable_on_ours_published_on_stock_exactly_once",
    "durable_unsubscribed_on_stock_gone_on_ours",
    "durable_unsubscribed_on_ours_gone_on_stock",
    "shared_nondurable_each_message_consumed_once",
    "shared_durable_each_message_consumed_once",
    "client_id_in_use_on_stock_refused_on_ours",
    "client_id_freed_on_stock_taken_on_ours",
    "client_id_in_use_on_ours_refused_on_stock",
    "client_id_freed_on_ours_taken_on_stock",
    "flow_limited_subscriber_on_ours_gets_all_from_stock",
    "client_killed_on_ours_stock_delivers_again",
    "client_killed_on_stock_ours_delivers_again",
    *JMQSHARE_CHECKS,
    *STOMP_CHECKS,
    "link_still_up",
]


def test_stock_broker_and_ours_share_topics(tmp_path: Path) -> None:
    assert_scenario(tmp_path, "topics", EXPECTED)
