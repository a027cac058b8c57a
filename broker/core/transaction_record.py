"""Transactions: local (session) and XA, held in memory.

Sends and acknowledgements tagged with a transaction id wait here until COMMIT and are
dropped on ROLLBACK.  An XA transaction (one started with an Xid) also goes through
END and PREPARE, and a PREPARED one outlives the connection that made it ("in doubt")
until a transaction manager or an administrator commits or rolls it back.

States and moves (OpenMQ's TransactionState; START..VERIFY_TRANSACTION):

===============  ===========================================================
STARTED          after START (TMNOFLAGS new, TMJOIN / TMRESUME re-associate);
                 the only state that takes sends and acknowledgements
INCOMPLETE       END TMSUSPEND (resumed by START TMRESUME)
FAILED           END TMFAIL (can only be rolled back)
COMPLETE         END TMSUCCESS
PREPARED         PREPARE (from COMPLETE; a local transaction also from STARTED)
COMMITTED        COMMIT: two-phase from PREPARED, one-phase from COMPLETE/STARTED
ROLLEDBACK       ROLLBACK from any state that is not final
TIMED_OUT        the broker rolled it back after its JMQLifetime; every later
                 request naming it is answered TIMEOUT (408)
===============  ===========================================================

Everything the message store needs to persist and restore a transaction is on the
object (see :meth:`Transaction.info`); :attr:`Transaction.on_change` is called on every
state change (the transaction manager, broker/core/transaction_rules.py, points it at the
router's transaction observers, broker/core/observers.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from broker.protocol.types import AutoRollback, Status, TransactionState

from .errors import RouterError, now_ms

if TYPE_CHECKING:
    from broker.protocol.xid import Xid

    from .message import Entry, Message
    from .session import Link, Session

log = logging.getLogger("broker.transaction")

FINAL_STATES = frozenset({TransactionState.COMMITTED, TransactionState.ROLLEDBACK})


class _Cancellable(Protocol):
    """A timer (asyncio.TimerHandle) as a transaction holds it."""

    def cancel(self) -> None: ...


@dataclass(eq=False)
class Transaction:
    """One transaction and the work it holds."""

    id: int
    # The session it was started on (None once that session is gone, for a transaction
    # that survives it: PREPARED, or JMQSessionLess).
    session: Session | None
    state: TransactionState = TransactionState.STARTED
    # Messages sent in it, in order, with the JMQDestType they were sent to.
    sends: list[tuple[Message, int]] = field(default_factory=list)
    # Acknowledgements in it: (session, (consumer id, SysMessageID)), in order ...
    acks: list[tuple[Session, tuple[int, bytes]]] = field(default_factory=list)
    # ... and the acknowledged entries themselves, taken out of their session's unacked
    # table so that nothing else (consumer or session close) redelivers them meanwhile.
    entries: dict[tuple[int, bytes], Entry] = field(default_factory=dict)
    xid: Xid | None = None
    # The connection it is associated with (START, TMJOIN, TMRESUME); None when that
    # connection has gone and the transaction lives on (in doubt).
    link: Link | None = None
    # JMQAutoRollback as the client sent it (None: unset, see effective_auto_rollback).
    auto_rollback: int | None = None
    # JMQSessionLess: True keeps the transaction when its session/connection closes.
    session_less: bool = False
    # JMQLifetime in ms (0: forever); a non-PREPARED transaction older than this is
    # rolled back by the broker.
    lifetime: int = 0
    created: int = field(default_factory=now_ms)
    updated: int = 0
    # SysMessageID of the START packet (answers a resent START with NOT_MODIFIED).
    creator: bytes = b""
    # Who started it, for administrators.
    connection_id: int = 0
    client_id: str | None = None
    user: str | None = None
    one_phase_prepare: bool = False
    timed_out_at: int = 0
    # Whether the message store holds it (PREPARED, or a commit being applied).
    stored: bool = False
    # Another broker's transaction on messages homed here (broker/cluster/remote_transactions.py):
    # (its home broker "host:port", its transaction id there).
    remote: tuple[str, int] | None = None
    # The other brokers ("host:port") that prepared this transaction's messages homed
    # there (broker/cluster/remote_transactions.py): told its outcome, also after a restart.
    remote_homes: tuple[str, ...] = ()
    # Told about every change of state (the router's dispatcher).
    on_change: Callable[[Transaction], None] | None = None
    # The broker's lifetime timer (anything with ``cancel()``), if any.
    timer: _Cancellable | None = None

    # -- queries ---------------------------------------------------------------------

    @property
    def is_xa(self) -> bool:
        return self.xid is not None

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def in_doubt(self) -> bool:
        """No connection owns it any more: only a transaction manager's recovery (naming
        its Xid) or an administrator can finish it."""
        return self.link is None and not self.is_final

    @property
    def held_ack_count(self) -> int:
        """How many acknowledged messages it holds until COMMIT (GET_TRANSACTIONS' nacks)."""
        return len(self.entries)

    @property
    def expires_at(self) -> int:
        """When the broker rolls it back (ms since the epoch; 0: never)."""
        return self.created + self.lifetime if self.lifetime > 0 else 0

    def is_expired(self, now: int) -> bool:
        exp = self.expires_at
        return (
            0 < exp <= now
            and self.state != TransactionState.PREPARED
            and self.state != TransactionState.TIMED_OUT
            and not self.is_final
        )

    def effective_auto_rollback(self, xa_default_all: bool = False) -> int:
        """The JMQAutoRollback, with the protocol's defaults when the client left it unset:
        ALL for local transactions; for XA ALL or NOT_PREPARED by
        imq.transaction.autorollback."""
        if self.auto_rollback is not None:
            return self.auto_rollback
        if self.xid is None or xa_default_all:
            return AutoRollback.ALL
        return AutoRollback.NOT_PREPARED

    def info(self) -> dict:
        """A plain description for the message store (``TxnState.info``)."""
        x = self.xid
        return {
            "xid": x.encode().hex() if x is not None else None,
            "xid_string": str(x) if x is not None else None,
            "session_id": self.session.id if self.session is not None else None,
            "auto_rollback": self.auto_rollback,
            "session_less": self.session_less,
            "lifetime": self.lifetime,
            "created": self.created,
            "connection_id": self.connection_id,
            "client_id": self.client_id,
            "user": self.user,
            "one_phase_prepare": self.one_phase_prepare,
            "remote": list(self.remote) if self.remote is not None else None,
            "remote_homes": list(self.remote_homes),
        }

    # -- checks ------------------------------------------------------------------------

    def check_open(self) -> None:
        """Sends and acknowledgements are taken only while STARTED."""
        if self.state == TransactionState.TIMED_OUT:
            raise RouterError(
                Status.TIMEOUT, f"transaction {self.id} was rolled back: its lifetime expired"
            )
        if self.state != TransactionState.STARTED:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {self.id} is {self.state.name}, not STARTED",
            )

    # -- changes -----------------------------------------------------------------------

    def set_state(self, state: TransactionState) -> None:
        self.state = state
        self.changed()

    def changed(self) -> None:
        self.updated = now_ms()
        hook = self.on_change
        if hook is not None:
            try:
                hook(self)
            except Exception:  # a persistence/monitoring hook must not break the protocol
                log.exception("transaction %s: change hook failed", self.id)

    def cancel_timer(self) -> None:
        t, self.timer = self.timer, None
        if t is not None:
            t.cancel()

    def __repr__(self) -> str:
        x = f" xid={self.xid}" if self.xid is not None else ""
        return f"<Transaction {self.id} {self.state.name}{x}>"


__all__ = ["FINAL_STATES", "Transaction"]
