"""Take destinations, durable subscriptions and queued messages from a running stock
OpenMQ broker to a running broker of ours.

The stock broker's store is its own format and is not read; what it holds is asked of
the stock broker itself, over the same admin protocol our tools speak (a
:class:`~broker.admintools.broker_handle.BrokerAdmin` works against either broker), and over JMS:

* :func:`import_destinations`: each physical destination with its attributes
  (:func:`broker.admintools.actions.destinations.create_destination` / ``update_destination``
  on ours), and each durable subscription, made on ours as a JMS client makes one (its client ID,
  name, topic and selector; the stock admin service does not say ``noLocal``);
* :func:`drain_queues`: every message of the stock broker's queues, received there and
  sent to ours with its headers and properties, acknowledged on the stock broker only
  once ours has it (at least once: a message can arrive twice after a failure, never
  be lost).

Each change is recorded in the log with who made it, as the other tools' are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .actions import ActionError, AdminError, record_change
from .actions.destinations import create_destination, list_destinations, update_destination
from .actions.durables import list_durables
from .broker_handle import BrokerAdmin
from .stock_report import Report

__all__ = ["Endpoint", "drain_queues", "import_destinations"]

# Destinations every broker makes for itself (the DMQ's attributes are taken apart).
_SYSTEM_PREFIXES = ("mq.", "__")
DMQ = "mq.sys.dmq"
# Messages received on the stock broker before one acknowledgement there.
_ACK_BATCH = 100


@dataclass(frozen=True)
class Endpoint:
    """A broker's port mapper and the account the import uses there."""

    host: str
    port: int
    user: str
    password: str

    def admin(self) -> BrokerAdmin:
        return BrokerAdmin(self.host, self.port, self.user, self.password)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def _own_attributes(dest: dict[str, Any]) -> dict[str, Any]:
    """The attributes of a destination's kind (a DestinationInfo carries every one)."""
    from broker.protocol.dest_attributes import BY_NAME

    is_topic = dest["type"] == "topic"
    return {
        k: v for k, v in dest["attributes"].items() if k in BY_NAME and BY_NAME[k].applies(is_topic)
    }


