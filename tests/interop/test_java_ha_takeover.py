"""The stock Java HA client at the taker while the takeover is still being made, on purpose
(tests/interop/java/HATakeover.java), not by timing.

An HA pair of our brokers on PostgreSQL.  The client (a producer and a transacted session
on broker A) has persistent messages stored on A and a transaction open there.  The test
then holds a row lock on A's store-owner row from a second PostgreSQL connection and
SIGKILLs A: B notices that A failed and starts its takeover, which waits for the lock
(broker/store/takeover.py's ``SELECT ... FOR UPDATE``; it gives up after its lock timeout
and tries again at the next pass, waiting again), and meanwhile B answers the client's
HELLO 408 (come back later).  The program calls commit() while its connection is failing
over and holds that commit (the client Transaction's monitor) until the failover is over;
the test waits until B has refused the client (408) and, the takeover still not made,
releases the lock.  So the client's END of its old transaction reaches B after B took A
over, and the client reads B's answer: session 17's failure (END 404, C4104: neither
found nor said rolled back), reproduced every run before the fix.

The second case (``prepared``): the transaction is PREPARED on A when A dies, its COMMIT not
yet sent.  The test share-locks the store's transaction table (A's PREPARE record waits,
and with it the answer), the program then holds its connection's ProtocolHandler monitor
(every write takes it) and the test lets the PREPARE be stored: the commit() has its answer
and its COMMIT waits.  Then the row lock and the kill as above, the COMMIT let go (to the
dead broker), the takeover let finish: the client asks B (VERIFY_TRANSACTION), which must
have taken the transaction over PREPARED, and commits it there.

The third case (``unnoticed``): the client comes to B before B has noticed that A failed.
The test keeps A's heartbeat fresh itself (a second connection updating A's row) from just
before the kill, so B believes A alive and sends the reconnecting client back to A (HELLO
301, JMQStoreOwner A, where it is refused); once B has done so, the test stops beating, B
notices, takes A over, and the client comes in as in ``open``.

What must hold: the commit is done (``prepared``: it must be), or said rolled back the stock way
(TransactionRolledBackException; the program then does the work again and commits);
every message A acknowledged, and every one sent after, is received (one delivered again
says JMSRedelivered); the transaction's sends are stored exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.launcher import BrokerProcess
from tests.pg import fresh_database

from .test_java_failover import run_interactive, sigkill, start_ha_member

pytestmark = pytest.mark.timeout(400)


def _wait_for(cond: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)


def _refused_hello(b: BrokerProcess, status: int = 408) -> bool:
    """B refused a reconnecting client's HELLO with ``status`` (408: come back later; 301:
    go to JMQStoreOwner)."""
    return any(
        "HELLO from" in line and f": {status} " in line for line in b.log_text().splitlines()
    )


@pytest.mark.parametrize("mode", ["open", "prepared", "unnoticed"])
def test_ha_client_at_the_taker_mid_takeover(
    tmp_path: Path, java_programs: Any, postgres_url: str, mode: str
) -> None:
    """``open``: the transaction was open on A (its commit() made during the failover);
    ``prepared``: it was PREPARED on A, its COMMIT not sent yet, when A died;
    ``unnoticed``: as ``open``, but the client comes to B before B has noticed that A
    failed (the test beats for A meanwhile: B sends the client back to A, 301)."""
    import psycopg

    from broker.models import StoredTransaction, StoreOwner
    from tests.test_ha import wait_log

    url = fresh_database(postgres_url, f"jt_{uuid.uuid4().hex[:10]}")
    started: list[BrokerProcess] = []
    lock: list[psycopg.Connection] = []
    beating = threading.Event()  # set: the test stops beating for A
    beater: list[threading.Thread] = []
    try:
        a = start_ha_member(tmp_path, "brokerA", url, started)
        b = start_ha_member(tmp_path, "brokerB", url, started)
        table = StoreOwner._meta.db_table

        def beat_for_a() -> None:
            # A's heartbeat, kept fresh by the test after A's death: B believes A alive.
            with psycopg.connect(url, autocommit=True) as conn:
                while not beating.is_set():
                    conn.execute(
                        f'UPDATE "{table}" SET heartbeat = now() WHERE broker_instance = %s',
                        ["brokerA"],
                    )
                    beating.wait(0.2)

        def hold_and_kill() -> None:
            if mode == "unnoticed":
                beater.append(threading.Thread(target=beat_for_a, daemon=True))
                beater[0].start()
                sigkill(a)
                return
            # A row lock on A's row, taken while A runs (its heartbeat then waits for it
            # too, with the time it was due: A only looks more failed), so that B's
            # takeover cannot pass it whenever B notices.
            conn = psycopg.connect(url)
            lock.append(conn)
            row = conn.execute(
                f'SELECT state FROM "{table}" WHERE broker_instance = %s FOR UPDATE',
                ["brokerA"],
            ).fetchone()
            assert row is not None
            sigkill(a)
            wait_log(b, "taking it over", timeout=120)

        def hold_prepare() -> None:
            # The store's transaction table, share-locked: A's PREPARE record (and so its
            # answer, given once stored) waits.  A's heartbeat waits behind that batch too,
            # so this is held only until the program sees its commit() waiting for that
            # answer (B would take A over after three intervals of silence).
            conn = psycopg.connect(url)
            lock.append(conn)
            conn.execute(f'LOCK TABLE "{StoredTransaction._meta.db_table}" IN SHARE MODE')

        def let_prepare() -> None:
            conn = lock.pop()
            conn.rollback()
            conn.close()
            assert "taking it over" not in b.log_text(), b.log_text()[-4000:]

        def release() -> None:
            if mode == "unnoticed":
                _wait_for(lambda: _refused_hello(b, 301), "B sending the client back to A (301)")
                assert "taking it over" not in b.log_text(), b.log_text()[-4000:]
                beating.set()
                beater[0].join()
                return
            _wait_for(lambda: _refused_hello(b), "B refusing the client's HELLO (408)")
            # The client was at the taker, refused while the takeover waited: still waiting.
            assert "took over broker brokerA" not in b.log_text()
            conn = lock.pop()
            conn.rollback()
            conn.close()

        tag = uuid.uuid4().hex[:8]
        addresses = ",".join(f"mq://{x.host}:{x.portmapper_port}/jms" for x in (a, b))
        r = run_interactive(
            java_programs,
            "HATakeover",
            [addresses, f"{a.host}:{a.portmapper_port}", f"ha.q{tag}", f"ha.t{tag}", mode],
            {
                "hold_prepare": hold_prepare,
                "let_prepare": let_prepare,
                "hold_and_kill": hold_and_kill,
                "release": release,
            },
        )
        during = (
            "ha_commit_prepared_on_the_first_broker_when_it_dies"
            if mode == "prepared"
            else "ha_commit_ends_its_transaction_at_the_taker"
        )
        assert r.checks == {
            "ha_on_the_first_broker": "ok",
            "ha_sent_and_open_transaction": "ok",
            during: "ok",
            "ha_commit_during_failover_rolled_back_or_committed": "ok",
            "ha_every_sent_message_received": "ok",
            "ha_transaction_sends_stored_once": "ok",
            "ha_both_reconnected_to_the_taker": "ok",
        }, r.explain()
        print("\n".join(line for line in r.lines if line.startswith("info ")))
        wait_log(b, "took over broker brokerA")
        log = b.log_text()
        if mode == "prepared":
            # Taken over in doubt, then committed by the client that came back for it.
            assert "1 transactions" in log and "is PREPARED and in doubt" in log, log[-4000:]
            assert "commit_outcome committed" in r.stdout, r.stdout
        else:
            # The commit's END reached B for the transaction that died with A.
            assert "died with the broker this client failed over from" in log, log[-4000:]
        assert "Traceback" not in log, log[-4000:]
    finally:
        beating.set()
        for conn in lock:
            conn.close()
        for x in started:
            x.stop()
