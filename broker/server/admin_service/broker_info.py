"""Admin requests about the broker itself (OpenMQ's HelloHandler,
GetBrokerPropsHandler, UpdateBrokerPropsHandler, ShutdownHandler, QuiesceHandler,
UnquiesceHandler, DebugHandler): HELLO, GET_BROKER_PROPS, UPDATE_BROKER_PROPS (the
properties that may change at run time: :data:`broker.props.RUNTIME_PROPERTIES`), SHUTDOWN,
QUIESCE_BROKER, UNQUIESCE_BROKER and DEBUG (``reload accesscontrol`` only)."""

from __future__ import annotations

import asyncio
import importlib.metadata
from typing import TYPE_CHECKING

from broker import props as imq
from broker.config import BrokerConfig
from broker.core import queries
from broker.propcheck import property_value_problem
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_properties_object,
    encode_hashtable,
    encode_properties_object,
)
from broker.protocol.names import (
    JMQ_BROKER_STATE,
    JMQ_COMMAND,
    JMQ_INSTANCE_NAME,
    JMQ_NO_FAILOVER,
    JMQ_RESTART,
    JMQ_TARGET,
    JMQ_TIME,
)
from broker.protocol.types import OPENMQ_VERSION, Status

from . import cluster as admin_cluster
from .common import AdminError, Result, log, save_config

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


try:
    PRODUCT_VERSION = importlib.metadata.version("openmq-py")
except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
    PRODUCT_VERSION = "0+source"
PRODUCT_NAME = "openmq-py"
# The OpenMQ release whose wire and admin protocol we follow (the vectors' imqcmd 6.9.0).

SHUTDOWN_DELAY = 0.2  # seconds between the SHUTDOWN reply and the stop


# Names newer imqcmd releases send (java.util.logging's) for ours.
PROPERTY_ALIASES = {
    ".level": imq.LOG_LEVEL.name,
    "java.util.logging.FileHandler.limit": imq.LOG_ROLLOVER_BYTES.name,
}


def broker_identity(config: BrokerConfig) -> dict[str, str]:
    """What GetBrokerPropsHandler adds to the configuration, as OpenMQ has it for a
    stand-alone (not embedded, not HA) broker: the version properties, the broker ID if
    one is configured, the cluster lists and the java.util.logging names imqcmd reads
    for the log level and rollover size.  The version is the OpenMQ release whose
    protocol we speak, so OpenMQ tools treat us as that release; our own name and
    version are in the product-name and build fields."""
    major, minor, _micro = OPENMQ_VERSION.split(".")
    values = {
        imq.PRODUCT_VERSION: OPENMQ_VERSION,
        imq.PRODUCT_MAJOR: major,
        imq.PRODUCT_MINOR: minor,
        imq.PRODUCT_NAME: PRODUCT_NAME,
        imq.PRODUCT_NAME_SHORT: PRODUCT_NAME,
        imq.BUILD_NUMBER: PRODUCT_VERSION,
        imq.BUILD_MILESTONE: "FCS",
        imq.EMBEDDED: "false",
        imq.CLUSTER_BROKERLIST.name: "",
        imq.CLUSTER_BROKERLIST_ACTIVE: "",
        # The level and rollover size the broker runs with (broker/logsetup.py reads
        # imq.log.file.rolloversize, then the older rolloverbytes; -1: no size limit).
        ".level": str(config.get(imq.LOG_LEVEL)).strip().upper(),
        "java.util.logging.FileHandler.limit": str(_rollover_bytes(config)),
    }
    # Globals.getBrokerID(): imq.brokerid, else the JDBC store's broker ID; none by default.
    brokerid = config.get(imq.BROKER_ID) or config.get(imq.JDBC_BROKER_ID)
    if brokerid:
        values[imq.BROKER_ID.name] = str(brokerid)
    if not config.get(imq.AUTOCREATE_USE_DMQ.name):
        values[imq.AUTOCREATE_USE_DMQ.name] = "true"
    return values


def _rollover_bytes(config: BrokerConfig) -> int:
    size = config.get(imq.LOG_ROLLOVER_SIZE)
    if size <= 0:
        size = config.get(imq.LOG_ROLLOVER_BYTES)
    return size if size > 0 else -1


def hello(conn: ConnectionEngine, props: dict) -> Result:
    b = conn.broker
    return {JMQ_INSTANCE_NAME: b.config.instance, JMQ_BROKER_STATE: b.state}, b""


