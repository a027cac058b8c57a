"""Admin requests about the connection services (OpenMQ's GetServicesHandler,
UpdateServiceHandler, PauseHandler, ResumeHandler): GET_SERVICES, UPDATE_SERVICE, and
PAUSE / RESUME of a service, of every service, or of a destination.

PAUSE / RESUME: JMQPauseTarget names the property that identifies the target.  A
destination: consumers-paused stops its dispatch, producers-paused withholds the
producers' RESUME_FLOW (like FLOW_CONTROL: a producer stops at its next flow-control
point and a new one gets JMQSize 0; messages already in flight are accepted).  A
service (or, without a target, every NORMAL service): new connections get HELLO_REPLY
503 until RESUME; established connections carry on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.core.admin_views import THREADS_PER_CONNECTION
from broker.props import STOMP_TCP_PORT
from broker.protocol.admin_info import (
    SERVICE_MAX_THREADS,
    SERVICE_MIN_THREADS,
    SERVICE_PORT,
    encode_infos,
    service_info,
)
from broker.protocol.names import (
    JMQ_DEST_STATE,
    JMQ_DESTINATION,
    JMQ_PAUSE_TARGET,
    JMQ_SERVICE_NAME,
)
from broker.protocol.types import DestState, Status

from .common import AdminError, Result, log, lookup, read_info, save_config

if TYPE_CHECKING:
    from broker.engine import ConnectionEngine


# com.sun.messaging.jmq.util.ServiceState
SERVICE_RUNNING = 3


SERVICE_PAUSED = 4


SERVICE_STOPPED = 6


def get_services(conn: ConnectionEngine, props: dict) -> Result:
    broker = conn.broker
    wanted = props.get(JMQ_SERVICE_NAME)
    services = [s for s in broker.services if not wanted or s.name == wanted]
    if wanted and not services:
        raise AdminError(Status.NOT_FOUND, f"service {wanted} not found")
    config = broker.config
    infos = []
    for svc in services:
        admin = svc.type == "ADMIN"
        if svc.paused:
            state = SERVICE_PAUSED
        else:
            state = SERVICE_RUNNING if svc.server is not None else SERVICE_STOPPED
        infos.append(
            service_info(
                name=svc.name,
                protocol=svc.protocol,
                type=1 if admin else 0,
                state=state,
                nConnections=len(svc.connections),
                currentThreads=THREADS_PER_CONNECTION * len(svc.connections),
                dynamicPort=svc.port == 0,
                port=svc.listed_port,
                minThreads=config.get_int(f"imq.{svc.name}.min_threads", 4 if admin else 10),
                maxThreads=config.get_int(f"imq.{svc.name}.max_threads", 10 if admin else 1000),
            )
        )
    return {}, encode_infos(infos)


def update_service(conn: ConnectionEngine, props: dict, body: bytes):
    """UPDATE_SERVICE: the port (the service listens there from now on; open
    connections carry on) and the thread counts.  With no threads here, maxThreads
    is the service's connection limit (-1: none) and minThreads is only recorded."""
    info = read_info(body, "ServiceInfo")
    broker = conn.broker
    name = info.get("name")
    svc = next((s for s in broker.services if s.name == name), None)
    if svc is None:
        raise AdminError(Status.NOT_FOUND, f"service {name} not found")
    mask = int(info.get("updateMask") or 0)
    if not mask & (SERVICE_PORT | SERVICE_MIN_THREADS | SERVICE_MAX_THREADS):
        raise AdminError(Status.BAD_REQUEST, f"no property of service {name} to update")
    port = int(info.get("port", 0)) if mask & SERVICE_PORT else None
    low = int(info.get("minThreads", 0)) if mask & SERVICE_MIN_THREADS else None
    high = int(info.get("maxThreads", 0)) if mask & SERVICE_MAX_THREADS else None
    if port is not None and not 0 <= port < 65536:
        raise AdminError(Status.BAD_REQUEST, f"{port} is not a port number")
    if low is not None and low < 0:
        raise AdminError(Status.BAD_REQUEST, f"minThreads {low} is negative")
    if high is not None and (high == 0 or high < -1):
        raise AdminError(Status.BAD_REQUEST, f"maxThreads {high} must be positive (or -1)")
    config = broker.config
    if high is None:
        high_now = config.get_int(f"imq.{name}.max_threads", 10 if svc.type == "ADMIN" else 1000)
    else:
        high_now = high
    if low is not None and high_now > 0 and low > high_now:
        raise AdminError(Status.BAD_REQUEST, f"minThreads {low} is above maxThreads {high_now}")

    async def apply() -> Result:
        if port is not None and port != svc.bound_port:
            try:
                await broker.rebind_service(svc, port)
            except OSError as exc:
                raise AdminError(
                    Status.CONFLICT, f"service {name} cannot listen on port {port}: {exc}"
                ) from None
            # The STOMP listener's port has OpenMQ's bridge name.
            key = (
                STOMP_TCP_PORT.name
                if svc.protocol == "stomp"
                else f"imq.{name}.{svc.protocol}.port"
            )
            config.set(key, str(port))
        if low is not None:
            config.set(f"imq.{name}.min_threads", str(low))
        if high is not None:
            svc.max_connections = high if high > 0 else -1
            config.set(f"imq.{name}.max_threads", str(high))
            config.set(f"imq.{name}.max_connections", str(svc.max_connections))
        await save_config(conn)
        conn.router.observers.router_event("service.updated", {"name": name})
        log.info(
            "service %s updated:%s%s%s",
            name,
            f" port {port}" if port is not None else "",
            f" minThreads {low}" if low is not None else "",
            f" maxThreads (connection limit) {high}" if high is not None else "",
        )
        return {}, b""

    return apply()


