"""Local (session) transactions, held in memory.

Sends and acknowledgements tagged with a transaction id wait here until COMMIT, and
are dropped on ROLLBACK.  XA, persistence and recovery come with the message store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.protocol.types import Status, TransactionState

if TYPE_CHECKING:
    from .message import Message
    from .session import Session


@dataclass
class Transaction:
    """One open transaction and the work it holds."""

    id: int
    session: Session
    state: TransactionState = TransactionState.STARTED
    sends: list[tuple[Message, int]] = field(default_factory=list)
    acks: list[tuple[Session, tuple[int, bytes]]] = field(default_factory=list)

    def check_open(self) -> None:
        from .router import RouterError

        if self.state != TransactionState.STARTED:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"transaction {self.id} is {self.state.name}, not STARTED",
            )