def get_broker_props(conn: ConnectionEngine, props: dict) -> Result:
    b = conn.broker
    values = b.config.as_dict()
    # As OpenMQ adds to its configuration: the current totals.
    router = b.router
    # OpenMQ counts a transaction's messages from the send on (held_in_transactions).
    held = queries.held_in_transactions(router).values()
    values[imq.CURRENT_COUNT] = str(router.totals.count + sum(h[0] for h in held))
    values[imq.CURRENT_SIZE] = str(router.totals.bytes + sum(h[1] for h in held))
    values[imq.DMQ_CURRENT_COUNT] = str(router.dmq.msg_count)
    values[imq.DMQ_CURRENT_SIZE] = str(router.dmq.msg_bytes)
    values.update(broker_identity(b.config))
    values.update(admin_cluster.cluster_properties(b))
    # Ours: RUNNING, QUIESCING or QUIESCED; the memory state; open connections (the
    # portal's overview needs no connection list for a count).
    values[imq.BROKER_STATE] = b.state
    values[imq.MEMORY_STATE] = b.memory.state
    values[imq.CURRENT_CONNECTIONS] = str(len(b.connections))
    lag = b.loop_lag
    if lag is not None:  # the last window's event-loop lag, in milliseconds
        values[imq.LOOP_LAG_MAX] = f"{lag.max_ms:.3f}"
        values[imq.LOOP_LAG_P99] = f"{lag.p99_ms:.3f}"
    # Ours: admin/guest still on their shipped passwords while a service listens beyond
    # loopback (the portal's overview warns).
    values.update(b.shipped_accounts.reported())
    return {}, encode_properties_object(values)


def update_broker_props(conn: ConnectionEngine, props: dict, body: bytes):
    """UPDATE_BROKER_PROPS: only properties that can change at run time, all or none;
    applied now and written to the instance's config.properties."""
    if not body:
        raise AdminError(Status.BAD_REQUEST, "the request has no java.util.Properties body")
    try:
        wanted = decode_properties_object(body)
    except JavaSerializationError as exc:
        raise AdminError(Status.BAD_REQUEST, f"unreadable Properties body: {exc}") from None
    if not wanted:
        raise AdminError(Status.BAD_REQUEST, "no broker property to update")
    changes: dict[str, str] = {}
    refused: list[str] = []
    bad: list[str] = []
    for raw_name, value in wanted.items():
        name = PROPERTY_ALIASES.get(raw_name, raw_name)
        kind = imq.RUNTIME_PROPERTIES.get(name)
        if kind is None:
            refused.append(raw_name)
            continue
        why = property_value_problem(name, kind, value)
        if why is not None:
            bad.append(why)
        changes[name] = value.strip()
    if refused:
        raise AdminError(
            Status.BAD_REQUEST,
            "these properties cannot be changed at run time: " + ", ".join(sorted(refused)),
        )
    if bad:
        raise AdminError(Status.BAD_REQUEST, "; ".join(bad))
    return _apply_broker_props(conn, changes)


async def _apply_broker_props(conn: ConnectionEngine, changes: dict[str, str]) -> Result:
    broker = conn.broker
    config = broker.config
    port = changes.get(imq.PORTMAPPER_PORT.name)
    if port is not None and int(port) != config.get(imq.PORTMAPPER_PORT):
        try:
            await broker.portmapper.rebind(int(port))
        except OSError as exc:
            raise AdminError(
                Status.CONFLICT, f"imq.portmapper.port: cannot listen on port {port}: {exc}"
            ) from None
    for name, value in changes.items():
        config.set(name, value)
    broker.apply_properties(set(changes))
    await save_config(conn)
    conn.router.observers.router_event("broker.properties", {"names": sorted(changes)})
    log.info("broker properties updated: %s", changes)
    return {}, b""


def shutdown(conn: ConnectionEngine, props: dict) -> Result:
    restart = props.get(JMQ_RESTART) is True
    delay = props.get(JMQ_TIME)
    wait = SHUTDOWN_DELAY
    if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
        wait = float(delay)
    log.info(
        "%s requested by %s (%s)%s",
        "restart" if restart else "shutdown",
        conn.user,
        conn.peer,
        f" in {wait:g} s" if wait > SHUTDOWN_DELAY else "",
    )
    broker = conn.broker
    failover = props.get(JMQ_NO_FAILOVER) is not True  # HA: another broker takes over
    asyncio.get_running_loop().call_later(
        wait, lambda: broker.request_stop(restart=restart, failover=failover)
    )
    return {}, b""


def quiesce(conn: ConnectionEngine, props: dict) -> Result:
    broker = conn.broker
    if not broker.quiescing:
        broker.quiescing = True
        log.info("broker quiescing: no new client connections")
        conn.router.observers.router_event("broker.quiesce", {})
    return {JMQ_BROKER_STATE: broker.state}, b""


def unquiesce(conn: ConnectionEngine, props: dict) -> Result:
    broker = conn.broker
    if broker.quiescing:
        broker.quiescing = False
        log.info("broker no longer quiesced: client connections accepted again")
    return {JMQ_BROKER_STATE: broker.state}, b""


def debug(conn: ConnectionEngine, props: dict):
    """DEBUG: ``reload accesscontrol`` (ours); OpenMQ's other debug commands are not
    available."""
    cmd = str(props.get(JMQ_COMMAND) or "").strip().lower()
    target = str(props.get(JMQ_TARGET) or "").strip().lower()
    if cmd == "reload" and target == "accesscontrol":

        async def reload() -> Result:
            await conn.broker.reload_access_control()
            return {}, encode_hashtable({"accesscontrol": "reloaded"})

        return reload()
    raise AdminError(
        Status.NOT_IMPLEMENTED,
        f"DEBUG {props.get(JMQ_COMMAND)!s} {props.get(JMQ_TARGET) or ''}".rstrip()
        + " is not supported by this broker (only reload accesscontrol)",
    )
