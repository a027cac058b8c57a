"""The broker process: what it runs, its start-up and shutdown, its connections' books
and the memory states.

Its parts with a subject of their own are beside it: the connection services and their
configuration (services.py), the port mapper (portmapper.py), the periodic jobs and pings
(housekeeping.py), and the settings derived from the broker properties
(derived_settings.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import resource
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from broker import props
from broker.config import BrokerConfig
from broker.core.message import BODIES
from broker.core.observers import RouterObservers
from broker.core.router import MessageRouter, RouterSettings
from broker.engine import ConnectionEngine
from broker.protocol.javaser import encode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_BROKER_LIST,
    JMQ_BROKER_NAME,
    JMQ_CLUSTER_ID,
    JMQ_CONNECTION_COUNT,
    JMQ_HA,
    JMQ_MEMORY_STATE,
    JMQ_MESSAGE_BYTES,
    JMQ_MESSAGE_COUNT,
    JMQ_REQUEST_TYPE,
    JMQ_STATUS,
    JMQ_STORE_SESSION,
    JMQ_VERSION,
)
from broker.protocol.packet import Packet, build_packet
from broker.protocol.types import (
    OPENMQ_VERSION,
    GoodbyeReason,
    PacketType,
    Status,
)
from broker.security.acl import AccessController
from broker.security.repository import (
    LoginThrottle,
    UserRepositories,
    UserRepository,
    check_auth_repository,
)
from broker.security.tlsaccept import listening_socket, serve
from broker.store import ha_settings, open_store
from broker.store.base import Store

from .clustering import start_cluster
from .derived_settings import frame_limit, memory_budget, memory_manager, router_settings
from .events import EventPublisher
from .housekeeping import Housekeeping
from .jmx import JmxConnector, start_jmx
from .log_topic import LogTopic
from .looplag import FullCollections, LoopLagMonitor, freeze_startup_heap
from .metrics_topics import MetricsReport, MetricsTopics, report_interval
from .paging import RUNTIME as PAGING_RUNTIME
from .paging import Paging, open_paging
from .portmapper import PortMapper
from .reporting import attach_reports
from .services import Service, configured_services
from .shipped_accounts import REFRESH as REFRESH_SHIPPED
from .shipped_accounts import ShippedAccounts
from .transaction_rows import TransactionRecords

if TYPE_CHECKING:
    from broker.cluster.service import ClusterService
    from broker.server.admin_service.bridge import BridgeService
    from broker.server.hamonitor import HAMonitor

log = logging.getLogger("broker")

PRODUCT_NAME = "OpenMQ-compatible Python broker"


class Broker:
    """Everything one broker process runs."""

    def __init__(
        self, config: BrokerConfig, user_repository: UserRepositories | UserRepository | None
    ) -> None:
        self.config = config
        # A UserRepositories (one per service, chosen in _service) or one repository.
        self.user_repository = user_repository
        self.service_repositories: dict[str, UserRepository] = {}
        self.login_throttle = LoginThrottle()
        # admin/admin and guest/guest from loopback only (security/shipped.py).
        self.shipped_loopback_only = config.get(props.SHIPPED_LOOPBACK_ONLY)
        self.shipped_accounts = ShippedAccounts(self)
        self.version = OPENMQ_VERSION  # clients display it
        self.product_name = PRODUCT_NAME
        self.session_id = random.randint(1, 2**62)
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="broker-db")
        # The rows administrators see (BrokerTransaction), written in the thread pool.
        self.txn_records = TransactionRecords(config.instance, self.executor)
        self.router = MessageRouter(
            router_settings(config),
            observers=RouterObservers(
                producer_flow=self, delay_timer=self, transactions=[self.txn_records]
            ),
        )
        # The XA JMQAutoRollback default (imq.transaction.autorollback).
        self.router.xa_autorollback_all = config.get(props.TRANSACTION_AUTOROLLBACK)
        self.reports = attach_reports(self)  # IBM MQ report messages (core/reports.py)
        self._delay_timer: asyncio.TimerHandle | None = None
        self._delay_due = 0
        self.services: list[Service] = []
        self.connections: dict[int, ConnectionEngine] = {}
        self.portmapper = PortMapper(self)
        self.jmx: JmxConnector | None = None  # imq.jmx.connector.activelist (server/jmx.py)
        # imqbridgemgr's view of the bridges (server/admin_service/bridge.py), made on first use.
        self.bridge_service: BridgeService | None = None
        self.started_at = time.time()
        c = config
        self.auth_timeout = c.get(props.AUTH_RESPONSE_TIMEOUT)
        self.max_packet_size = frame_limit(c)
        self.memory = memory_manager(c)
        # Connections told to wait (red memory state) until memory recovers.
        self.flow_waiting: set[ConnectionEngine] = set()
        self.housekeeping = Housekeeping(self)
        self.full_collections: FullCollections | None = None
        # Live events on the channel layer and MetricSample rows (events.py), once started.
        self.events: EventPublisher | None = None
        # The event-loop lag probe (looplag.py), once started.
        self.loop_lag: LoopLagMonitor | None = None
        # The mq.metrics.* topics' publisher and the log's metrics report
        # (metrics_topics.py), once started; the report only with imq.metrics.interval.
        self.metrics_topics: MetricsTopics | None = None
        # The log on mq.log.broker for its subscribers (log_topic.py), once started.
        self.log_topic: LogTopic | None = None
        self.metrics_report: MetricsReport | None = None
        self.store: Store | None = None
        # Message bodies paged out to disk past a memory threshold (server/paging.py).
        self.paging: Paging | None = None
        # Extra HELLO_REPLY properties (an HA cluster's JMQHA, JMQBrokerList...).
        self.hello_properties: dict[str, object] = {}
        self.ha: HAMonitor | None = None  # in an HA cluster (engine/ports.HAPort)
        # An HA broker that stops hands its rows to another broker (OpenMQ's default),
        # unless restarting or told -nofailover.
        self.failover_on_stop = True
        self._stopping = asyncio.Event()
        # Admin QUIESCE_BROKER: NORMAL services refuse new connections until UNQUIESCE.
        self.quiescing = False
        # Admin RESTART (SHUTDOWN with JMQRestart): the process starts again once stopped.
        self.restart_requested = False
        # Access control (security/acl.py): rules in memory, reloaded off the loop.
        self.access = AccessController(config)
        # The cluster service (broker/cluster/), when imq.cluster.brokerlist names peers
        # (engine/ports.ClusterPort).
        self.cluster: ClusterService | None = None

    # -- configuration -------------------------------------------------------

    def _repository_for(self, service: str, auth: str) -> UserRepository | None:
        """imq[.<service>].authentication.<auth>.user_repository (security/repository.py);
        one repository given to the broker (tests, benches) serves every service."""
        repos = self.user_repository
        if isinstance(repos, UserRepositories):
            return repos.for_service(service, auth)
        if repos is not None and repos.kind == "ldap":
            check_auth_repository(auth, "ldap", service)
        return repos

    def repository_for(self, svc: Service) -> UserRepository | None:
        """The user repository that authenticates connections to ``svc``."""
        repo = self.service_repositories.get(svc.name)
        return repo if repo is not None else self._repository_for(svc.name, svc.auth_type)

    # -- life cycle -------------------------------------------------------------

    async def start(self) -> None:
        _raise_fd_limit()
        loop = asyncio.get_running_loop()
        c = self.config
        # Services are configured (key material unlocked) before the store is opened, so a
        # bad configuration refuses to start without touching anything.
        services = configured_services(c, self._repository_for, self.service_repositories)
        if c.get(props.GC_FREEZE):
            freeze_startup_heap()  # before the store: recovered messages stay collectable
        # The previous run's transaction rows go before the store brings transactions
        # back; only a started broker writes them (an in-process one in tests does not).
        self.txn_records.start()
        await self._open_store(loop)
        self.check_disk()
        self.access.prepare(svc.name for svc in services)
        await loop.run_in_executor(self.executor, self.access.load)
        self.metrics_topics = MetricsTopics(self)
        self.log_topic = LogTopic(self)
        for svc in services:
            if svc.protocol in ("http", "https"):
                from .tunnel import TunnelService

                svc.tunnel = TunnelService(self, svc)
                svc.tunnel.start()
            svc.server = await serve(
                svc.protocol_factory(self),
                listening_socket(svc.host, svc.port, svc.backlog),
                svc.ssl_context,
                svc.name,
            )
            self.services.append(svc)
            log.info(
                "service %s (%s %s) listening on %s:%s",
                svc.name,
                svc.protocol,
                svc.type,
                svc.host or "*",
                svc.bound_port,
            )
        self.jmx = await start_jmx(self)
        self.portmapper.bind()
        # The cluster service (which names this broker by its port mapper's port) starts
        # before the port mapper answers, so no one is given a table without it.
        self.cluster = await start_cluster(self)
        await self.portmapper.serve()
        self.housekeeping.start()
        self.loop_lag = LoopLagMonitor(
            loop, c.get(props.LOOP_LAG_WINDOW) or 10, c.get(props.LOOP_LAG_WARN)
        )
        self.loop_lag.start()
        self.full_collections = FullCollections(
            c.get(props.GC_DEFER_MESSAGES), c.get(props.GC_DEFER_MAXWAIT)
        )
        self.housekeeping.add(2, lambda: self.full_collections.tick(self.router.totals.count))
        self.events = EventPublisher(self)
        self.housekeeping.add(1, self.events.tick)
        report_every = report_interval(self)
        if report_every > 0:
            self.metrics_report = MetricsReport(self)
            self.housekeeping.add(report_every, self.metrics_report.report)
        self.housekeeping.restart_expiry_job()
        await self.shipped_accounts.start(loop)
        self.housekeeping.add(REFRESH_SHIPPED, self.shipped_accounts.refresh)
        log.info("broker %s ready", c.instance)

    @property
    def portmapper_port(self) -> int:
        """The port mapper's port (its bound one once it listens)."""
        return self.portmapper.port

    async def run_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._stopping.set)
            except (NotImplementedError, RuntimeError):
                pass
        await self._stopping.wait()
        await self.shutdown()

    def request_stop(self, restart: bool = False, failover: bool = True) -> None:
        """Stop the broker; with ``restart`` the process then starts it again
        (``runbroker`` re-executes itself, as imqbrokerd restarts on exit code 255).
        In an HA cluster another broker then takes its rows over, unless ``restart`` or
        not ``failover`` (imqcmd shutdown bkr -nofailover)."""
        if restart:
            self.restart_requested = True
        if restart or not failover:
            self.failover_on_stop = False
        if not self._stopping.is_set():
            self.router.observers.router_event("broker.shutdown", {"restart": restart})
        self._stopping.set()

    # -- administration (admin protocol) ------------------------------------------------

    @property
    def state(self) -> str:
        """RUNNING, QUIESCING (no new client connections, some still open) or QUIESCED."""
        if not self.quiescing:
            return "RUNNING"
        if any(s.connections for s in self.services if s.type != "ADMIN"):
            return "QUIESCING"
        return "QUIESCED"

    def accepts_connection(self, svc: Service) -> bool:
        """False while the broker is quiesced and ``svc`` is a NORMAL service."""
        return not (self.quiescing and svc.type != "ADMIN")

    async def rebind_service(self, svc: Service, port: int) -> None:
        """Listen on ``port`` instead (0: any free port); open connections carry on.
        Raises OSError when the port cannot be bound (the old listener stays)."""
        sock = listening_socket(svc.host, port, svc.backlog)
        try:
            server = await serve(svc.protocol_factory(self), sock, svc.ssl_context, svc.name)
        except BaseException:
            sock.close()
            raise
        old, svc.server, svc.port = svc.server, server, port
        if old is not None:
            old.close()
        log.info("service %s now listening on %s:%s", svc.name, svc.host or "*", svc.bound_port)

    async def reload_access_control(self) -> None:
        """Read every access control rule source again now (whether it looks changed or
        not); connections re-check their cached send decisions."""
        access = self.access

        def reload() -> None:
            for src in list(access._sources.values()):
                src.stamp = None
            access.poll()

        await asyncio.get_running_loop().run_in_executor(self.executor, reload)
        log.info("access control rules reloaded")

    def apply_properties(self, names: set[str]) -> None:
        """Broker properties an administrator changed in ``config``: apply them now."""
        from dataclasses import fields as dc_fields

        from broker.logsetup import RolloverFileHandler, parse_level

        c = self.config
        fresh = router_settings(c)
        settings = self.router.settings
        for f in dc_fields(RouterSettings):
            setattr(settings, f.name, getattr(fresh, f.name))
        self.max_packet_size = frame_limit(c)
        if props.LOG_LEVEL.name in names:
            logging.getLogger().setLevel(parse_level(c.get(props.LOG_LEVEL)))
        rollover = (props.LOG_ROLLOVER_SECS, props.LOG_ROLLOVER_BYTES, props.LOG_ROLLOVER_SIZE)
        if names & {p.name for p in rollover}:
            max_bytes = c.get(props.LOG_ROLLOVER_SIZE)
            if max_bytes <= 0:
                max_bytes = c.get(props.LOG_ROLLOVER_BYTES)
            secs = c.get(props.LOG_ROLLOVER_SECS)
            for handler in logging.getLogger().handlers:
                if isinstance(handler, RolloverFileHandler):
                    handler.maxBytes = max(max_bytes, 0)
                    handler.rollover_secs = max(secs, 0)
        if props.EXPIRATION_INTERVAL.name in names:
            self.housekeeping.restart_expiry_job()
        if props.SYSTEM_MAX_SIZE.name in names:
            changed = self.memory.set_budget(memory_budget(c))
            if self.paging is not None:
                self.paging.set_budget(self.memory.budget)
            if changed is not None:
                self._memory_state_changed(changed)
            self.check_memory()
        if props.TRANSACTION_AUTOROLLBACK.name in names:
            self.router.xa_autorollback_all = c.get(props.TRANSACTION_AUTOROLLBACK)
        if self.paging is not None and names & PAGING_RUNTIME:
            self.paging.configure(c, self.memory.budget)
            self.check_disk()  # an administrator lifting a hold is obeyed at once

    async def shutdown(self) -> None:
        log.info("broker %s shutting down", self.config.instance)
        if self.cluster is not None:
            await self.cluster.stop()
        if self.ha is not None:
            self.ha.close()
        self.housekeeping.close()
        if self.loop_lag is not None:
            self.loop_lag.close()
        if self.full_collections is not None:
            self.full_collections.close()
        if self.events is not None:
            self.events.close()
        if self.metrics_topics is not None:
            self.metrics_topics.close()
        if self.log_topic is not None:
            self.log_topic.close()
        servers = [s.server for s in self.services if s.server]
        if self.portmapper.server:
            servers.append(self.portmapper.server)
        if self.jmx is not None:
            servers += self.jmx.listeners
            self.jmx.close()
        for s in servers:
            s.close()
        for conn in list(self.connections.values()):
            if self.restart_requested:
                conn.send_goodbye(GoodbyeReason.RESTART_BKR, "broker is restarting")
            else:
                conn.send_goodbye(GoodbyeReason.SHUTDOWN_BKR, "broker is shutting down")
            conn.close()
        for svc in self.services:
            if svc.tunnel is not None:
                await svc.tunnel.close()
        for s in servers:
            try:
                await asyncio.wait_for(s.wait_closed(), 5)
            except TimeoutError:
                pass
        if self.paging is not None:
            self.paging.close()
        if self.store is not None:
            if self.ha is not None and self.failover_on_stop and not self.restart_requested:
                self.store.failover_on_release = True  # type: ignore[attr-defined]
            self.store.close()
        self.executor.shutdown(wait=False, cancel_futures=True)
        log.info("broker %s stopped", self.config.instance)

    # -- connections ---------------------------------------------------------------

    def connection_opened(self, conn: ConnectionEngine) -> None:
        self.connections[conn.id] = conn
        conn.service.connections.add(conn)
        conn.service.connections_opened += 1
        observers = self.router.observers
        if observers.router_events:
            observers.router_event("connection.opened", _connection_event(conn))

    def connection_closed(self, conn: ConnectionEngine) -> None:
        self.connections.pop(conn.id, None)
        conn.service.connections.discard(conn)
        self.flow_waiting.discard(conn)

    def over_connection_limit(self, svc: Service) -> bool:
        return 0 <= svc.max_connections < len(svc.connections)

    def destroy_stale_connection(self, old_id: int, new: ConnectionEngine) -> None:
        old = self.connections.get(old_id)
        if old is not None and old is not new:
            log.info("connection %s replaced by reconnect %s", old_id, new.id)
            old.close()

    def hello_verdict(self, props: dict) -> tuple[int, dict[str, object], str | None]:
        """HELLO's status for a client naming the cluster and store session it was
        connected to (an HA cluster's reconnecting client; broker.server.hamonitor); OK otherwise."""
        if self.ha is None:
            return Status.OK, {}, None
        return self.ha.hello_verdict(props.get(JMQ_CLUSTER_ID), props.get(JMQ_STORE_SESSION))

    def failed_over_here(self, props: dict) -> bool:
        """Whether a HELLO that this broker let in names an HA store session that is not
        this broker's own: the client failed over here from a broker whose rows this one
        took over (or from an earlier run of this one)."""
        if self.ha is None:
            return False
        session = props.get(JMQ_STORE_SESSION)
        if not isinstance(session, int) or isinstance(session, bool):
            return False
        return session != self.ha.session

    def answer_info_request(self, conn: ConnectionEngine, pkt: Packet) -> None:
        """INFO_REQUEST (no reply flag): answer with an INFO packet whose body is a
        serialised Hashtable describing this broker (we are never part of a cluster yet)."""
        req = pkt.properties.get(JMQ_REQUEST_TYPE, 1)
        info: dict[str, object] = {
            JMQ_BROKER_NAME: self.config.instance,
            JMQ_VERSION: self.version,
            JMQ_CONNECTION_COUNT: JInt(len(self.connections)),
            JMQ_MEMORY_STATE: self.memory.state,
            JMQ_MESSAGE_COUNT: JInt(self.router.totals.count),
            JMQ_MESSAGE_BYTES: JLong(self.router.totals.bytes),
            JMQ_BROKER_LIST: self.cluster.broker_list() if self.cluster is not None else "",
            JMQ_HA: bool(self.hello_properties.get(JMQ_HA)),
        }
        props: dict[str, object] = {JMQ_REQUEST_TYPE: JInt(int(req)), JMQ_STATUS: JInt(200)}
        if info[JMQ_BROKER_LIST]:
            # The stock client reads the list from the properties, not the body.
            props[JMQ_BROKER_LIST] = info[JMQ_BROKER_LIST]
        conn.write(
            build_packet(
                PacketType.INFO,
                props=props,
                body=encode_hashtable(info),
                consumer_id=pkt.consumer_id,
            )
        )

    def broker_list_changed(self) -> None:
        """An HA cluster's members changed: every client connection (protocol 4.0 and
        later) gets an unsolicited cluster INFO packet (JMQRequestType 2) with the new
        JMQBrokerList, as the stock broker sends one when a broker is added or removed;
        the stock client replaces its broker list with it and fails over by it."""
        if self.ha is None:
            return
        packet = self._cluster_info_packet(self.ha)
        for conn in list(self.connections.values()):
            if not conn.admin and conn.user is not None and conn.protocol_level >= 400:
                conn.write(packet)

    def tell_broker_list(self, conn: ConnectionEngine) -> None:
        """The cluster INFO of :meth:`broker_list_changed`, to one connection: one that
        logged in after the list its HELLO_REPLY gave had changed."""
        if self.ha is not None and conn.protocol_level >= 400:
            conn.write(self._cluster_info_packet(self.ha))

    def _cluster_info_packet(self, ha: HAMonitor) -> bytes:
        return build_packet(
            PacketType.INFO,
            props={
                JMQ_REQUEST_TYPE: JInt(2),
                JMQ_STATUS: JInt(200),
                JMQ_BROKER_LIST: self.hello_properties[JMQ_BROKER_LIST],
            },
            body=encode_hashtable(ha.cluster_info(), nested=True),
        )

    # -- delayed delivery ----------------------------------------------------------

    # -- the router's observers (broker/core/observers.py) ---------------------------

    def producer_room(self, link: Any, producer_id: int) -> None:
        link.resume_producer(producer_id)

    def producer_pause(self, link: Any, producer_id: int) -> None:
        link.pause_producer(producer_id)

    def delayed_due(self, due_ms: int) -> None:
        if self._delay_timer is not None and self._delay_due <= due_ms:
            return
        if self._delay_timer is not None:
            self._delay_timer.cancel()
        loop = asyncio.get_running_loop()
        self._delay_due = due_ms
        self._delay_timer = loop.call_later(max(due_ms / 1000 - time.time(), 0), self._release)

    def _release(self) -> None:
        self._delay_timer = None
        nxt = self.router.release_due()
        if nxt is not None:
            self.delayed_due(nxt)

    # -- the message store ----------------------------------------------------------

    async def _open_store(self, loop: asyncio.AbstractEventLoop) -> None:
        store = open_store(self.config)
        started = time.monotonic()
        # A broker that pages serves as soon as the store's index is loaded: the bodies
        # stay on disk until read back for delivery.
        store.lazy_bodies = self.config.get(props.SWAP_ENABLED) and store.reads_bodies
        # Off the loop: the database store uses the ORM, which refuses async contexts.
        state = await loop.run_in_executor(self.executor, store.load)
        for repair in state.repairs:
            log.warning("message store recovery: %s", repair)
        self.router.attach_store(store)
        self.paging = open_paging(self.config, self.router, store, self.memory.budget)
        counts = self.router.recover(state)
        if self.paging is not None:
            self.paging.recovered(self.router)
        store.on_lost = self._store_lost
        store.start(loop)
        self.store = store
        ha = ha_settings(self.config)
        if ha is not None:
            from broker.server.hamonitor import HAMonitor

            self.ha = HAMonitor(
                self,
                store,  # type: ignore[arg-type]
                cluster_id=ha.cluster_id,
                interval=ha.interval,
                threshold=ha.threshold,
            )
            self.ha.start(loop)
        log.info(
            "message store %s: recovered %d destinations, %d durable subscriptions, "
            "%d messages in %.2f s",
            type(store).__name__,
            counts["destinations"],
            counts["durables"],
            counts["messages"],
            time.monotonic() - started,
        )

    def _store_lost(self) -> None:
        """The database store's rows were taken (the expiry job found this broker's
        heartbeat stale): what is in memory no longer matches them, so stop; a restart
        loads the rows as they are."""
        log.error(
            "broker %s stops: it is fenced off, its message store was taken over",
            self.config.instance,
        )
        self.request_stop()

    def when_stored(self, callback) -> None:
        """Run ``callback`` once what was submitted is written: on disk with sync on, in
        the operating system's hands without it, which is what survives a SIGKILL.

        (Without sync this ran at once, before the write: a reply could say "stored"
        while the record waited behind a compaction in the writer thread, and a SIGKILL
        then lost thousands of confirmed messages; found by bench/crash_soak.py.)"""
        store = self.store
        if store is not None:
            store.after_durable(callback)
        else:
            callback()

    # -- housekeeping --------------------------------------------------------------

    def check_memory(self) -> None:
        """Move between memory states as message bodies come into memory and go."""
        changed = self.memory.update(BODIES.bytes)
        if changed is not None:
            self._memory_state_changed(changed)

    def check_disk(self) -> None:
        """Hold producers while the swap area's or the store's disk is short of space
        (said once in the log each way); resume them when there is room again."""
        if self.paging is None:
            return
        reason = self.paging.disk_short()
        if not self.memory.hold(reason):
            return
        if reason is not None:
            log.error("producers are held: %s", reason)
            return
        log.info("producers resume: the disk has room again")
        self._resume_flow_waiting()

    def _memory_state_changed(self, changed) -> None:
        m = self.memory
        msg = "memory state %s: %.0f%% of %d bytes in use, clients may send %s messages per batch"
        count = "no" if m.count == 0 else m.count
        if changed.name == "green":
            log.info(msg, m.state.upper(), m.percent, m.budget, count)
        else:
            log.warning(msg, m.state.upper(), m.percent, m.budget, count)
        self.router.observers.router_event(
            "broker.resource_state", {"old": m.previous, "new": m.state}
        )
        self._resume_flow_waiting()

    def _resume_flow_waiting(self) -> None:
        m = self.memory
        if m.count != 0 and self.flow_waiting:
            waiting, self.flow_waiting = self.flow_waiting, set()
            for conn in waiting:
                conn.resume_connection_flow(m.count)


def _raise_fd_limit() -> None:
    # Thousands of idle connections need more descriptors than the usual soft limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _connection_event(conn: Any) -> dict[str, object]:
    """What a connection event tells of a client connection (JMX's notifications)."""
    peer = str(conn.peer or "")
    return {
        "id": conn.id,
        "service": conn.service.name,
        "user": conn.user,
        "host": peer.rpartition(":")[0] or peer,
    }
