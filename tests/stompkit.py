"""stomp.py (PyPI stomp-py, a client nobody here wrote) against a broker with the STOMP
listener on: a broker process with it, and a connection that queues what it hears."""

from __future__ import annotations

import queue
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import stomp

from broker.launcher import (
    BrokerProcess,
    StockBrokerProcess,
    free_port,
    start_broker,
    start_stock_broker,
)

WAIT = 20.0  # seconds a test waits for something it expects (never a timing assertion)
CONNECTIONS = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


@contextmanager
def stomp_broker(*props: str) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker process with the STOMP bridge listener on a free port."""
    tmp = Path(tempfile.mkdtemp(prefix="imq-stomp-"))
    port = free_port()
    b = start_broker(
        tmp,
        "imq.bridge.enabled=true",
        "imq.bridge.activelist=stomp",
        f"imq.bridge.stomp.tcp.port={port}",
        *props,
    )
    try:
        yield b, port
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def stock_stomp_broker(*props: str) -> Iterator[tuple[StockBrokerProcess, int]]:
    """The stock OpenMQ broker with its STOMP bridge on a free port (the -D options of
    third_party/openmq/realbroker/README.md), and ``props`` besides."""
    tmp = Path(tempfile.mkdtemp(prefix="imq-stock-stomp-"))
    port = free_port()
    b = start_stock_broker(
        tmp,
        "imq.bridge.enabled=true",
        "imq.bridge.activelist=stomp",
        "imq.bridge.stomp.tcp.enabled=true",
        f"imq.bridge.stomp.tcp.port={port}",
        "imq.bridge.admin.user=admin",
        "imq.bridge.admin.password=admin",
        *props,
    )
    try:
        # Its bridge starts listening a moment after the broker says it is ready.
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield b, port
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


class Peer(stomp.ConnectionListener):
    """One stomp.py connection: MESSAGE, RECEIPT and ERROR frames queued as they come."""

    def __init__(
        self,
        port: int,
        version: str = "1.2",
        *,
        login: str = "guest",
        passcode: str = "guest",
        connect: bool = True,
        cafile: str | None = None,
        **kw: Any,
    ) -> None:
        self.messages: queue.Queue = queue.Queue()
        self.receipts: queue.Queue = queue.Queue()
        self.errors: queue.Queue = queue.Queue()
        self.disconnects: queue.Queue = queue.Queue()
        self.version = version
        self.conn = CONNECTIONS[version]([("127.0.0.1", port)], **kw)
        if cafile is not None:
            # TLS, verifying the broker's certificate (and its name) against ``cafile``.
            self.conn.set_ssl([("127.0.0.1", port)], ca_certs=cafile)
        self.conn.set_listener("peer", self)
        if connect:
            self.connect(login, passcode)

    def connect(self, login: str = "guest", passcode: str = "guest", **headers: str) -> None:
        self.conn.connect(login, passcode, wait=True, headers=headers)

    # -- stomp.ConnectionListener -----------------------------------------------------

    def on_message(self, frame: Any) -> None:
        self.messages.put(frame)

    def on_receipt(self, frame: Any) -> None:
        self.receipts.put(frame.headers.get("receipt-id"))

    def on_error(self, frame: Any) -> None:
        self.errors.put(frame)

    def on_disconnected(self) -> None:
        self.disconnects.put(True)

    # -- helpers ------------------------------------------------------------------------

    def receipt(self, fn: Any, *args: Any, **kw: Any) -> None:
        """Call a stomp.py method with a receipt header and wait for the RECEIPT."""
        rid = uuid.uuid4().hex
        if fn.__name__ in ("ack", "nack", "begin", "commit", "abort"):
            kw["receipt"] = rid
        else:
            kw.setdefault("headers", {})["receipt"] = rid
        fn(*args, **kw)
        while True:
            try:
                got = self.receipts.get(timeout=WAIT)
            except queue.Empty:
                errors = []
                while not self.errors.empty():
                    errors.append(self.errors.get().headers)
                raise AssertionError(
                    f"no RECEIPT for {fn.__name__} {args} (errors: {errors})"
                ) from None
            if got == rid:
                return

    def next(self) -> Any:
        try:
            return self.messages.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError("no MESSAGE arrived") from None

    def nothing_more(self) -> bool:
        """True when no MESSAGE is waiting after a round trip with a receipt (what the
        broker had for this connection before the RECEIPT has arrived by then)."""
        tx = uuid.uuid4().hex
        self.receipt(self.conn.begin, tx)
        self.receipt(self.conn.abort, tx)
        return self.messages.empty()

    def ack(self, frame: Any) -> None:
        h = frame.headers
        if self.version == "1.2":
            self.receipt(self.conn.ack, h["ack"])
        elif self.version == "1.1":
            self.receipt(self.conn.ack, h["message-id"], h["subscription"])
        else:
            # 1.0 names the message only; the stock bridge also wants its subscription
            # (BSS4008 without it), which this broker reads too.
            self.receipt(
                self.conn.send_frame,
                "ACK",
                headers={"message-id": h["message-id"], "subscription": h["subscription"]},
            )

    def nack(self, frame: Any) -> None:
        h = frame.headers
        if self.version == "1.2":
            self.receipt(self.conn.nack, h["ack"])
        else:
            self.receipt(self.conn.nack, h["message-id"], h["subscription"])

    def close(self) -> None:
        if self.conn.is_connected():
            self.conn.disconnect()
