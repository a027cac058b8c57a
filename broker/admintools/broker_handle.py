"""A blocking, process-wide handle on a running broker's admin service.

The portal, the REST API and ``manage.py imqcmd`` are synchronous Django code; the admin
protocol client (:class:`~broker.admintools.client.AdminClient`) is asyncio.  A
:class:`BrokerAdmin` keeps one admin connection open on a daemon thread's event loop and
runs each request there, so a page or an API call costs one request/reply round trip,
not a port-mapper lookup, a login and a session set-up::

    admin = BrokerAdmin("localhost", 7676, "admin", "admin")
    admin.purge("orders", 1)

Each request is a typed method named and signed as the :class:`AdminClient` coroutine it
runs (``purge(name, dest_type)``, ``destinations(name, dest_type)``...), so a caller's
mistake is a type error, not a misspelt string found at run time.

Requests on one connection are answered in order, so calls are serialised by a lock.
A connection that broke (broker restarted, connection destroyed) is reopened once.
"""

from __future__ import annotations

import asyncio
import functools
import ssl as _ssl
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .client import AdminClient, AdminError

__all__ = [
    "AdminError",
    "BrokerAdmin",
    "BrokerUnavailable",
    "admin_ssl_context",
    "settings_ssl_context",
]


P = ParamSpec("P")
R = TypeVar("R")


class BrokerUnavailable(ConnectionError):
    """The broker's admin service could not be reached or logged in to."""


