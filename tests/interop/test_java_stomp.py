"""stomp.py and the stock OpenMQ Java client (imq.jar) exchange messages through our
broker's STOMP listener both ways: text and bytes, properties, priority, correlation id,
type, delivery mode, a request answered on its reply-to, a transaction rolled back and
one committed, a selector, and a durable subscription that was away
(tests/interop/java/StompPeer.java)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.stompkit import Peer, stomp_broker

pytestmark = pytest.mark.timeout(300)


def test_stomp_and_java_exchange_messages(java_programs: Any) -> None:
    with stomp_broker() as (b, port):
        # A durable subscriber that goes away before Java publishes.
        d = Peer(port, "1.2", connect=False)
        d.connect(**{"client-id": "stomp-durable"})
        d.receipt(
            d.conn.subscribe,
            "/topic/stomp.j2s.durable",
            "d",
            headers={"durable-subscriber-name": "away"},
        )
        d.close()

        # Text needs no content-length (with one it is a BytesMessage, as in the stock bridge).
        text = Peer(port, "1.1", auto_content_length=False)
        text.receipt(
            text.conn.send,
            "/queue/stomp.s2j.text",
            "text from stomp",
            headers={
                "colour": "red",
                "priority": "8",
                "correlation-id": "c-1",
                "type": "kind",
                "persistent": "false",
                "reply-to": "/queue/stomp.s2j.reply",
            },
        )
        text.receipt(text.conn.begin, "t1")
        text.receipt(text.conn.send, "/queue/stomp.s2j.txn", "rolled back", transaction="t1")
        text.receipt(text.conn.abort, "t1")
        text.receipt(text.conn.begin, "t2")
        text.receipt(text.conn.send, "/queue/stomp.s2j.txn", "committed", transaction="t2")
        text.receipt(text.conn.commit, "t2")
        raw = Peer(port, "1.2", auto_decode=False)
        raw.receipt(raw.conn.send, "/queue/stomp.s2j.bytes", b"\x00\x01\xff\x00")

        r = java_programs.run("StompPeer", b)
        assert r.checks == {
            "stomp_text_to_java": "ok",
            "stomp_bytes_to_java": "ok",
            "stomp_transaction_to_java": "ok",
            "java_to_stomp": "ok",
        }, r.explain()

        text.receipt(text.conn.subscribe, "/queue/stomp.s2j.reply", "reply")
        reply = text.next()
        assert reply.body == "reply from java"
        assert reply.headers["correlation-id"] == "c-1"

        text.receipt(text.conn.subscribe, "/queue/stomp.j2s.text", "t", ack="client")
        m = text.next()
        h = m.headers
        assert m.body == "text from java"
        assert (h["num"], h["str"], h["priority"], h["correlation-id"], h["type"]) == (
            "5",
            "v",
            "6",
            "jc",
            "jt",
        )
        assert h["reply-to"] == "/queue/stomp.j2s.replyto"
        assert h["persistent"] == "true" and h["destination"] == "/queue/stomp.j2s.text"
        text.ack(m)

        raw.receipt(raw.conn.subscribe, "/queue/stomp.j2s.bytes", "b")
        assert raw.next().body == b"\x01\x00\x02"

        text.receipt(
            text.conn.subscribe, "/queue/stomp.j2s.sel", "s", headers={"selector": "colour = 'red'"}
        )
        assert text.next().body == "red"
        assert text.nothing_more()

        back = Peer(port, "1.2", connect=False)
        back.connect(**{"client-id": "stomp-durable"})
        back.receipt(
            back.conn.subscribe,
            "/topic/stomp.j2s.durable",
            "d",
            headers={"durable-subscriber-name": "away"},
        )
        assert back.next().body == "while away"
        for p in (text, raw, back):
            p.close()
