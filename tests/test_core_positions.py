"""Queue consumer positions (core/positions.py, QueueDestination): who is active.

In process: a queue with targets of its own, and a cluster's claims stood in for by a
recorder of the claims asked (the port the cluster implements, broker/cluster/positions.py).
"""

from __future__ import annotations

import pytest

from broker.core.destination import QueueDestination

pytestmark = pytest.mark.fast


class Target:
    """A delivery target that takes nothing (only who is active matters here)."""

    selector = None
    link = None

    def __init__(self, name: str) -> None:
        self.name = name

    def ready(self) -> bool:
        return False

    def deliver(self, entry) -> None:  # pragma: no cover - never called
        raise AssertionError("no message is published in these tests")

    def __repr__(self) -> str:
        return self.name


class Claims:
    """Records claims; ``local`` targets must claim (as a cluster's local consumers)."""

    def __init__(self, *local: Target) -> None:
        self.local = set(local)
        self.asked: list[tuple[Target, int]] = []

    def needed(self, dest, target) -> bool:
        return target in self.local

    def claim(self, dest, target, position: int) -> None:
        self.asked.append((target, position))


def queue(active: int, backups: int) -> QueueDestination:
    return QueueDestination(
        "q", attributes={"maxNumActiveConsumers": active, "maxNumBackupConsumers": backups}
    )


def test_positions_in_attach_order_without_a_cluster() -> None:
    q = queue(1, 1)
    a, b, c = Target("a"), Target("b"), Target("c")
    assert q.attach(a) and q.attach(b)
    assert not q.attach(c), "a single queue with one backup has two positions"
    assert q.dq.consumers == [a] and q.backups == [b]
    assert q.positions == {a: 0, b: 1}
    q.detach(a)
    assert q.dq.consumers == [b] and q.backups == [] and q.positions == {b: 0}
    assert q.attach(c) and q.backups == [c] and q.positions[c] == 1


def test_a_remote_consumer_is_active_by_the_position_its_broker_gave_it() -> None:
    q = queue(1, -1)
    remote, local = Target("remote"), Target("local")
    assert q.attach(remote, 1, told=True)  # a backup on its own broker
    assert q.backups == [remote]
    assert q.attach(local) and q.positions[local] == 0 and q.dq.consumers == [local]
    # Its broker moves it up (it took position 0's lock) only after ours left.
    q.detach(local)
    assert q.dq.consumers == [] and q.backups == [remote], "a told backup waits to be told"
    q.moved(remote, 0)
    assert q.dq.consumers == [remote] and q.positions[remote] == 0


def test_a_local_backup_claims_the_freed_place_before_it_moves_up() -> None:
    q = queue(1, -1)
    first, second, third = Target("first"), Target("second"), Target("third")
    claims = Claims(second, third)
    q.claims = claims
    for t in (first, second, third):
        assert q.attach(t)
    q.detach(first)
    assert claims.asked == [(second, 0)], "one claim at a time, the first backup first"
    assert q.dq.consumers == [], "nobody is active before the claim is answered"
    q.claimed(second, 0, True)
    assert q.dq.consumers == [second] and q.positions[second] == 0
    assert q.backups == [third]


def test_a_refused_claim_lets_the_next_backup_try_and_waits_for_a_change() -> None:
    q = queue(1, -1)
    active, mine, stock = Target("active"), Target("mine"), Target("stock-remote")
    claims = Claims(mine)
    q.claims = claims
    q.attach(active)
    q.attach(mine)
    q.attach(stock, 2)  # a stock broker's consumer: it never says when it moves up
    q.detach(active)
    assert claims.asked == [(mine, 0)]
    q.claimed(mine, 0, False)  # another broker holds position 0
    # OpenMQ's rule for a remote backup of a broker that does not announce: it moves up
    # in this broker's view.
    assert q.dq.consumers == [stock] and q.positions[stock] == 0
    assert q.backups == [mine] and len(claims.asked) == 1, "no claim again until a change"
    q.detach(stock)
    assert claims.asked[-1] == (mine, 0)


def test_a_claim_answered_after_its_place_was_taken_leaves_the_backup() -> None:
    q = queue(1, -1)
    active, mine, remote = Target("active"), Target("mine"), Target("remote")
    claims = Claims(mine)
    q.claims = claims
    q.attach(active)
    q.attach(mine)
    q.detach(active)
    q.attach(remote, 0, told=True)  # the other broker won position 0 meanwhile
    q.claimed(mine, 0, True)
    assert q.dq.consumers == [remote] and q.backups == [mine] and q.positions[mine] == 1


def test_raising_the_active_limit_starts_backups_in_their_places() -> None:
    q = queue(1, -1)
    a, b, c = Target("a"), Target("b"), Target("c")
    for t in (a, b, c):
        q.attach(t)
    q.attributes["maxNumActiveConsumers"] = 2
    q.promote_backups()
    assert q.dq.consumers == [a, b] and q.backups == [c]
