"""Actions on the broker itself (server/admin_service/broker_info.py's requests): its state and
properties, pause/resume, quiesce, shutdown, restart, the access control rules."""

from __future__ import annotations

from typing import Any

from broker import props as imq

from ..broker_handle import BrokerAdmin
from .common import ActionError, record_change
from .destinations import page_destinations
from .services import list_services


def query_broker(admin: BrokerAdmin) -> dict[str, Any]:
    """Instance, version, address, ports, state, memory state and counts.

    ``version`` is the OpenMQ release the broker reports (what OpenMQ tools see);
    ``product`` names the broker and its own version."""
    props = admin.broker_props()
    _, destinations = page_destinations(admin, limit=0, show_temporary=False)
    product = " ".join(
        v for v in (props.get(imq.PRODUCT_NAME, ""), props.get(imq.BUILD_NUMBER, "")) if v
    )
    return {
        "instance": props.get(imq.INSTANCE_NAME.name, ""),
        "version": props.get(imq.PRODUCT_VERSION, ""),
        "product": product,
        "host": props.get(imq.HOSTNAME.name, "") or admin.host,
        "port": _int_prop(props, imq.PORTMAPPER_PORT.name, admin.port),
        "state": props.get(imq.BROKER_STATE, "RUNNING"),
        "memory_state": props.get(imq.MEMORY_STATE, ""),
        "store": props.get(imq.PERSIST_STORE.name, "file"),
        "services": list_services(admin),
        "destinations": destinations,
        "messages": _int_prop(props, imq.CURRENT_COUNT, 0),
        "message_bytes": _int_prop(props, imq.CURRENT_SIZE, 0),
        "connections": _int_prop(props, imq.CURRENT_CONNECTIONS, 0),
        # The event-loop lag over the broker's last window, ms (None: not reported).
        "loop_lag_max": _float_prop(props, imq.LOOP_LAG_MAX),
        "loop_lag_p99": _float_prop(props, imq.LOOP_LAG_P99),
        # The shipped accounts (admin, guest) still on their shipped passwords while a
        # service listens beyond loopback, and whether they are held to loopback.
        "shipped_passwords": [
            u for u in props.get(imq.SHIPPED_PASSWORDS_IN_USE, "").split(",") if u
        ],
        "shipped_loopback_only": props.get(imq.SHIPPED_LOOPBACK_ONLY.name, "").strip().lower()
        == "true",
        "properties": props,
    }


def _int_prop(props: dict[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        return default


def _float_prop(props: dict[str, str], name: str) -> float | None:
    try:
        return float(props[name])
    except (KeyError, ValueError):
        return None


def broker_properties(admin: BrokerAdmin) -> dict[str, str]:
    return dict(sorted(admin.broker_props().items()))


def update_broker(admin: BrokerAdmin, actor: str, properties: dict[str, str]) -> None:
    """Change broker properties at run time (the broker refuses names it cannot change)."""
    if not properties:
        raise ActionError("no property to change")
    clean = {str(k).strip(): str(v) for k, v in properties.items()}
    if any(not k for k in clean):
        raise ActionError("empty property name")
    admin.update_broker_props(clean)
    record_change(
        actor,
        "updated broker properties " + ", ".join(f"{k}={v}" for k, v in clean.items()),
        {"type": "broker", "op": "update", "properties": clean},
    )


def pause_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.pause()
    record_change(actor, "paused the broker", {"type": "broker", "op": "pause"})


def resume_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.resume()
    record_change(actor, "resumed the broker", {"type": "broker", "op": "resume"})


def quiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.quiesce()
    record_change(actor, "quiesced the broker", {"type": "broker", "op": "quiesce"})


def unquiesce_broker(admin: BrokerAdmin, actor: str) -> None:
    admin.unquiesce()
    record_change(actor, "unquiesced the broker", {"type": "broker", "op": "unquiesce"})


def shutdown_broker(admin: BrokerAdmin, actor: str, *, no_failover: bool = False) -> None:
    """Shut the broker down; ``no_failover``: in an HA cluster no other broker takes over
    its data (imqcmd shutdown bkr -nofailover)."""
    what = "shut down the broker" + (" (no failover)" if no_failover else "")
    record_change(actor, what, {"type": "broker", "op": "shutdown"})
    admin.shutdown(no_failover=no_failover)


def restart_broker(admin: BrokerAdmin, actor: str) -> None:
    record_change(actor, "restarted the broker", {"type": "broker", "op": "restart"})
    admin.restart()


def reload_access_control(admin: BrokerAdmin, actor: str) -> None:
    admin.reload_access_control()
    record_change(
        actor,
        "reloaded the access control rules",
        {"type": "broker", "op": "reload_access_control"},
    )