def _accepted(attrs: dict[str, Any], is_topic: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """(the attributes this broker takes, name -> why not for the others)."""
    from broker.protocol.dest_attributes import convert_all

    good: dict[str, Any] = {}
    bad: dict[str, str] = {}
    for k, v in attrs.items():
        try:
            good.update(convert_all({k: v}, is_topic=is_topic))
        except ValueError as exc:
            bad[k] = str(exc)
    return good, bad


def import_destinations(
    actor: str, stock: Endpoint, ours: Endpoint, *, dry_run: bool = False
) -> Report:
    """Every destination and durable subscription of the stock broker, made on ours."""
    report = Report()
    src, dst = stock.admin(), ours.admin()
    try:
        theirs = list_destinations(src, show_temporary=False)
        mine = {(d["type"], d["name"]): d for d in list_destinations(dst, show_temporary=False)}
        for d in sorted(theirs, key=lambda d: (d["type"], d["name"])):
            _one_destination(actor, d, mine, dst, report, dry_run)
        have = {(x["client_id"], x["name"]) for x in list_durables(dst)}
        # JMS 2.0 shared durables apart from OpenMQ's own sharing by client ID (JMQShare).
        jms2 = {
            (str(x.get("clientID") or ""), str(x.get("name") or ""))
            for x in src.durables(None)
            if x.get("isJMSShared")
        }
        for sub in list_durables(src):
            sub["jms2"] = (sub["client_id"], sub["name"]) in jms2
            _one_durable(actor, sub, have, ours, report, dry_run)
    finally:
        src.close()
        dst.close()
    return report


def _one_destination(
    actor: str,
    d: dict[str, Any],
    mine: dict[tuple[str, str], dict[str, Any]],
    dst: BrokerAdmin,
    report: Report,
    dry_run: bool,
) -> None:
    kind, name = d["type"], d["name"]
    label = f"{kind} {name}"
    if d["temporary"]:
        return  # a connection's own: it goes with it
    if name.startswith(_SYSTEM_PREFIXES) and name != DMQ:
        report.not_taken("destination", label, "a destination the broker makes for itself")
        return
    if d["auto_created"] and not d["messages"] and name != DMQ:
        report.not_taken(
            "destination",
            label,
            "auto-created and empty: this broker creates it again on first use "
            "(imq.autocreate.* give its attributes)",
        )
        return
    attrs, refused = _accepted(_own_attributes(d), kind == "topic")
    notes = [f"attribute {k} not taken: {why}" for k, why in sorted(refused.items())]
    old = mine.get((kind, name))
    try:
        if old is None:
            if not dry_run:
                create_destination(dst, actor, kind, name, attrs)
            how = "created"
            if d["auto_created"]:
                notes.append(
                    "auto-created there: made here as an administered one (it holds messages)"
                )
        else:
            diff = {k: v for k, v in attrs.items() if old["attributes"].get(k) != v}
            if diff and not dry_run:
                update_destination(dst, actor, kind, name, diff)
            how = (
                "exists here; changed " + ", ".join(f"{k}={v}" for k, v in diff.items())
                if diff
                else "exists here with the same attributes"
            )
    except (ActionError, AdminError) as exc:
        report.not_taken("destination", label, f"this broker refused it: {exc}")
        return
    if not dry_run:
        notes += _kept(dst, kind, name, attrs)
    detail = f"{how}, {len(attrs)} attributes as on the stock broker" + (
        "; " + "; ".join(notes) if notes else ""
    )
    if dry_run:
        detail = detail.replace("created", "would be created").replace("changed", "would change")
    if notes:
        report.adapted("destination", label, detail)
    else:
        report.taken("destination", label, detail)
    if d["messages"]:
        report.not_taken(
            "messages",
            label,
            f"{d['messages']} message(s) in the stock broker's store"
            + (": imqimport drain moves them" if kind == "queue" else ": see the guide (topics)"),
        )


def _kept(dst: BrokerAdmin, kind: str, name: str, attrs: dict[str, Any]) -> list[str]:
    """What of ``attrs`` this broker holds otherwise than asked, read back from it."""
    from .actions.common import dest_type_code
    from .actions.destinations import destination_attributes

    found = dst.destinations(name, dest_type_code(kind))
    if not found:
        return ["not found here after it was made"]
    here = destination_attributes(found[0])
    return [
        f"{k} is {here.get(k)!r} here (stock {v!r})"
        for k, v in sorted(attrs.items())
        if k in here and here[k] != v
    ]


def _one_durable(
    actor: str,
    sub: dict[str, Any],
    have: set[tuple[str, str]],
    ours: Endpoint,
    report: Report,
    dry_run: bool,
) -> None:
    client_id, name, topic = sub["client_id"], sub["name"], sub["topic"]
    label = f"{name} (client ID {client_id or '-'}, topic {topic})"
    if (client_id, name) in have:
        report.taken("durable", label, "exists here")
    elif not topic:
        report.not_taken("durable", label, "the stock broker did not say its topic")
        return
    elif sub["active"] and not sub["shared"]:
        report.not_taken(
            "durable",
            label,
            "active on the stock broker: its subscriber must close before the move "
            "(run the import again then)",
        )
        return
    else:
        try:
            if not dry_run:
                make_durable(actor, ours, topic, name, client_id, sub["selector"], _sharing(sub))
        except Exception as exc:  # the client's JMSException and its subclasses
            report.not_taken("durable", label, f"this broker refused it: {exc}")
            return
        what = f"selector {sub['selector']!r}" if sub["selector"] else "no selector"
        kind = {"jms2": "JMS 2.0 shared durable", "jmq": "shared (JMQShare) durable"}.get(
            _sharing(sub), "durable"
        )
        report.adapted(
            "durable",
            label,
            f"made as a {kind} subscription, {what}; noLocal is not reported by the "
            "stock admin service and was not set",
        )
    if sub["messages"]:
        report.not_taken(
            "messages",
            f"durable {label}",
            f"{sub['messages']} message(s) waiting on the stock broker: let its subscriber "
            "read them there before the move (see the guide)",
        )


def _sharing(sub: dict[str, Any]) -> str:
    """How a durable subscription is shared: "" (not), "jms2" or "jmq" (JMQShare)."""
    if sub.get("jms2"):
        return "jms2"
    return "jmq" if sub["shared"] else ""


def make_durable(
    actor: str,
    ours: Endpoint,
    topic: str,
    name: str,
    client_id: str,
    selector: str,
    sharing: str = "",
) -> None:
    """Create durable subscription ``name`` on ours as a JMS client does (it keeps its
    messages from then on), then record it.  ``sharing``: "" (an ordinary one), "jms2"
    (a JMS 2.0 shared durable subscription) or "jmq" (OpenMQ's imqEnableSharedSubscriptions)."""
    from openmq_client import Topic, sync

    conn = sync.connect(
        ours.host,
        ours.port,
        user=ours.user,
        password=ours.password,
        client_id=client_id or None,
        enable_shared_subscriptions=sharing == "jmq",
    )
    try:
        session = conn.create_session()
        if sharing == "jms2":
            consumer = session.create_shared_durable_consumer(Topic(topic), name, selector or None)
        else:
            consumer = session.create_durable_subscriber(Topic(topic), name, selector or None)
        consumer.close()
    finally:
        conn.close()
    record_change(
        actor,
        f"created durable subscription {name} (client ID {client_id or '-'}) on topic "
        f"{topic}" + (f" with selector {selector}" if selector else ""),
        {"type": "durable", "op": "create", "name": name, "client_id": client_id or ""},
    )


def drain_queues(
    actor: str,
    stock: Endpoint,
    ours: Endpoint,
    queues: list[str] | None = None,
    *,
    idle: float = 5.0,
) -> Report:
    """Move the messages of the stock broker's queues (``queues``, or every queue that
    holds some) to the same queues on ours.  ``idle``: seconds without a message after
    which a queue counts as drained."""
    from openmq_client import sync

    report = Report()
    src_admin = stock.admin()
    try:
        found = {
            d["name"]: d
            for d in list_destinations(src_admin, kind="queue", show_temporary=False)
            if not d["name"].startswith(_SYSTEM_PREFIXES)
        }
    finally:
        src_admin.close()
    names = queues if queues is not None else sorted(n for n, d in found.items() if d["messages"])
    if not names:
        report.taken("messages", "queues", "no queue of the stock broker holds messages")
        return report
    src = sync.connect(stock.host, stock.port, user=stock.user, password=stock.password)
    dst = sync.connect(ours.host, ours.port, user=ours.user, password=ours.password)
    try:
        for name in names:
            d = found.get(name)
            if d is None:
                report.not_taken("messages", f"queue {name}", "no such queue on the stock broker")
                continue
            try:
                moved, expired = _drain_one(src, dst, name, idle)
            except Exception as exc:  # the client's JMSException: say which queue, go on
                report.not_taken("messages", f"queue {name}", f"the move stopped: {exc}")
                continue
            left = []
            if d["consumers"]:
                left.append(f"it had {d['consumers']} consumer(s) there, which may have taken some")
            if d["in_delay"] or d["in_transaction"]:
                left.append(
                    f"{d['in_delay']} delayed and {d['in_transaction']} in open transactions "
                    "were not yet deliverable: drain again later"
                )
            detail = f"{moved} moved" + (f", {expired} expired on the way" if expired else "")
            detail += "; " + "; ".join(left) if left else ""
            (report.adapted if left else report.taken)("messages", f"queue {name}", detail)
            if moved:
                record_change(
                    actor,
                    f"moved {moved} message(s) of queue {name} from the stock broker "
                    f"{stock.address}",
                    {"type": "destination", "op": "import", "name": name, "messages": moved},
                )
    finally:
        src.close()
        dst.close()
    return report


def _drain_one(src: Any, dst: Any, name: str, idle: float) -> tuple[int, int]:
    """Move one queue's messages: (moved, expired)."""
    from openmq_client import AckMode, Queue

    s_in = src.create_session(AckMode.CLIENT_ACKNOWLEDGE)
    s_out = dst.create_session(AckMode.AUTO_ACKNOWLEDGE)
    consumer = s_in.create_consumer(Queue(name), prefetch=_ACK_BATCH)
    producer = s_out.create_producer(Queue(name))
    src.start()
    moved = expired = pending = 0
    try:
        while True:
            msg = consumer.receive(timeout=idle)
            if msg is None:
                break
            ttl = 0
            if msg.expiration:
                ttl = msg.expiration - int(time.time() * 1000)
                if ttl <= 0:
                    expired += 1
                    pending += 1
                    continue
            # Persistent or not, wait for ours to have it before the stock broker lets go.
            producer.send(
                msg,
                persistent=msg.persistent,
                priority=msg.priority,
                ttl_ms=ttl,
                ack_on_produce=True,
            )
            moved += 1
            pending += 1
            if pending >= _ACK_BATCH:
                s_in.acknowledge()
                pending = 0
        if pending:
            s_in.acknowledge()
    finally:
        src.stop()
        consumer.close()
        s_in.close()
        s_out.close()
    return moved, expired
