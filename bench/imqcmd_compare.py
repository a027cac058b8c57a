"""The stock imqcmd against the stock OpenMQ broker and against ours, side by side.

Starts the stock OpenMQ 6.9 broker (third_party/openmq/realbroker/run.sh) and ours
(broker.launcher.start_broker), gives each the same workload through the stock Java client
(tests/interop/imqcmd_stock.py: a queue with messages, a topic with an inactive durable
subscription, an open connection, an open transaction), runs the same imqcmd sequence
against both with the stock imqadmin.jar, parses every output into text, ``name value``
pairs and tables, and prints what differs: text lines, rows, column names, values.  Ports,
ids, host names, paths and times are set aside (VOLATILE); the differences
docs/reference/imqcmd.md lists as deliberate are printed apart (DELIBERATE_LIST), with their reason.  Exit status 1 when
an undeliberate difference is left.

    .venv/bin/python bench/imqcmd_compare.py            # about a minute
    .venv/bin/python bench/imqcmd_compare.py --verbose  # also both outputs of each command
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.launcher import start_broker, start_stock_broker  # noqa: E402
from tests.interop.imqcmd_stock import (  # noqa: E402
    SEQUENCE,
    Result,
    StockImqcmd,
    Table,
    Workload,
    compile_java,
    missing,
)

# Names (a column or a query line) whose values differ by nature: compared by presence.
VOLATILE = {
    "Primary Port",
    "Host Primary Port",
    "Instance Name",
    "Instance Configuration/Data Root Directory",
    "Connection ID",
    "Transaction ID",
    "Creation time",
    "Port",
    "Port Number",
    "Address",
    "Time since last status timestamp",
    "Current Number of Connections",  # imqcmd's own admin connection counts in it
}

# What docs/reference/imqcmd.md lists as deliberate ("The stock imqcmd against this broker"): (command
# prefix, name, reason).  A name is a column, a query line, "row NAME" (a row only one
# broker lists) or "text".
_REPLIES = (
    "imqcmd's own admin conversations count in them, and this broker's replies carry "
    "other properties than the stock broker's (query bkr's: 9 KB, not 44 KB)"
)
_AVG = "a time average over the broker's own samples (ours: one a second since the start)"
DELIBERATE_LIST: list[tuple[str, str, str]] = [
    ("query bkr", "Cluster is Highly Available", "ours says false; the stock broker null"),
    (
        "query bkr",
        "Log Rollover Interval (seconds)",
        "ours keeps OpenMQ's documented imq.log.file.rolloversecs (7 days); the stock 6.9 "
        "broker's java.util.logging setup has no interval",
    ),
    (
        "query bkr",
        "Log Rollover Size (bytes)",
        "ours keeps OpenMQ's documented imq.log.file.rolloverbytes (-1); the stock 6.9 "
        "broker's java.util.logging FileHandler limit is 256 MB",
    ),
    ("metrics bkr -m cxn", "JVM Heap Bytes Total", "no JVM: the message memory budget"),
    ("metrics bkr -m cxn", "JVM Heap Bytes Free", "no JVM: the budget less what messages hold"),
    ("metrics svc -n jms -m cxn", "JVM Heap Bytes Total", "no JVM: the message memory budget"),
    (
        "metrics svc -n jms -m cxn",
        "JVM Heap Bytes Free",
        "no JVM: the budget less what messages hold",
    ),
    (
        "compact dst -t q -n cmp.q",
        "text",
        "ours compacts a running destination; the stock broker wants it paused first",
    ),
    ("compact dst -t q -n cmp.q", "exit status", "(the same: compacting a running destination)"),
    ("metrics dst", "Msg Count Avg", _AVG),
    ("metrics dst", "Total Msg Bytes (k) Avg", _AVG),
    ("metrics dst", "Consumers Avg", _AVG),
]
for _col in ("Pkts In", "Pkts Out", "Pkt Bytes In", "Pkt Bytes Out", "Msg Bytes Out"):
    DELIBERATE_LIST.append(("metrics bkr", _col, _REPLIES))
for _svc in ("ssljms", "ssladmin", "httpjms", "httpsjms", "wsjms", "wssjms"):
    DELIBERATE_LIST.append(
        (
            "list svc",
            f"row {_svc}",
            "ours lists the services that run (so do the portal, the REST API and "
            "Prometheus); the stock broker also those configured but not active, as UNKNOWN",
        )
    )
DELIBERATE_LIST += [
    (
        "metrics svc -n jms",
        "Pkt Bytes In",
        "clients send broker-made ids back (a connection id, as decimal text in places): "
        "a byte or two either way",
    ),
    ("metrics svc -n jms", "Pkt Bytes Out", "the replies' properties differ"),
]


def deliberate(cmd: str, name: str) -> str:
    """The reason a difference is deliberate, or ""."""
    for prefix, what, why in DELIBERATE_LIST:
        if (cmd == prefix or cmd.startswith(prefix + " ")) and name == what:
            return why
    return ""


@dataclass
class Diff:
    command: str
    name: str
    stock: str
    ours: str
    deliberate: str = ""
    where: str = ""

    def __str__(self) -> str:
        why = f"   [deliberate: {self.deliberate}]" if self.deliberate else ""
        return f"  {self.where}{self.name}: stock {self.stock!r} / ours {self.ours!r}{why}"


def normalise(value: str, ports: set[str], names: set[str]) -> str:
    for p in sorted(ports, key=len, reverse=True):
        value = re.sub(rf"(?<!\d){p}(?!\d)", "<port>", value)
    for n in names:
        value = value.replace(n, "<name>")
    return value


def compare(cmd: str, stock: Result, ours: Result, ctx: dict) -> list[Diff]:
    out: list[Diff] = []

    def diff(name: str, a: str, b: str, where: str = "") -> None:
        a2 = normalise(a, ctx["stock_ports"], ctx["stock_names"])
        b2 = normalise(b, ctx["our_ports"], ctx["our_names"])
        if a2 != b2:
            out.append(Diff(cmd, name, a, b, deliberate(cmd, name), where))

    if stock.returncode != ours.returncode:
        diff("exit status", str(stock.returncode), str(ours.returncode))
    st, ot = stock.text(), ours.text()
    if [normalise(x, ctx["stock_ports"], ctx["stock_names"]) for x in st] != [
        normalise(x, ctx["our_ports"], ctx["our_names"]) for x in ot
    ]:
        out.append(Diff(cmd, "text", " | ".join(st), " | ".join(ot), deliberate(cmd, "text")))
    sp, op = stock.pairs(), ours.pairs()
    for k in list(sp) + [k for k in op if k not in sp]:
        if k not in op or k not in sp:
            diff(
                f"line {k!r}",
                "present" if k in sp else "absent",
                "present" if k in op else "absent",
            )
        elif k not in VOLATILE:
            diff(k, sp[k], op[k])
    stabs, otabs = stock.tables(), ours.tables()
    if len(stabs) != len(otabs):
        diff("tables", str(len(stabs)), str(len(otabs)))
    for s, o in zip(stabs, otabs, strict=False):
        _compare_table(s, o, diff)
    return out


def _compare_table(s: Table, o: Table, diff) -> None:
    if s.columns != o.columns:
        diff("columns", " | ".join(s.columns), " | ".join(o.columns))
        return
    if not s.columns:
        return
    key = s.columns[0]
    skeys, okeys = [r[0] for r in s.rows], [r[0] for r in o.rows]
    by_key = key not in VOLATILE and len(set(skeys)) == len(skeys) and len(set(okeys)) == len(okeys)
    if by_key:
        srows, orows = dict(zip(skeys, s.rows, strict=True)), dict(zip(okeys, o.rows, strict=True))
    else:
        srows = {str(i): r for i, r in enumerate(s.rows)}
        orows = {str(i): r for i, r in enumerate(o.rows)}
    for k in list(srows) + [k for k in orows if k not in srows]:
        if k not in srows or k not in orows:
            diff(
                f"row {k}",
                "listed" if k in srows else "not listed",
                "listed" if k in orows else "not listed",
            )
            continue
        for col, a, b in zip(s.columns, srows[k], orows[k], strict=False):
            if col not in VOLATILE:
                diff(col, a, b, f"row {k}: ")


def run_all(imqcmd: StockImqcmd, broker: str, classes: Path, host: str, port: int) -> list[Result]:
    work = Workload(classes, host, port)
    try:
        results = imqcmd.batch(broker, SEQUENCE)
    finally:
        work.close()
    results.append(imqcmd.run(broker, "shutdown", "bkr"))
    return results


def ports_of(results: list[Result], pm: int) -> set[str]:
    found = {str(pm)}
    for r in results:
        if r.args[:2] == ["list", "svc"]:
            for row in r.table().rows:
                found.update(re.findall(r"\d{2,}", row[1]))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--verbose", action="store_true", help="print both outputs of every command")
    args = ap.parse_args()
    lacking = missing()
    if lacking:
        print("cannot run: missing " + "; ".join(lacking), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="imqcmd-compare-") as d:
        tmp = Path(d)
        classes = compile_java(tmp)
        imqcmd = StockImqcmd(tmp, classes)
        (tmp / "stock").mkdir()
        (tmp / "ours").mkdir()
        stock = start_stock_broker(tmp / "stock")
        ours = start_broker(tmp / "ours", instance="imqbroker")
        try:
            s_res = run_all(
                imqcmd,
                f"127.0.0.1:{stock.portmapper_port}",
                classes,
                "127.0.0.1",
                stock.portmapper_port,
            )
            o_res = run_all(
                imqcmd,
                f"127.0.0.1:{ours.portmapper_port}",
                classes,
                "127.0.0.1",
                ours.portmapper_port,
            )
        finally:
            stock.stop()
            ours.stop()
        ctx = {
            "stock_ports": ports_of(s_res, stock.portmapper_port),
            "our_ports": ports_of(o_res, ours.portmapper_port),
            "stock_names": {str(stock.varhome)},
            "our_names": {str(ours.varhome)},
        }
    undeliberate = deliberate = 0
    for s, o in zip(s_res, o_res, strict=True):
        cmd = " ".join(s.args)
        diffs = compare(cmd, s, o, ctx)
        bad = [x for x in diffs if not x.deliberate]
        undeliberate += len(bad)
        deliberate += len(diffs) - len(bad)
        mark = "DIFFERS" if bad else ("same (deliberate differences only)" if diffs else "same")
        print(f"imqcmd {cmd}: {mark}")
        for x in diffs:
            print(x)
        if args.verbose:
            print("--- stock\n" + s.output + "\n--- ours\n" + o.output + "\n")
    print(
        f"\n{len(s_res)} commands: {undeliberate} undeliberate differences, "
        f"{deliberate} deliberate (docs/reference/imqcmd.md: 'The stock imqcmd against this broker')"
    )
    return 1 if undeliberate else 0


if __name__ == "__main__":
    sys.exit(main())
