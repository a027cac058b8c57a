"""A message sent again (R or I bit) that the broker already stores is answered with
NOT_MODIFIED (304) and not stored or delivered twice, as OpenMQ's broker answers a
SysMessageID it already holds (docs/developers/research/openmq-resend-and-statuses.md).

Our Python client's FailoverConnection sends a persistent message again, with the R bit,
when its SEND_REPLY never came; the first send may have been stored all the same.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.core.errors import RouterError
from broker.core.message import Message
from broker.core.router import MessageRouter
from broker.protocol.packet import build_packet, parse_packet
from broker.protocol.types import DEST_QUEUE, FLAG_I, FLAG_P, FLAG_Q, FLAG_R, PacketType, Status
from broker.store.filestore import FileStore

from .routerkit import Conn

pytestmark = pytest.mark.fast


def _send(r: MessageRouter, flags: int, sequence: int = 7) -> None:
    raw = build_packet(
        PacketType.TEXT_MESSAGE,
        body=b"order 42",
        flags=FLAG_Q | flags,
        fields={1: "orders"},
        timestamp=1_700_000_000_000,
        sequence=sequence,
    )
    r.route(Message(parse_packet(raw), "orders", 1), Conn(1), DEST_QUEUE)  # type: ignore[arg-type]


def test_a_stored_message_sent_again_is_answered_304_and_kept_once(tmp_path: Path) -> None:
    async def go() -> None:
        store = FileStore(tmp_path / "fs", sync=False)
        store.load()
        store.start(asyncio.get_running_loop())
        r = MessageRouter()
        r.attach_store(store)
        _send(r, FLAG_P)
        await asyncio.sleep(0.1)  # written
        for again in (FLAG_R, FLAG_I):
            with pytest.raises(RouterError) as err:
                _send(r, FLAG_P | again)
            assert err.value.status == Status.NOT_MODIFIED
            assert "already exists" in err.value.reason
        q = r.queues["orders"]
        assert q.msg_count == 1
        # Another message sent again (its first send never stored): taken.
        _send(r, FLAG_P | FLAG_R, sequence=8)
        # Without R or I a send is not looked up (the hot path asks the store nothing).
        _send(r, FLAG_P)
        assert q.msg_count == 3
        store.close()

    asyncio.run(go())


def test_without_a_store_or_persistence_nothing_is_looked_up() -> None:
    r = MessageRouter()
    _send(r, FLAG_R)
    _send(r, FLAG_R)
    assert r.queues["orders"].msg_count == 2
