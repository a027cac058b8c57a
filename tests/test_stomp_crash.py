"""STOMP clients against a broker killed with SIGKILL under load: what a RECEIPT said is
done is done after the restart (docs/reference/stomp.md, "Frames").

stomp.py connections (1.2) to a broker process (file store, then JDBC): one sends persistent
messages as fast as it can, each SEND asking for a receipt; one sends them three to a
transaction and commits each with a receipt; one consumes with ``ack:client-individual``,
acknowledging each message with a receipt.  Once every kind of receipt has come many
times the broker is killed (SIGKILL), started again on the same var home, and the queue
drained.  Then: every message whose SEND or COMMIT was receipted is there (or was
acknowledged with a receipt before the kill), no message whose ACK was receipted comes
again, a transaction's messages are all there or none, and nothing is there twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import stomp

from broker.admintools.client import AdminClient
from broker.launcher import BrokerProcess
from broker.protocol.types import DEST_QUEUE

from .crash_stack import kill_broker, restart_broker
from .stompkit import stomp_broker

pytestmark = pytest.mark.timeout(300)

DEST = "/queue/crash"
# Receipts of each kind to wait for before the kill: enough that the kill falls while
# all three clients are busy.
SENDS, COMMITS, ACKS = 400, 40, 150


class Recorder(stomp.ConnectionListener):
    """Receipt ids and MESSAGE frames of one connection, kept from its reader thread."""

    def __init__(self) -> None:
        self.receipts: set[str] = set()
        self.messages: queue.Queue = queue.Queue()
        self.errors: list[dict] = []
        self.lock = threading.Lock()

    def on_receipt(self, frame: Any) -> None:
        with self.lock:
            self.receipts.add(frame.headers["receipt-id"])

    def on_message(self, frame: Any) -> None:
        self.messages.put(frame)

    def on_error(self, frame: Any) -> None:
        self.errors.append(frame.headers)

    def count(self, prefix: str) -> int:
        with self.lock:
            return sum(1 for r in self.receipts if r.startswith(prefix))

    def taken(self, prefix: str) -> set[str]:
        with self.lock:
            return {r[len(prefix) :] for r in self.receipts if r.startswith(prefix)}


def connect(port: int, rec: Recorder) -> Any:
    conn = stomp.Connection12([("127.0.0.1", port)], reconnect_attempts_max=1)
    conn.set_listener("rec", rec)
    conn.connect("guest", "guest", wait=True)
    return conn


def keep_going(fn: Any, stop: threading.Event) -> threading.Thread:
    """Run ``fn`` until it fails (the broker is gone) or ``stop`` is set."""

    def run() -> None:
        try:
            fn()
        except Exception:
            stop.set()  # the connection went with the broker: the expected end

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.fixture(params=["file", "jdbc"])
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker with its STOMP listener, on the file store or the JDBC one (the test's
    SQLite database)."""
    store = ("imq.persist.store=jdbc",) if request.param == "jdbc" else ()
    with stomp_broker(*store) as bp:
        yield bp


def held(b: BrokerProcess, name: str) -> int:
    """The broker's count of messages in queue ``name`` (its admin service)."""

    async def ask() -> int:
        async with await AdminClient.open(b.host, b.portmapper_port, connect_timeout=20) as a:
            rows = await a.destinations(name, DEST_QUEUE)
        (row,) = [r for r in rows if r.get("name") == name]
        return int(row.get("nMessages") or 0)

    return asyncio.run(ask())


def test_receipted_sends_commits_and_acks_survive_sigkill(broker) -> None:
    b, port = broker
    stop = threading.Event()
    sender, txer, taker = Recorder(), Recorder(), Recorder()
    s_conn, t_conn, c_conn = connect(port, sender), connect(port, txer), connect(port, taker)
    c_conn.subscribe(DEST, id="c", ack="client-individual")

    def send() -> None:
        n = 0
        while not stop.is_set():
            s_conn.send(DEST, f"s{n}", headers={"persistent": "true", "receipt": f"s{n}"})
            n += 1

    def transact() -> None:
        k = 0
        while not stop.is_set():
            t_conn.begin(f"t{k}")
            for i in range(3):
                t_conn.send(DEST, f"t{k}.{i}", headers={"persistent": "true"}, transaction=f"t{k}")
            t_conn.commit(f"t{k}", receipt=f"c{k}")
            k += 1

    acked_sent: set[str] = set()

    def consume() -> None:
        while not stop.is_set():
            try:
                m = taker.messages.get(timeout=0.5)
            except queue.Empty:
                continue
            acked_sent.add(m.body)
            c_conn.ack(m.headers["ack"], receipt=f"a{m.body}")

    threads = [keep_going(f, stop) for f in (send, transact, consume)]
    deadline = time.monotonic() + 120
    while not (
        sender.count("s") >= SENDS and txer.count("c") >= COMMITS and taker.count("a") >= ACKS
    ):
        assert not stop.is_set(), "a client stopped before the kill"
        assert time.monotonic() < deadline, (
            f"receipts before the kill: {sender.count('s')} sends, {txer.count('c')} "
            f"commits, {taker.count('a')} acks; errors {sender.errors + txer.errors + taker.errors}"
        )
        time.sleep(0.05)
    kill_broker(b)
    stop.set()
    for t in threads:
        t.join(30)
    for c in (s_conn, t_conn, c_conn):
        with contextlib.suppress(OSError):  # the broker is gone: its DISCONNECT fails
            c.disconnect()
    sent_ok = sender.taken("s")
    committed = txer.taken("c")
    acked_ok = taker.taken("a")
    assert not (sender.errors or txer.errors or taker.errors)

    restart_broker(b)
    count = held(b, "crash")
    after = Recorder()
    conn = connect(port, after)
    conn.subscribe(DEST, id="d", ack="client-individual")
    got: list[str] = []
    for i in range(count):
        m = after.messages.get(timeout=60)
        got.append(m.body)
        # The last ACK's receipt: every ACK before it has been taken.
        conn.ack(m.headers["ack"], receipt="last" if i == count - 1 else None)
    deadline = time.monotonic() + 60
    while count and after.count("last") == 0:
        assert time.monotonic() < deadline, "no receipt for the last ACK"
        time.sleep(0.05)
    conn.disconnect()
    assert held(b, "crash") == 0, "messages left after the count the broker gave"

    assert len(got) == len(set(got)), "a message is there twice after the restart"
    lost = {f"s{n}" for n in sent_ok} - set(got) - acked_sent
    assert not lost, f"receipted SENDs lost: {sorted(lost)[:20]}"
    again = set(got) & acked_ok
    assert not again, f"messages whose ACK was receipted came again: {sorted(again)[:20]}"
    have = set(got) | acked_sent
    begun = {int(x[1:].partition(".")[0]) for x in have if x.startswith("t")}
    for k in sorted(begun | {int(c) for c in committed}):
        parts = {f"t{k}.{i}" for i in range(3)} & have
        if str(k) in committed:
            assert len(parts) == 3, f"committed transaction t{k} has {sorted(parts)}"
        else:
            assert len(parts) in (0, 3), f"transaction t{k} came in part: {sorted(parts)}"
