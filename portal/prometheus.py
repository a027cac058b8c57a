"""The Prometheus endpoint ``/metrics``: the administered broker's figures in the text
exposition format (prometheus-client).

One scrape asks the broker, over its admin service (the portal's one admin connection,
:func:`broker.admintools.credentials.default_admin`), for four things whatever the number of
destinations: the broker's properties (instance, state, memory state, messages held), its
total ``MetricCounters`` (GET_METRICS), its services (GET_SERVICES) and every destination
in one GET_DESTINATIONS reply; then one GET_METRICS per service for the service's
counters (a handful: jms, admin, ssljms, ssladmin).  Per-destination in/out counters are
not exported: they take one GET_METRICS per destination, 10,000 requests a scrape on a
big broker; depth, bytes, producers and consumers come from the one destination list.
``METRICS_DESTINATIONS_LIMIT`` (setting / environment, default 0 = all) keeps only the
N deepest destinations, which the broker picks and cuts itself.

The broker's live once-a-second sample (broker/server/events.py) is not used: it holds
rates, not the counters Prometheus wants, and only the 50 deepest destinations.

Who may scrape (:func:`allowed`): a request from an address in ``METRICS_ALLOWED_ADDRESSES``
(addresses or networks, default loopback only), a request with ``Authorization: Bearer
<METRICS_TOKEN>`` when a token is set, or a logged-in administrator; anybody else gets
403.  The address is the TCP peer daphne saw: a proxy in front makes every scrape come
from the proxy, so use the token there.

When the broker cannot be reached the answer is still 200 with ``openmq_broker_up 0``
(Prometheus' convention: the target answered, the thing it watches is down).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from broker import props as imq  # (props here: a broker's reported properties)
from broker.admintools.broker_handle import BrokerAdmin, BrokerUnavailable
from broker.admintools.client import AdminError
from broker.admintools.credentials import default_admin
from broker.protocol.admin_types import ADMIN_QUEUES
from broker.protocol.types import DEST_QUEUE, DEST_TEMP
from portal.auth import is_administrator

log = logging.getLogger("portal.prometheus")

__all__ = ["BrokerCollector", "allowed", "metrics_view", "render"]

MEMORY_STATES = {"green": 0, "yellow": 1, "orange": 2, "red": 3}
DEFAULT_ALLOWED = ("127.0.0.0/8", "::1")

# (metric suffix, MetricCounters field, help) of the broker's and each service's counters.
_COUNTERS = (
    ("messages_in", "messagesIn", "Messages received from clients"),
    ("messages_out", "messagesOut", "Messages delivered to clients"),
    ("messages_in_bytes", "messageBytesIn", "Message bytes received from clients"),
    ("messages_out_bytes", "messageBytesOut", "Message bytes delivered to clients"),
    ("packets_in", "packetsIn", "Packets received"),
    ("packets_out", "packetsOut", "Packets sent"),
    ("packets_in_bytes", "packetBytesIn", "Packet bytes received"),
    ("packets_out_bytes", "packetBytesOut", "Packet bytes sent"),
)


def _num(value: Any) -> float:
    try:
        return float(int(value))
    except (TypeError, ValueError):
        return 0.0


class BrokerCollector(Collector):
    """Reads the broker once per :meth:`collect` (see the module docstring)."""

    def __init__(self, admin: BrokerAdmin, destinations_limit: int = 0) -> None:
        self.admin = admin
        self.destinations_limit = destinations_limit

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily(
            "openmq_broker_up", "1 when the broker's admin service answered this scrape"
        )
        try:
            families = list(self._broker_families())
        except (BrokerUnavailable, AdminError, OSError, TimeoutError) as exc:
            log.warning("metrics: broker at %s not read: %s", self.admin.address, exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _broker_families(self) -> Iterable[Any]:
        admin = self.admin
        props = admin.broker_props()
        totals = admin.metrics()
        services = admin.services()
        limit = self.destinations_limit if self.destinations_limit > 0 else -1
        rows, total = admin.destinations_page(
            0, limit, temporary=False, order="depth" if limit > 0 else "name"
        )
        per_service = {
            str(s.get("name")): admin.metrics(service=str(s.get("name"))) for s in services
        }

        info = InfoMetricFamily("openmq_broker", "The broker's instance, version and state")
        info.add_metric(
            [],
            {
                "instance": props.get(imq.INSTANCE_NAME.name, ""),
                "version": props.get(imq.PRODUCT_VERSION, ""),
                "state": props.get(imq.BROKER_STATE, ""),
            },
        )
        yield info
        for suffix, field, text in _COUNTERS:
            family = CounterMetricFamily(f"openmq_broker_{suffix}", f"{text} (all services)")
            family.add_metric([], _num(totals.get(field)))
            yield family
        yield _gauge(
            "openmq_broker_connections", "Open client connections", totals.get("nConnections")
        )
        yield _gauge(
            "openmq_broker_messages",
            "Messages held in all destinations",
            props.get(imq.CURRENT_COUNT),
        )
        yield _gauge(
            "openmq_broker_messages_bytes",
            "Bytes of the messages held in all destinations",
            props.get(imq.CURRENT_SIZE),
        )
        yield _gauge("openmq_broker_destinations", "Destinations (not temporary)", total)
        yield _gauge(
            "openmq_broker_memory_message_bytes",
            "Bytes of message bodies held in memory (what the memory state measures; the "
            "rest of the backlog is paged out to disk)",
            totals.get("bodiesInMemory"),
        )
        for suffix, field, text in (
            ("paged_out", "pagedOut", "Messages whose bodies were paged out of memory to disk"),
            ("read_back", "readBack", "Paged-out messages read back from disk for delivery"),
        ):
            family = CounterMetricFamily(f"openmq_broker_{suffix}", text)
            family.add_metric([], _num(totals.get(field)))
            yield family
        lag = GaugeMetricFamily(
            "openmq_broker_loop_lag_seconds",
            "The broker's event-loop wake-up lag over its last window (imq.loop.lag.window)",
            labels=["stat"],
        )
        for stat, field in (("max", "loopLagMax"), ("p99", "loopLagP99")):
            lag.add_metric([stat], _num(totals.get(field)) / 1e6)
        yield lag
        state = str(props.get(imq.MEMORY_STATE, "")).lower()
        memory = GaugeMetricFamily(
            "openmq_memory_state", "Memory state: 0 green, 1 yellow, 2 orange, 3 red"
        )
        memory.add_metric([], MEMORY_STATES.get(state, -1))
        yield memory

        yield from _service_families(services, per_service)
        yield from _destination_families(rows)


def _gauge(name: str, text: str, value: Any) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, text)
    family.add_metric([], _num(value))
    return family


def _service_families(services: list[dict], per_service: dict[str, dict]) -> Iterable[Any]:
    labels = ["service"]
    conns = GaugeMetricFamily("openmq_service_connections", "Open connections", labels=labels)
    up = GaugeMetricFamily("openmq_service_running", "1 when the service runs", labels=labels)
    port = GaugeMetricFamily("openmq_service_port", "The service's TCP port", labels=labels)
    counters = {
        suffix: CounterMetricFamily(f"openmq_service_{suffix}", text, labels=labels)
        for suffix, _, text in _COUNTERS
    }
    for s in services:
        name = str(s.get("name"))
        conns.add_metric([name], _num(s.get("nConnections")))
        up.add_metric([name], 1 if s.get("state") == 3 else 0)  # 3: RUNNING
        port.add_metric([name], _num(s.get("port")))
        figures = per_service.get(name) or {}
        for suffix, field, _ in _COUNTERS:
            counters[suffix].add_metric([name], _num(figures.get(field)))
    yield conns
    yield up
    yield port
    yield from counters.values()


_DEST_GAUGES = (
    ("openmq_destination_messages", "nMessages", "Messages held"),
    ("openmq_destination_messages_bytes", "nMessageBytes", "Bytes of the messages held"),
    ("openmq_destination_unacked_messages", "nUnackMessages", "Messages delivered, not acked"),
    ("openmq_destination_producers", "nProducers", "Producers"),
    ("openmq_destination_consumers", "nConsumers", "Consumers"),
)


def _destination_families(rows: list[dict]) -> Iterable[Any]:
    labels = ["destination", "type"]
    families = [
        (GaugeMetricFamily(name, text, labels=labels), field) for name, field, text in _DEST_GAUGES
    ]
    for row in rows:
        name = str(row.get("name"))
        full = int(row.get("fulltype") or row.get("type") or 0)
        if name in ADMIN_QUEUES or full & DEST_TEMP:
            continue
        key = [name, "queue" if full & DEST_QUEUE else "topic"]
        for family, field in families:
            family.add_metric(key, _num(row.get(field)))
    for family, _ in families:
        yield family


def render(admin: BrokerAdmin, destinations_limit: int = 0, accept: str = "") -> tuple[bytes, str]:
    """One scrape of the broker behind ``admin``: (body, content type), in the format the
    ``Accept`` header asks for (Prometheus text 0.0.4 by default, or OpenMetrics)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(admin, destinations_limit))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


# --------------------------------------------------------------------------------------
# Access
# --------------------------------------------------------------------------------------


def _networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    wanted = getattr(settings, "METRICS_ALLOWED_ADDRESSES", DEFAULT_ALLOWED)
    out = []
    for item in wanted:
        try:
            out.append(ipaddress.ip_network(str(item).strip(), strict=False))
        except ValueError:
            log.warning("METRICS_ALLOWED_ADDRESSES: %r is not an address or network", item)
    return out


def _address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _networks())


def _token_ok(request: HttpRequest) -> bool:
    token = getattr(settings, "METRICS_TOKEN", "")
    if not token:
        return False
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def allowed(request: HttpRequest) -> bool:
    """May this request scrape? (allowed address, bearer token, or an administrator)."""
    return (
        _token_ok(request)
        or _address_allowed(request.META.get("REMOTE_ADDR", ""))
        or is_administrator(request.user)
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the exposition, or 403."""
    if not allowed(request):
        return HttpResponse(
            "403 Forbidden: /metrics answers allowed addresses, a bearer token or an "
            "administrator\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    limit = int(getattr(settings, "METRICS_DESTINATIONS_LIMIT", 0) or 0)
    body, content_type = render(default_admin(), limit, request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)
