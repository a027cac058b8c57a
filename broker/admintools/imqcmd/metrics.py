"""imqcmd's metrics subcommands (metrics bkr, svc, dst): OpenMQ's sampling loop and its
tables of counters, rates, consumers and disk figures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..actions.metrics import broker_metrics, destination_metrics, service_metrics
from .destinations import dest_table
from .output import Table, kbytes, num, rate
from .session import Run, Spec, one

# A table's titles, and one sample's row: (-m kind, a queue?) and (latest, previous, secs).
MakeTable = Callable[[str, bool], Table]
MakeRow = Callable[[str, bool, dict[str, Any], dict[str, Any] | None, float], list[str]]


def metrics_bkr(run: Run) -> None:
    run.on_broker("Listing metrics for the broker specified by:")
    sample_loop(run, lambda: broker_metrics(run.admin), counter_table, counter_row)


def metrics_svc(run: Run) -> None:
    name = run.name
    run.say("Listing metrics for the service:")
    run.say()
    run.show(one("Service Name", name))
    run.say()
    run.on_broker("On the broker specified by:")
    sample_loop(run, lambda: service_metrics(run.admin, name), counter_table, counter_row)


def metrics_dst(run: Run) -> None:
    name, kind, _ = run.dest()
    run.say("Listing metrics for the destination:")
    run.say()
    run.show(dest_table(name, kind))
    run.say()
    run.on_broker("On the broker specified by:")
    sample_loop(
        run, lambda: destination_metrics(run.admin, kind, name), dest_metric_table, dest_metric_row
    )


def sample_loop(
    run: Run,
    sample: Callable[[], dict[str, Any]],
    make_table: MakeTable,
    make_row: MakeRow,
) -> None:
    """OpenMQ's loop: a sample now and every -int seconds, one row each, the titles
    again every 20 rows, until -msp samples (or Ctrl-C)."""
    interval, samples = run.opts["interval"], run.opts["samples"]
    kind = run.opts["metric_type"]
    queue = bool(run.opts["dest_type"]) and run.dest()[1] == "q"
    previous: dict[str, Any] | None = None
    previous_at = 0.0
    printed = 0
    try:
        while True:
            latest = sample()
            now = time.monotonic()
            secs = now - previous_at
            stamps = (num(latest, "timeStamp"), num(previous or {}, "timeStamp"))
            if previous is not None and stamps[0] > stamps[1] > 0:
                secs = (stamps[0] - stamps[1]) / 1000  # the broker's own clock
            table = make_table(kind, queue)
            table.add(make_row(kind, queue, latest, previous, secs))
            run.show(table, with_title=printed % 20 == 0)
            run.stdout.flush()
            previous, previous_at = latest, now
            printed += 1
            if samples > 0 and printed >= samples:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    run.done()


def counter_table(kind: str, queue: bool) -> Table:
    table = Table(8 if kind != "cxn" else 6, 2, center=True)
    if kind == "cxn":
        table.title(("Num of", "JVM Heap (in bytes)", "", "Threads", "", ""), (1, 2, 0, 3, 0, 0))
        table.title(("Connections", "Total", "Free", "Active", "Low", "High"))
        return table
    if kind == "ttl":
        heads = ("Msgs", "Msg Bytes", "Pkts", "Pkt Bytes")
    else:
        heads = ("Msgs/sec", "Msg Bytes/sec", "Pkts/sec", "Pkt Bytes/sec")
    table.title([c for h in heads for c in (h, "")], (2, 0) * 4)
    table.title(("In", "Out") * 4)
    return table


COUNTERS = (
    "messagesIn",
    "messagesOut",
    "messageBytesIn",
    "messageBytesOut",
    "packetsIn",
    "packetsOut",
    "packetBytesIn",
    "packetBytesOut",
)


def counter_row(
    kind: str, queue: bool, latest: dict, previous: dict | None, secs: float
) -> list[str]:
    if kind == "cxn":
        return [
            str(num(latest, "nConnections")),
            str(num(latest, "totalMemory")),
            str(num(latest, "freeMemory")),
            str(num(latest, "threadsActive")),
            str(num(latest, "threadsLowWater")),
            str(num(latest, "threadsHighWater")),
        ]
    if kind == "ttl":
        return [str(num(latest, k)) for k in COUNTERS]
    if previous is None:
        return ["0"] * 8
    return [rate(num(latest, k), num(previous, k), secs) for k in COUNTERS]


def dest_metric_table(kind: str, queue: bool) -> Table:
    if kind == "dsk":
        # OpenMQ's disk figures; here: all its bytes, those paged out of memory.
        table = Table(3, center=True)
        table.title(("Disk Reserved", "Disk Used", "Utilization Ratio"))
        return table
    if kind == "con":
        heads = (
            ("Active Consumers", "Backup Consumers", "Msg Count")
            if queue
            else ("Consumers", "Msg Count")
        )
        table = Table(3 * len(heads), 2, center=True)
        table.title([c for h in heads for c in (h, "", "")], (3, 0, 0) * len(heads))
        table.title(("Current", "Peak", "Avg") * len(heads))
        return table
    table = Table(11, 2, center=True)
    first = ("Msgs", "Msg Bytes") if kind == "ttl" else ("Msgs/sec", "Msg Bytes/sec")
    table.title(
        (
            first[0],
            "",
            first[1],
            "",
            "Msg Count",
            "",
            "",
            "Total Msg Bytes (k)",
            "",
            "",
            "Largest",
        ),
        (2, 0, 2, 0, 3, 0, 0, 3, 0, 0, 1),
    )
    table.title(("In", "Out", "In", "Out") + ("Current", "Peak", "Avg") * 2 + ("Msg (k)",))
    return table


def dest_metric_row(
    kind: str, queue: bool, latest: dict, previous: dict | None, secs: float
) -> list[str]:
    if kind == "dsk":
        return [
            str(num(latest, "diskReserved")),
            str(num(latest, "diskUsed")),
            str(num(latest, "diskUtilizationRatio")),
        ]
    # DestMetricsCounters' map keys (numMsgsIn, msgBytesIn, numMsgs, peakNumMsgs, ...).
    counts = [
        str(num(latest, "numMsgs")),
        str(num(latest, "peakNumMsgs")),
        str(num(latest, "avgNumMsgs")),
    ]
    if kind == "con":
        if not queue:
            return [
                str(num(latest, "numConsumers", "numActiveConsumers")),
                str(num(latest, "peakNumConsumers", "peakNumActiveConsumers")),
                str(num(latest, "avgNumConsumers", "avgNumActiveConsumers")),
                *counts,
            ]
        return [
            str(num(latest, "numActiveConsumers")),
            str(num(latest, "peakNumActiveConsumers")),
            str(num(latest, "avgNumActiveConsumers")),
            str(num(latest, "numBackupConsumers")),
            str(num(latest, "peakNumBackupConsumers")),
            str(num(latest, "avgNumBackupConsumers")),
            *counts,
        ]
    flows = ("numMsgsIn", "numMsgsOut", "msgBytesIn", "msgBytesOut")
    if kind == "ttl":
        head = [str(num(latest, k)) for k in flows]
    elif previous is None:
        head = ["0"] * 4
    else:
        head = [rate(num(latest, k), num(previous, k), secs) for k in flows]
    sizes = [
        kbytes(num(latest, "totalMsgBytes")),
        kbytes(num(latest, "peakTotalMsgBytes")),
        kbytes(num(latest, "avgTotalMsgBytes")),
        kbytes(num(latest, "peakMsgBytes")),
    ]
    return head + counts + sizes


COMMANDS: dict[tuple[str, str], Spec] = {
    ("metrics", "bkr"): Spec(metrics_bkr),
    ("metrics", "svc"): Spec(metrics_svc, ("name",)),
    ("metrics", "dst"): Spec(metrics_dst, ("dest_type", "name")),
}
