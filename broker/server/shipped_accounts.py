"""Which shipped accounts (admin/admin, guest/guest) are still on their shipped passwords
while the broker listens beyond loopback: said in the log once at start, and kept up to
date for the admin service's property listing (the portal's overview shows it).

The user repositories block (database, passwd file), so the look-ups run in the broker's
thread pool, at start and every :data:`REFRESH` seconds after.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker import props
from broker.security.shipped import SHIPPED_PASSWORDS, beyond_loopback, on_shipped_password
from broker.security.shipped import start_messages as shipped_start_messages

if TYPE_CHECKING:
    from .broker import Broker

__all__ = ["REFRESH", "ShippedAccounts"]

log = logging.getLogger("broker")

REFRESH = 30.0  # seconds between look-ups after the start


class ShippedAccounts:
    """The shipped accounts on their shipped passwords, as last looked up."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        # Services other hosts can reach ("jms on 0.0.0.0:7677"), known once they listen.
        self.exposed: list[str] = []
        self.in_use: list[str] = []
        self._checking = False

    def listening(self) -> list[tuple[str, str]]:
        """(service, host:port) of every listening socket, port mapper included."""
        out = []
        servers = [(svc.name, svc.server) for svc in self.broker.services]
        servers.append(("portmapper", self.broker.portmapper.server))
        for name, server in servers:
            for sock in getattr(server, "sockets", None) or ():
                host, port = sock.getsockname()[:2]
                out.append((name, f"{host}:{port}"))
        return out

    def lookup(self) -> list[str]:
        """The shipped accounts on their shipped passwords in any repository a service
        uses (blocking: the thread pool)."""
        repos = {id(r): r for r in self.broker.service_repositories.values()}.values()
        found = []
        for name in SHIPPED_PASSWORDS:
            for repo in repos:
                lookup = repo.lookup  # None: LDAP checks passwords itself
                record = lookup(name) if lookup is not None else None
                if record is not None and record.active:
                    if on_shipped_password(name, record.password_digest):
                        found.append(name)
                        break
        return found

    async def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Look up the accounts once the services listen and log what :func:`start_messages`
        says; a repository that fails here fails again at the first login, said then."""
        self.exposed = beyond_loopback(self.listening())
        if not self.exposed:
            return
        try:
            self.in_use = await loop.run_in_executor(self.broker.executor, self.lookup)
        except Exception as exc:
            log.error("cannot check the shipped accounts' passwords: %s", exc)
            return
        loopback_only = self.broker.shipped_loopback_only
        for level, text in shipped_start_messages(self.in_use, self.exposed, loopback_only):
            log.log(level, text)

    def refresh(self) -> None:
        """Look the accounts up again in the pool (a password changed since)."""
        if not self.exposed or self._checking:
            return
        self._checking = True

        def done(fut: asyncio.Future) -> None:
            self._checking = False
            if fut.cancelled():
                return
            if fut.exception() is None:
                self.in_use = fut.result()
            else:
                log.debug("shipped accounts check failed: %s", fut.exception())

        loop = asyncio.get_running_loop()
        loop.run_in_executor(self.broker.executor, self.lookup).add_done_callback(done)

    def reported(self) -> dict[str, str]:
        """The admin service's property for the portal: the accounts, while exposed."""
        if not self.exposed or not self.in_use:
            return {}
        return {props.SHIPPED_PASSWORDS_IN_USE: ",".join(self.in_use)}
