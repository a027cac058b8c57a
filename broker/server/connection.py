"""One client connection's asyncio glue around the sans-IO engine (broker/engine).

An ``asyncio.Protocol`` (not streams) so each read is decoded and answered in one
callback, and everything written during one event-loop turn leaves in one
``writelines`` call.  The protocol rules are the engine's; the write and effects loop is
:class:`broker.driver.EngineDriver`'s; this class adds the read slicing, the flush
rules of a client connection, the broker's thread pool and transaction timers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from broker.driver import EngineDriver
from broker.engine import ConnectionEngine, Effect, RunBlocking, TransactionTimer
from broker.engine.handshake import REFUSED_LOGIN_LINGER

from .admin_service import handler as admin

if TYPE_CHECKING:
    from .broker import Broker
    from .services import Service

log = logging.getLogger("broker.connection")

# A read larger than this is handled a slice at a time, a loop turn each (reading paused
# meanwhile): a producer's 256 KB read (about 250 messages of 1 KB) would otherwise keep
# every other connection waiting, and an AUTO_ACKNOWLEDGE consumer, which has one
# acknowledgement outstanding, would get one round trip per such turn.
READ_SLICE = 32 * 1024

__all__ = ["REFUSED_LOGIN_LINGER", "ClientConnection"]


class ClientConnection(EngineDriver):
    """The transport side of one client connection; ``engine`` is what the broker,
    the router and the admin service know as the connection."""

    engine: ConnectionEngine

    def __init__(self, broker: Broker, service: Service) -> None:
        super().__init__()
        self.broker = broker
        self.engine = self.make_engine(broker, service)
        # Inside data_received: output is written when it returns, not a callback later.
        self._receiving = False
        # The unread rest of a large read (see READ_SLICE), oldest first.
        self._rest: list[memoryview] = []

    def make_engine(self, broker: Broker, service: Service) -> Any:
        """The protocol engine this transport drives (the STOMP driver has its own)."""
        return ConnectionEngine(
            broker,
            service,
            wake=self._wake,
            flush=self._flush_now,
            admin=admin.HANDLER.handle if service.type == "ADMIN" else None,
        )

    # -- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._loop = asyncio.get_running_loop()
        e = self.engine
        peer = transport.get_extra_info("peername")
        if peer:
            # The dual-stack listener reports IPv4 clients as ::ffff:a.b.c.d.
            host = peer[0][7:] if peer[0].startswith("::ffff:") else peer[0]
            e.peer = f"{host}:{peer[1]}"
        e.sockname = transport.get_extra_info("sockname")
        self.run(e.start())

    def connection_lost(self, exc: Exception | None) -> None:
        self.engine.connection_lost()
        self.cancel_timers()

    def pause_writing(self) -> None:
        # The client is not reading: stop pushing messages until the socket drains.
        self.engine.write_paused = True

    def resume_writing(self) -> None:
        self.engine.resume_writing()

    def data_received(self, data: bytes) -> None:
        if self._rest:
            # Still working through an earlier read: this comes after it.
            self._rest.append(memoryview(data))
            return
        if len(data) > READ_SLICE:
            view = memoryview(data)
            self._rest.append(view[READ_SLICE:])
            data = bytes(view[:READ_SLICE])
            if self.transport is not None:
                self.transport.pause_reading()
            self.loop.call_soon(self._next_slice)
        self._receive(data)

    def _next_slice(self) -> None:
        rest = self._rest
        if not rest:
            return
        t = self.transport
        if t is None or t.is_closing():
            rest.clear()
            return
        view = rest[0]
        if len(view) > READ_SLICE:
            rest[0] = view[READ_SLICE:]
            view = view[:READ_SLICE]
        else:
            rest.pop(0)
        if rest:
            self.loop.call_soon(self._next_slice)
        else:
            t.resume_reading()
        self._receive(bytes(view))

    def _receive(self, data: bytes) -> None:
        # What this read produced for this client (an ACKNOWLEDGE_REPLY, a SEND_REPLY)
        # leaves at the end of this callback: no call_soon handle per read, and the reply
        # is not queued behind other connections' callbacks of this loop turn.  Output
        # for other connections (deliveries a send caused) still leaves once per turn.
        self._receiving = True
        try:
            effects = self.engine.receive_data(data)
            if effects:
                self.run(effects)
        finally:
            self._receiving = False
            if self.engine.flush_pending:
                self.flush()

    # -- output and effects ---------------------------------------------------------

    def _wake(self) -> None:
        # First output (or effect) of this batch: write it all at the end of the turn
        # (or of data_received, when that is running).
        if self._receiving:
            return
        self.loop.call_soon(self.flush)

    def _flush_now(self) -> None:
        # An answer the store released (a callback of its own, not a read): written now
        # rather than after the next loop turn's reads.  Inside data_received it leaves
        # when that returns anyway.
        if not self._receiving and self.engine.flush_pending:
            self.flush()

    def wrote(self, out: Sequence[bytes | bytearray]) -> None:
        m = self.engine.metrics
        m.packets_out += len(out)
        m.packet_bytes_out += sum(map(len, out))

    def run_effect(self, eff: Effect) -> None:
        kind = type(eff)
        if kind is RunBlocking:
            self._run_blocking(eff)  # type: ignore[arg-type]
        elif kind is TransactionTimer:
            self._arm_txn_timer(eff.txn, eff.delay_ms)  # type: ignore[union-attr]

    def _run_blocking(self, eff: RunBlocking) -> None:
        loop = self.loop
        fut = loop.run_in_executor(self.broker.executor, eff.fn, *eff.args)

        def done(f: asyncio.Future) -> None:
            try:
                result, error = f.result(), None
            except Exception as exc:
                result, error = None, exc
            self.run(eff.done(result, error))

        fut.add_done_callback(done)

    def _arm_txn_timer(self, txn, delay_ms: int) -> None:
        """Roll ``txn`` back when its JMQLifetime is over (the router decides)."""
        router = self.engine.router
        loop = self.loop

        def fire() -> None:
            txn.timer = None
            remaining = router.txns.expire_transaction(txn.id)
            if remaining:
                txn.timer = loop.call_later(remaining / 1000, fire)

        txn.cancel_timer()
        txn.timer = loop.call_later(delay_ms / 1000, fire)
