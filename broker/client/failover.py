"""Connecting to one broker of several: an address list and the cluster's broker list.

A broker of a cluster names the brokers operating with it in HELLO_REPLY's
``JMQBrokerList`` (``mq://host:port/,mq://host:port/``, port-mapper ports).  A client
that loses its broker connects to the next one of its own address list, or of that
list, with :func:`connect_any`; what it had open (sessions, consumers) it opens again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from .connection import Connection, connect
from .errors import JMSException


def parse_address(text: str) -> tuple[str, int]:
    """``host:port``, ``mq://host:port/`` or ``mq://host:port/jms`` -> (host, port)."""
    rest = text.strip()
    if "://" in rest:
        rest = rest.split("://", 1)[1]
    rest = rest.split("/", 1)[0]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"not a broker address: {text!r}")
    return host, int(port)


def broker_list(conn: Connection) -> list[tuple[str, int]]:
    """The brokers ``conn``'s broker named in HELLO_REPLY (JMQBrokerList), if any."""
    hello = getattr(conn, "hello_reply", None) or {}
    text = str(hello.get("JMQBrokerList") or "")
    out = []
    for part in text.split(","):
        if part.strip():
            try:
                out.append(parse_address(part))
            except ValueError:
                continue  # one bad entry does not hide the others
    return out


async def connect_any(
    addresses: Iterable[str | tuple[str, int]],
    *,
    attempts: int = 3,
    delay: float = 1.0,
    **options: Any,
) -> Connection:
    """Connect to the first broker of ``addresses`` that answers (port-mapper ports),
    going round the list up to ``attempts`` times with ``delay`` seconds between
    rounds.  ``options`` are :func:`~broker.client.connect`'s."""
    targets = [a if isinstance(a, tuple) else parse_address(a) for a in addresses]
    if not targets:
        raise JMSException("no broker address to connect to")
    options.setdefault("connect_timeout", 10.0)
    errors: list[str] = []
    for round_ in range(max(1, attempts)):
        if round_:
            await asyncio.sleep(delay)
        for host, port in targets:
            try:
                return await connect(host, port, **options)
            except (JMSException, OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc}")
    raise JMSException("no broker of the list answered: " + "; ".join(errors[-len(targets) :]))


__all__ = ["broker_list", "connect_any", "parse_address"]
