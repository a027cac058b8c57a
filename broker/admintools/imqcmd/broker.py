"""imqcmd's subcommands about the broker itself: query, update, pause, resume, quiesce,
unquiesce, shutdown, restart, takeover, reset (bkr); list bkr, reload cls and
changemaster cls (the cluster); reload acl."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from broker import props as imq

from ..actions.broker_info import (
    pause_broker,
    query_broker,
    quiesce_broker,
    reload_access_control,
    restart_broker,
    resume_broker,
    shutdown_broker,
    unquiesce_broker,
    update_broker,
)
from ..actions.cluster import change_master_broker, list_brokers, reload_cluster
from ..actions.ha import takeover_broker
from ..actions.metrics import reset_metrics
from .output import Table, unlimited, unlimited_or_zero
from .session import Handler, Run, Spec


def list_bkr(run: Run) -> None:
    rows = list_brokers(run.admin)
    run.say("Listing all the brokers in the cluster that the following broker is a member of:")
    run.say()
    run.broker_info()
    if any(r["num_msgs"] is not None for r in rows):  # an HA cluster, as OpenMQ's
        table = Table(6, 3).title(
            (
                "Broker ID",
                "Address",
                "State",
                "Msgs in store",
                "Taken over by",
                "Since heartbeat",
            )
        )
        now = time.time() * 1000
        for r in rows:
            beat = r["status_timestamp"]
            since = f"{max(0.0, (now - beat) / 1000):.0f} s" if beat is not None else ""
            table.add(
                (
                    r["broker_id"],
                    r["address"],
                    r["state"],
                    r["num_msgs"],
                    r["takeover_broker_id"] or "",
                    since,
                )
            )
    else:
        table = Table(3, 4).title(("Address", "Instance Name", "State"))
        for r in rows:
            table.add((r["address"], r["instance"], r["state"]))
    run.show(table)
    run.done()


def query_bkr(run: Run) -> None:
    info = query_broker(run.admin)
    props = info["properties"]
    run.on_broker("Querying the broker specified by:")

    def prop(name: str) -> str:
        return str(props.get(name, ""))

    items: list[tuple[str, object]] = [
        ("Version", info["version"] or "Version information not available"),
        ("Instance Name", info["instance"]),
        ("Broker ID", prop(imq.BROKER_ID.name)),
        ("Primary Port", info["port"]),
        ("Broker is Embedded", prop(imq.EMBEDDED)),
        ("Instance Configuration/Data Root Directory", prop(imq.VARHOME.name)),
        ("", ""),
        ("Current Number of Messages in System", info["messages"]),
        ("Current Total Message Bytes in System", info["message_bytes"]),
        ("", ""),
        ("Current Number of Messages in Dead Message Queue", prop(imq.DMQ_CURRENT_COUNT)),
        ("Current Total Message Bytes in Dead Message Queue", prop(imq.DMQ_CURRENT_SIZE)),
        ("", ""),
        ("Log Dead Messages", prop(imq.LOG_DEAD_MSGS.name)),
        (
            "Truncate Message Body in Dead Message Queue",
            prop(imq.DMQ_TRUNCATE_BODY.name),
        ),
        ("", ""),
        (
            "Max Number of Messages in System",
            unlimited_or_zero(prop(imq.SYSTEM_MAX_COUNT.name)),
        ),
        (
            "Max Total Message Bytes in System",
            unlimited_or_zero(prop(imq.SYSTEM_MAX_SIZE.name)),
        ),
        ("Max Message Size", unlimited_or_zero(prop(imq.MESSAGE_MAX_SIZE.name))),
        ("", ""),
        ("Auto Create Queues", prop(imq.AUTOCREATE_QUEUE.name)),
        ("Auto Create Topics", prop(imq.AUTOCREATE_TOPIC.name)),
        (
            "Auto Created Queue Max Number of Active Consumers",
            unlimited(prop(imq.AUTOCREATE_QUEUE_MAX_ACTIVE.name)),
        ),
        (
            "Auto Created Queue Max Number of Backup Consumers",
            unlimited(prop(imq.AUTOCREATE_QUEUE_MAX_BACKUP.name)),
        ),
        ("Auto Created Destination useDMQ", prop(imq.AUTOCREATE_USE_DMQ.name)),
        ("", ""),
        ("Cluster ID", prop(imq.CLUSTER_ID.name)),
        ("Cluster is Highly Available", str(props.get(imq.CLUSTER_HA.name, "null"))),
        ("Cluster Broker List (active)", prop(imq.CLUSTER_BROKERLIST_ACTIVE)),
        ("Cluster Broker List (configured)", prop(imq.CLUSTER_BROKERLIST.name)),
        ("Cluster Master Broker", prop(imq.CLUSTER_MASTERBROKER.name)),
        ("Cluster URL", prop(imq.CLUSTER_URL.name)),
        ("", ""),
        ("Log Level", prop(".level") or prop(imq.LOG_LEVEL.name)),
        (
            "Log Rollover Interval (seconds)",
            unlimited_or_zero(prop(imq.LOG_ROLLOVER_SECS.name)),
        ),
        (
            "Log Rollover Size (bytes)",
            unlimited_or_zero(prop("java.util.logging.FileHandler.limit")),
        ),
        # ... then ours.
        ("", ""),
        ("Product", info["product"]),
        ("Broker State", info["state"]),
        ("Memory State", info["memory_state"]),
        ("Message Store", info["store"]),
        ("Current Number of Destinations", info["destinations"]),
        ("Current Number of Connections", info["connections"]),
    ]
    run.pairs(items)
    run.done()


def update_bkr(run: Run) -> None:
    run.on_broker("Updating the broker specified by:")
    run.pairs(list(run.attrs.items()))
    run.say()
    run.confirm("Are you sure you want to update the broker?")
    update_broker(run.admin, run.actor, run.attrs)
    run.done()


def broker_op(doing: str, question: str | None, act: Callable[[Any, str], object]) -> Handler:
    """A change of the broker: "<doing> the broker specified by:", the question (None:
    none is asked), the action ``act(admin, actor)``."""

    def handler(run: Run) -> None:
        run.on_broker(f"{doing} the broker specified by:")
        if question:
            run.confirm(question)
        act(run.admin, run.actor)
        run.done()

    return handler


def takeover_bkr(run: Run) -> None:
    target = run.name
    broker_op(
        f"Taking over broker {target} with",
        f"Are you sure you want to take over broker {target}?",
        lambda admin, actor: takeover_broker(admin, actor, target),
    )(run)


def shutdown_bkr(run: Run) -> None:
    no_failover = bool(run.opts.get("nofailover"))
    broker_op(
        "Shutting down",
        "Are you sure you want to shutdown the broker?",
        lambda admin, actor: shutdown_broker(admin, actor, no_failover=no_failover),
    )(run)


def reload_cls(run: Run) -> None:
    run.say("Reloading the cluster configuration of the cluster the following broker is")
    run.on_broker("a member of:")
    changed = reload_cluster(run.admin, run.actor)
    for what in ("added", "removed"):
        if changed[what]:
            run.say(f"Brokers {what}: {', '.join(changed[what])}")
    run.done()


def changemaster_cls(run: Run) -> None:
    # As stock imqcmd: -o imq.cluster.masterbroker=HOST:PORT names the new master.
    new_master = run.attrs.get(imq.CLUSTER_MASTERBROKER.name)
    if not new_master:
        raise CommandError(
            f"Error: the new master broker is given with -o {imq.CLUSTER_MASTERBROKER.name}=host:port"
        )
    run.say("Changing cluster master broker to:")
    run.say()
    run.say()
    run.pairs(list(run.attrs.items()))
    run.say()
    run.on_broker("On the broker specified by:")
    run.confirm("Are you sure you want to change the cluster master broker ?")
    change_master_broker(run.admin, run.actor, str(new_master))
    run.say("Successfully changed cluster master broker.")
    run.say()


def sure(verb: str) -> str:
    return f"Are you sure you want to {verb} the broker?"


COMMANDS: dict[tuple[str, str], Spec] = {
    ("query", "bkr"): Spec(query_bkr),
    ("list", "bkr"): Spec(list_bkr),
    ("update", "bkr"): Spec(update_bkr, ("attrs",)),
    ("pause", "bkr"): Spec(broker_op("Pausing", sure("pause"), pause_broker)),
    ("resume", "bkr"): Spec(broker_op("Resuming", None, resume_broker)),
    ("quiesce", "bkr"): Spec(broker_op("Quiescing", sure("quiesce"), quiesce_broker)),
    ("unquiesce", "bkr"): Spec(broker_op("Unquiescing", sure("unquiesce"), unquiesce_broker)),
    ("shutdown", "bkr"): Spec(shutdown_bkr),
    ("takeover", "bkr"): Spec(takeover_bkr, ("name",)),
    ("restart", "bkr"): Spec(broker_op("Restarting", sure("restart"), restart_broker)),
    ("reset", "bkr"): Spec(
        broker_op(
            "Resetting", "Are you sure you want to reset the metrics of the broker?", reset_metrics
        )
    ),
    ("reload", "acl"): Spec(
        broker_op("Reloading the access control rules of", None, reload_access_control)
    ),
    ("reload", "cls"): Spec(reload_cls),
    ("changemaster", "cls"): Spec(changemaster_cls, ("attrs",)),
}
