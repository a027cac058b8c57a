"""imqcmd's subcommands about physical destinations: list, query, create, update,
destroy, purge, pause, resume and compact dst, and list cns (metrics dst:
:mod:`.metrics`)."""

from __future__ import annotations

from collections.abc import Callable

from ..actions.consumers import list_consumers
from ..actions.destinations import (
    compact_destination,
    create_destination,
    destroy_destination,
    list_destinations,
    pause_destination,
    purge_destination,
    query_destination,
    resume_destination,
    update_destination,
)
from .output import Table, unlimited, yes_no
from .session import Handler, Run, Spec, change


def dest_table(name: str, kind: str) -> Table:
    table = Table(2, 4).title(("Destination Name", "Destination Type"))
    table.add((name, "Queue" if kind == "q" else "Topic"))
    return table


def dest_header(run: Run, doing: str) -> None:
    name, kind, _ = run.dest()
    run.about(doing, "destination", dest_table(name, kind))


def list_dst(run: Run) -> None:
    kind = run.opts["dest_type"]
    rows = list_destinations(run.admin, kind=kind, show_temporary=run.opts["temporary"])
    run.say("Listing all the destinations on the broker specified by:")
    run.say()
    run.broker_info()
    # OpenMQ 6.9's columns; a temporary destination (listed with -tmp only) is typed
    # "Queue (temporary)" as CmdRunner.listDests does.
    table = Table(12, 2).title(
        ("Name", "Type", "State", "Producers", "", "Consumers", "", "Msgs", "", "", "", ""),
        (1, 1, 1, 2, 0, 2, 0, 5, 0, 0, 0, 0),
    )
    table.title(
        (
            "",
            "",
            "",
            "Total",
            "Wildcard",
            "Total",
            "Wildcard",
            "Count",
            "Remote",
            "UnAck",
            "InDelay",
            "Avg Size",
        )
    )
    for d in rows:
        count = d["messages"] - d["in_transaction"]
        avg = d["bytes"] / count if count > 0 else 0.0
        kind = d["type"].capitalize()
        table.add(
            (
                d["name"],
                f"{kind} (temporary)" if d["temporary"] else kind,
                d["state"],
                d["producers"],
                0 if d["type"] == "topic" else "-",
                d["consumers"],
                0 if d["type"] == "topic" else "-",
                count,
                0,
                d["unacked"],
                d["in_delay"],
                f"{avg:.1f}",
            )
        )
    run.show(table)
    run.done()


def list_cns(run: Run) -> None:
    name, kind, _ = run.dest()
    rows = list_consumers(run.admin, kind, name)
    dest_header(run, "Listing the consumers of")
    table = Table(8, 3).title(
        ("Consumer ID", "Connection ID", "User", "Host", "Ack Mode", "Selector",
         "Delivered", "Unacked"),
    )  # fmt: skip
    for c in rows:
        table.add(
            (
                c["id"],
                c["connection_id"],
                c["user"] or "-",
                c["host"] or "-",
                c["ack_mode"] or "-",
                c["selector"] or "-",
                c["delivered"],
                c["pending_acks"],
            )
        )
    run.show(table)
    run.done()


