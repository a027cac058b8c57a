"""STOMP across a conventional cluster: two broker processes on loopback, each with its
STOMP listener, stomp.py clients on both (docs/reference/stomp.md, "Clusters").

A STOMP SEND's message is made as the JMQ engine makes a client's packet, so a peer
broker takes it as any other; these check that it does: headers, properties and bodies
intact on the other broker, a topic's subscribers on both brokers, a client
acknowledgement going home and an unacknowledged message coming back when its remote
subscriber leaves, and a reply to a temporary queue on the requester's broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.launcher import BrokerProcess, free_port

from .cluster_procs import start_member, wait_linked
from .stompkit import Peer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[BrokerProcess, int]]]:
    """Brokers A and B in one cluster, with their STOMP ports."""
    tmp = tmp_path_factory.mktemp("stomp-cluster")
    pms = [free_port(), free_port()]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    out: list[tuple[BrokerProcess, int]] = []
    try:
        for name, pm in zip(("A", "B"), pms, strict=True):
            port = free_port()
            b = start_member(
                tmp / name,
                brokerlist,
                pm,
                name,
                "imq.bridge.enabled=true",
                "imq.bridge.activelist=stomp",
                f"imq.bridge.stomp.tcp.port={port}",
            )
            out.append((b, port))
        wait_linked([b for b, _ in out])
        yield out
    finally:
        for b, _ in out:
            b.stop()


@pytest.fixture
def peers(pair: list[tuple[BrokerProcess, int]]) -> Iterator[Any]:
    made: list[Peer] = []

    def make(which: int, version: str = "1.2") -> Peer:
        p = Peer(pair[which][1], version)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def both_subscribed(producer: Peer, dest: str, subs: list[Peer]) -> None:
    """Send probes to topic ``dest`` until every subscriber has one (the remote one's
    interest has reached the producer's broker), then drain them up to a last probe
    each gets after its first (one producer's messages come in order)."""
    pending = set(range(len(subs)))
    for _ in range(100):
        producer.conn.send(dest, "probe")
        for i in list(pending):
            if not subs[i].messages.empty():
                pending.discard(i)
        if not pending:
            break
        producer.nothing_more()  # a round trip between probes, not a sleep
    assert not pending, "a subscriber on the other broker never got a probe"
    producer.conn.send(dest, "last-probe")
    for s in subs:
        while s.next().body != "last-probe":
            pass


def test_queue_message_sent_on_a_is_received_on_b_with_its_headers(peers) -> None:
    q = "/queue/" + unique("q")
    b = peers(1)
    b.receipt(b.conn.subscribe, q, id="s", ack="client-individual")
    a = peers(0)
    a.receipt(
        a.conn.send,
        q,
        "hello from A",
        headers={
            "persistent": "true",
            "priority": "7",
            "correlation-id": "c-1",
            "type": "greeting",
            "colour": "red",
        },
    )
    # A body with NUL bytes: a BytesMessage, its length said by content-length.
    a.receipt(a.conn.send, q, b"\x00\x01\x02bytes\x00", headers={"persistent": "false"})
    m = b.next()
    h = m.headers
    assert m.body == "hello from A"
    assert (h["destination"], h["priority"], h["correlation-id"], h["type"], h["colour"]) == (
        q,
        "7",
        "c-1",
        "greeting",
        "red",
    )
    assert h["persistent"] == "true"
    b.ack(m)
    m2 = b.next()
    assert m2.body == "\x00\x01\x02bytes\x00"  # (stomp.py decodes every body as UTF-8)
    assert m2.headers["content-length"] == "9" and "persistent" not in m2.headers
    b.ack(m2)
    assert b.nothing_more()


def test_topic_subscribers_on_both_brokers_get_every_message(peers) -> None:
    t = "/topic/" + unique("t")
    a, sub_a, sub_b = peers(0), peers(0), peers(1)
    for s in (sub_a, sub_b):
        s.receipt(s.conn.subscribe, t, id="s", ack="auto")
    both_subscribed(a, t, [sub_a, sub_b])
    for i in range(20):
        a.conn.send(t, f"m{i}", headers={"n": str(i)})
    for s in (sub_a, sub_b):
        got = [s.next() for _ in range(20)]
        assert [m.body for m in got] == [f"m{i}" for i in range(20)]
        assert [m.headers["n"] for m in got] == [str(i) for i in range(20)]
        assert s.nothing_more()


def test_an_unacknowledged_message_comes_back_when_its_remote_subscriber_leaves(peers) -> None:
    q = "/queue/" + unique("q")
    b = peers(1)
    b.receipt(b.conn.subscribe, q, id="s", ack="client-individual")
    a = peers(0)
    for i in range(3):
        a.receipt(a.conn.send, q, f"m{i}", headers={"persistent": "true"})
    first, second = b.next(), b.next()
    b.ack(first)  # acknowledged on B: goes home to A and is gone
    assert b.next().body == "m2"
    # B's subscriber leaves with m1 and m2 unacknowledged: they go back to A's queue.
    b.conn.disconnect()
    again = peers(0)
    again.receipt(again.conn.subscribe, q, id="s", ack="client-individual")
    back = [again.next(), again.next()]
    assert sorted(m.body for m in back) == ["m1", "m2"]
    assert all(m.headers.get("redelivered") == "true" for m in back)
    assert second.body == "m1"
    for m in back:
        again.ack(m)
    assert again.nothing_more()


def test_request_reply_across_brokers_through_a_temporary_queue(peers) -> None:
    q = "/queue/" + unique("requests")
    server = peers(1)
    server.receipt(server.conn.subscribe, q, id="s", ack="auto")
    client = peers(0)
    client.receipt(client.conn.subscribe, "/temp-queue/answers", id="r", ack="auto")
    client.receipt(client.conn.send, q, "2+2", headers={"reply-to": "/temp-queue/answers"})
    req = server.next()
    reply_to = req.headers["reply-to"]
    # Another connection's temporary queue, named as the stock bridge names it.
    assert reply_to.startswith("/temp-queue/temporary_destination://queue/")
    server.receipt(server.conn.send, reply_to, "4", headers={"correlation-id": "2+2"})
    ans = client.next()
    assert (ans.body, ans.headers["correlation-id"]) == ("4", "2+2")