def _blocking(
    method: Callable[Concatenate[AdminClient, P], Awaitable[R]],
) -> Callable[Concatenate[BrokerAdmin, P], R]:
    """``AdminClient.<method>`` as a blocking :class:`BrokerAdmin` method of the same
    name and signature."""

    @functools.wraps(method)
    def run(self: BrokerAdmin, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._request(method, *args, **kwargs)

    return run


def admin_ssl_context(truststore: str | None = None) -> _ssl.SSLContext:
    """The client context for the ``ssladmin`` service: trusting ``truststore`` (a PEM
    file) when given, else the system's CAs and this machine's broker certificate (the
    ``keystore.crt`` of the instance IMQ_VARHOME/IMQ_INSTANCE name).  ConfigError when
    the trust store cannot be read."""
    from django.conf import settings

    from broker.config import BrokerConfig, ConfigError
    from broker.security.tls import client_trust_context, keystore_paths

    local = None
    if truststore is None:
        try:
            config = BrokerConfig.load(settings.IMQ_INSTANCE, settings.IMQ_VARHOME)
            local = keystore_paths(config).certificate
        except ConfigError:
            local = None  # no readable local instance: the system's CAs alone
    return client_trust_context(truststore, local)


def settings_ssl_context() -> _ssl.SSLContext | None:
    """The ``ssladmin`` context the settings ask for: None without IMQ_ADMIN_SECURE (the
    plain admin service), else :func:`admin_ssl_context` of IMQ_ADMIN_TRUSTSTORE.
    BrokerUnavailable when the trust store cannot be read."""
    from django.conf import settings

    from broker.config import ConfigError

    if not getattr(settings, "IMQ_ADMIN_SECURE", False):
        return None
    try:
        return admin_ssl_context(getattr(settings, "IMQ_ADMIN_TRUSTSTORE", None) or None)
    except ConfigError as exc:
        raise BrokerUnavailable(f"IMQ_ADMIN_TRUSTSTORE: {exc}") from exc


class BrokerAdmin:
    """One admin connection to the broker whose port mapper is at ``host:port``; with
    ``ssl`` (a client context, :func:`admin_ssl_context`), over its ``ssladmin`` service."""

    def __init__(
        self,
        host: str = "localhost",
        port: int = 7676,
        user: str = "admin",
        password: str = "admin",
        *,
        timeout: float = 10.0,
        source: str = "",
        ssl: _ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.timeout = timeout
        # Where the credential comes from, named when the login is refused.
        self.source = source
        # The broker refused the last login: default_admin() checks the credential again.
        self.refused = False
        self.ssl = ssl
        self._client: AdminClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- the loop thread ----------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name=f"broker-admin {self.address}", daemon=True
            ).start()
            self._loop = loop
        return self._loop

    def _run(self, coro_factory: Callable[[], Any], timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro_factory(), self._ensure_loop())
        return future.result(timeout)

    async def _open(self) -> AdminClient:
        try:
            client = await AdminClient.open(
                self.host,
                self.port,
                self.user,
                self.password,
                connect_timeout=self.timeout,
                ssl=self.ssl,
            )
        except Exception as exc:
            tls = _tls_failure(exc)
            if tls is not None:
                raise BrokerUnavailable(
                    f"cannot open the ssladmin service of the broker at {self.address}: {tls}"
                ) from exc
            if isinstance(exc, (OSError, TimeoutError)):
                raise BrokerUnavailable(
                    f"broker at {self.address} is not reachable: {exc}"
                ) from exc
            # A refused login, a bad service list, ...
            self.refused = True
            who = f" as {self.user} ({self.source})" if self.source else ""
            raise BrokerUnavailable(
                f"cannot open the admin service at {self.address}{who}: {exc}"
            ) from exc
        self.refused = False
        return client

    # -- requests -----------------------------------------------------------------------

    def _request(
        self,
        method: Callable[Concatenate[AdminClient, P], Awaitable[R]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Run ``method(client, *args, **kwargs)`` on the loop thread; AdminError for a
        refused request, BrokerUnavailable when the broker cannot be reached."""
        with self._lock:
            for attempt in (1, 2):
                fresh = self._client is None
                if fresh:
                    self._client = self._run(self._open, self.timeout * 2)
                client = self._client
                try:
                    return self._run(
                        functools.partial(method, client, *args, **kwargs), self.timeout * 3
                    )
                except AdminError:
                    raise
                except (OSError, EOFError, TimeoutError) as exc:
                    self._drop()
                    if fresh or attempt == 2:
                        raise BrokerUnavailable(
                            f"broker at {self.address} did not answer: {exc or type(exc).__name__}"
                        ) from exc
                except Exception as exc:
                    # The client raises its own JMSException when the connection went away.
                    if client.conn.is_closed and not fresh and attempt == 1:
                        self._drop()
                        continue
                    if client.conn.is_closed:
                        self._drop()
                        raise BrokerUnavailable(
                            f"broker at {self.address} closed the admin connection: {exc}"
                        ) from exc
                    raise
        raise AssertionError("unreachable")

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """The typed method named ``method``: for an interactive session or a script that
        takes the request's name from its input (the portal uses the typed methods)."""
        return getattr(self, method)(*args, **kwargs)

    # The requests, one per AdminClient command (see there for what each sends).
    hello = _blocking(AdminClient.hello)
    broker_props = _blocking(AdminClient.broker_props)
    update_broker_props = _blocking(AdminClient.update_broker_props)
    state = _blocking(AdminClient.state)
    pause = _blocking(AdminClient.pause)
    resume = _blocking(AdminClient.resume)
    quiesce = _blocking(AdminClient.quiesce)
    unquiesce = _blocking(AdminClient.unquiesce)
    shutdown = _blocking(AdminClient.shutdown)
    restart = _blocking(AdminClient.restart)
    takeover = _blocking(AdminClient.takeover)
    reload_cluster = _blocking(AdminClient.reload_cluster)
    change_master_broker = _blocking(AdminClient.change_master_broker)
    reload_access_control = _blocking(AdminClient.reload_access_control)
    metrics = _blocking(AdminClient.metrics)
    reset_metrics = _blocking(AdminClient.reset_metrics)
    reclaim_expired = _blocking(AdminClient.reclaim_expired)

    services = _blocking(AdminClient.services)
    pause_service = _blocking(AdminClient.pause_service)
    resume_service = _blocking(AdminClient.resume_service)
    update_service = _blocking(AdminClient.update_service)

    destinations = _blocking(AdminClient.destinations)
    destinations_page = _blocking(AdminClient.destinations_page)
    destination_attributes = _blocking(AdminClient.destination_attributes)
    create_destination = _blocking(AdminClient.create_destination)
    update_destination = _blocking(AdminClient.update_destination)
    destroy = _blocking(AdminClient.destroy)
    purge = _blocking(AdminClient.purge)
    pause_destination = _blocking(AdminClient.pause_destination)
    resume_destination = _blocking(AdminClient.resume_destination)
    compact = _blocking(AdminClient.compact)
    consumers = _blocking(AdminClient.consumers)
    producers = _blocking(AdminClient.producers)
    messages = _blocking(AdminClient.messages)
    delete_message = _blocking(AdminClient.delete_message)

    connections = _blocking(AdminClient.connections)
    connection = _blocking(AdminClient.connection)
    destroy_connection = _blocking(AdminClient.destroy_connection)

    durables = _blocking(AdminClient.durables)
    purge_durable = _blocking(AdminClient.purge_durable)
    destroy_durable = _blocking(AdminClient.destroy_durable)

    transactions = _blocking(AdminClient.transactions)
    commit_transaction = _blocking(AdminClient.commit_transaction)
    rollback_transaction = _blocking(AdminClient.rollback_transaction)

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is not None:
            try:
                self._run(client.close, 5)
            except Exception:  # already gone: nothing left to close
                pass

    def close(self) -> None:
        """Close the connection and stop the loop thread."""
        with self._lock:
            self._drop()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._loop = None


def _tls_failure(exc: BaseException) -> str | None:
    """What went wrong in the TLS handshake behind ``exc`` (the client wraps it), in
    words that say what to do; None when TLS is not the cause."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _ssl.SSLCertVerificationError):
            return (
                f"its certificate is not trusted ({seen.verify_message or seen.reason}): "
                "trust the broker's keystore.crt (or the CA that signed it)"
            )
        if isinstance(seen, _ssl.SSLError):
            return f"TLS failed: {seen.reason or seen}"
        seen = seen.__cause__
    return None