def query_dst(run: Run) -> None:
    name, kind, _ = run.dest()
    d = query_destination(run.admin, kind, name)
    a = d["attributes"] or {}
    dest_header(run, "Querying")
    items: list[tuple[str, object]] = [
        ("Destination Name", d["name"]),
        ("Destination Type", d["type"].capitalize()),
        ("Destination State", d["state"]),
        ("Created Administratively", yes_no(not d["auto_created"])),
        ("", ""),
        ("Current Number of Messages", ""),
        ("   Actual", d["messages"]),
        ("   Held in Transaction", d["in_transaction"]),
        ("   In Delayed Delivery", d["in_delay"]),
        ("   Unacknowledged", d["unacked"]),
        ("   Paged Out to Disk", d["paged"]),
        ("Current Message Bytes", ""),
        ("   Actual", d["bytes"]),
        ("   Paged Out to Disk", d["paged_bytes"]),
        ("", ""),
        ("Current Number of Producers", d["producers"]),
        ("Current Number of Active Consumers", d["active_consumers"]),
        ("Current Number of Backup Consumers", d["backup_consumers"]),
        ("Current Number of Consumers", d["consumers"]),
        ("", ""),
        ("Max Number of Messages", unlimited(a.get("maxNumMsgs"))),
        ("Max Total Message Bytes", unlimited(a.get("maxTotalMsgBytes"))),
        ("Max Bytes per Message", unlimited(a.get("maxBytesPerMsg"))),
        ("Max Number of Producers", unlimited(a.get("maxNumProducers"))),
    ]
    if d["type"] == "queue":
        items += [
            ("Max Number of Active Consumers", unlimited(a.get("maxNumActiveConsumers"))),
            ("Max Number of Backup Consumers", unlimited(a.get("maxNumBackupConsumers"))),
            ("Local Delivery is Preferred", yes_no(a.get("localDeliveryPreferred"))),
        ]
    else:
        items += [
            ("Max Number of Shared Consumers", unlimited(a.get("maxNumSharedConsumers"))),
            ("Shared Consumer Flow Limit", unlimited(a.get("sharedConsumerFlowLimit"))),
        ]
    items += [
        ("Consumer Flow Limit", unlimited(a.get("consumerFlowLimit"))),
        ("Limit Behavior", a.get("limitBehavior", "")),
        ("Local Only", yes_no(a.get("isLocalOnly"))),
        ("Use Dead Message Queue", yes_no(a.get("useDMQ", True))),
        ("XML schema validation enabled", yes_no(a.get("validateXMLSchemaEnabled"))),
        ("XML schema URI List", a.get("XMLSchemaURIList") or "-"),
        ("Reload XML schema on failure", yes_no(a.get("reloadXMLSchemaOnFailure"))),
    ]
    run.pairs(items)
    run.done()


def create_dst(run: Run) -> None:
    name, kind, _ = run.dest()
    dest_header(run, "Creating")
    if run.attrs:
        run.say("With the attributes:")
        run.pairs(list(run.attrs.items()))
        run.say()
    create_destination(run.admin, run.actor, kind, name, run.attrs)
    run.done()


def update_dst(run: Run) -> None:
    name, kind, what = run.dest()
    dest_header(run, "Updating")
    run.say("With the attributes:")
    run.pairs(list(run.attrs.items()))
    run.say()
    run.confirm(f"Are you sure you want to update this {what}: {name}?")
    update_destination(run.admin, run.actor, kind, name, run.attrs)
    run.done()


def pause_dst(run: Run) -> None:
    name, kind, what = run.dest()
    pst = run.opts["pause_type"]
    dest_header(run, f"Pausing ({pst})")
    run.confirm(f"Are you sure you want to pause ({pst}) this {what}: {name}?")
    pause_destination(run.admin, run.actor, kind, name, pst.lower())
    run.done()


def compact_dst(run: Run) -> None:
    if run.opts["name"]:
        name, kind, what = run.dest()
        dest_header(run, "Compacting")
        run.confirm(f"Are you sure you want to compact this {what}: {name}?")
        compact_destination(run.admin, run.actor, kind, name)
    else:
        run.say("Compacting all the destinations on the broker specified by:")
        run.say()
        run.broker_info()
        run.confirm("Are you sure you want to compact all the destinations?")
        compact_destination(run.admin, run.actor)
    run.done()


def dest_change(doing: str, verb: str | None, act: Callable[..., None]) -> Handler:
    """A change of the -t/-n destination: its header, "Are you sure you want to <verb>
    this queue: NAME?" (no question without a verb), ``act(admin, actor, kind, name)``."""

    def ask(run: Run) -> str:
        name, _, what = run.dest()
        return f"Are you sure you want to {verb} this {what}: {name}?"

    return change(
        lambda run: dest_header(run, doing),
        lambda run: act(run.admin, run.actor, run.dest()[1], run.dest()[0]),
        ask if verb else None,
    )


DEST = ("dest_type", "name")
COMMANDS: dict[tuple[str, str], Spec] = {
    ("list", "dst"): Spec(list_dst),
    ("list", "cns"): Spec(list_cns, DEST),
    ("query", "dst"): Spec(query_dst, DEST),
    ("create", "dst"): Spec(create_dst, DEST),
    ("update", "dst"): Spec(update_dst, (*DEST, "attrs")),
    ("destroy", "dst"): Spec(dest_change("Destroying", "destroy", destroy_destination), DEST),
    ("purge", "dst"): Spec(dest_change("Purging", "purge", purge_destination), DEST),
    ("pause", "dst"): Spec(pause_dst, DEST),
    ("resume", "dst"): Spec(dest_change("Resuming", None, resume_destination), DEST),
    ("compact", "dst"): Spec(compact_dst),
}