def _pause_target(conn: ConnectionEngine, props: dict, state: DestState) -> None:
    target = props.get(JMQ_PAUSE_TARGET)
    if target == JMQ_DESTINATION or (target is None and JMQ_DESTINATION in props):
        dest = lookup(conn, props)
        conn.router.limits.set_dest_state(dest, state)
        log.info("destination %s is now %s", dest.name, state.name)
        return
    paused = state != DestState.RUNNING
    name = props.get(JMQ_SERVICE_NAME)
    if name is not None and not isinstance(name, str):
        raise AdminError(Status.BAD_REQUEST, f"bad JMQServiceName {name!r}")
    # Stock imqcmd's pause/resume bkr names the target JMQServiceName without a
    # service name: every service but admin, as OpenMQ's PauseHandler.
    if isinstance(name, str) and target in (JMQ_SERVICE_NAME, None):
        services = [s for s in conn.broker.services if s.name == name]
        if not services:
            raise AdminError(Status.NOT_FOUND, f"service {name} not found")
        if paused and services[0].type == "ADMIN":
            raise AdminError(Status.BAD_REQUEST, f"admin service {name} cannot be paused")
    elif target in (JMQ_SERVICE_NAME, None):
        services = [s for s in conn.broker.services if s.type != "ADMIN"]
    else:
        raise AdminError(Status.BAD_REQUEST, f"unknown JMQPauseTarget {target}")
    for svc in services:
        svc.paused = paused
        log.info("service %s %s", svc.name, "paused" if paused else "resumed")
        kind = "service.paused" if paused else "service.resumed"
        conn.router.observers.router_event(kind, {"name": svc.name})


def pause(conn: ConnectionEngine, props: dict) -> Result:
    value = props.get(JMQ_DEST_STATE, DestState.PAUSED)
    try:
        state = DestState(int(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AdminError(Status.BAD_REQUEST, f"bad JMQDestState {value}") from None
    if state == DestState.RUNNING:
        raise AdminError(Status.BAD_REQUEST, f"{JMQ_DEST_STATE} 0 is not a pause")
    _pause_target(conn, props, state)
    return {}, b""


def resume(conn: ConnectionEngine, props: dict) -> Result:
    _pause_target(conn, props, DestState.RUNNING)
    return {}, b""
