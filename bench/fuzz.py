"""Coverage-guided fuzzing of the sans-IO decoders and engines, in process, with atheris.

    .venv/bin/python bench/fuzz.py --target jmq-engine            # a million inputs
    .venv/bin/python bench/fuzz.py --target all --runs 200000
    .venv/bin/python bench/fuzz.py --replay var/fuzz/crashes/jmq-engine-1a2b.bin
    .venv/bin/python bench/fuzz.py --list

The targets are tests/fuzz_targets.py's (the fast tier runs each briefly:
tests/test_fuzz_targets.py): JMQ packets and the connection engine from HELLO on,
GPackets and a cluster link on a real ClusterService, the tunnel's HTTP reader and its
packet stream, the UMS gateway's bodies.  Each is seeded with the captured vectors
(third_party/openmq/vectors, tests/vectors_cluster) and the inputs kept from earlier runs
(``var/fuzz/corpus/TARGET``), and the broker's modules it exercises are instrumented
for coverage.

A failure -- an exception other than the target's refusals (ProtocolError and the
like), a broken engine invariant, an input running over ``--hang`` seconds of CPU --
saves the input as ``var/fuzz/crashes/TARGET-<sha1>.bin`` and ends the run with exit 1
(libFuzzer's own ``-timeout``, four times the hang limit, saves one that hangs inside C
code as ``TARGET-timeout-<sha1>``).  ``--target all`` runs each target in a process of
its own, one after the other, and prints a line per target: inputs, seconds, inputs/s,
failures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import fuzz_targets as ft  # noqa: E402

VAR = ROOT / "var" / "fuzz"


def save(target: str, data: bytes, crashes: Path) -> Path:
    crashes.mkdir(parents=True, exist_ok=True)
    path = crashes / f"{target}-{hashlib.sha1(data).hexdigest()}.bin"
    path.write_bytes(data)
    return path


def instrument(prefixes: tuple[str, ...]) -> int:
    """Add atheris's coverage instrumentation to every function of the loaded modules
    under ``prefixes`` (atheris.instrument_imports would miss the modules Django's set-up
    imported already).  Returns how many functions."""
    import gc
    import types

    import atheris

    count = 0
    for obj in gc.get_objects():
        if not isinstance(obj, types.FunctionType):
            continue
        mod = getattr(obj, "__module__", None) or ""
        if not any(mod == p or mod.startswith(p + ".") for p in prefixes):
            continue
        try:
            atheris.instrument_func(obj)
            count += 1
        except Exception as exc:  # a function atheris cannot patch stays as it is
            print(f"not instrumented: {obj.__qualname__}: {exc}", file=sys.stderr)
    return count


def run_one(args: argparse.Namespace) -> int:
    import atheris

    ft.setup()
    target = ft.TARGETS[args.target]()
    crashes = Path(args.crashes)
    crashes.mkdir(parents=True, exist_ok=True)
    corpus = VAR / "corpus" / target.name
    corpus.mkdir(parents=True, exist_ok=True)
    seeds = target.seeds()
    for s in seeds:
        (corpus / f"seed-{hashlib.sha1(s).hexdigest()}").write_bytes(s)
    # Import what the target touches before instrumenting it.
    for s in seeds[:3]:
        try:
            target(s)
        except BaseException:  # noqa: BLE001 - a failing seed is reported below
            pass
    n = instrument(target.modules)
    print(f"{target.name}: {len(seeds)} seeds, {n} functions instrumented", file=sys.stderr)
    hang = args.hang

    def one(data: bytes) -> None:
        try:
            with ft.hang_limit(hang):
                target(data)
        except BaseException:
            path = save(target.name, data, crashes)
            print(f"\nFAILURE of {target.name}, input saved as {path}", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)

    libfuzzer = [
        sys.argv[0],
        f"-runs={args.runs}",
        f"-max_len={args.max_len or target.max_len}",
        f"-timeout={max(int(hang * 4), 1)}",
        f"-artifact_prefix={crashes}/{target.name}-",
        "-print_final_stats=1",
        f"-max_total_time={args.seconds}",
        f"-seed={args.seed}",
        str(corpus),
    ]
    atheris.Setup(libfuzzer, one)
    # libFuzzer ends the process itself after -runs inputs, printing its statistics
    # ("Done N runs in S second(s)", stat::average_exec_per_sec).
    atheris.Fuzz()
    return 0


def run_all(args: argparse.Namespace) -> int:
    names = list(ft.TARGETS) if args.target == "all" else args.target.split(",")
    failed = 0
    rows = []
    for name in names:
        cmd = [
            sys.executable,
            __file__,
            "--target",
            name,
            "--runs",
            str(args.runs),
            "--hang",
            str(args.hang),
            "--crashes",
            args.crashes,
            "--seed",
            str(args.seed),
            "--seconds",
            str(args.seconds),
        ]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        done = None
        last = 0
        for line in proc.stderr:
            sys.stderr.write(line)
            m = re.match(r"Done (\d+) runs in (\d+) second", line)
            if m:
                done = (int(m.group(1)), int(m.group(2)))
            m = re.match(r"#(\d+)\s", line)
            if m:
                last = int(m.group(1))
        rc = proc.wait()
        took = time.monotonic() - start
        failed += rc != 0
        runs, secs = done if done else (last, took)
        rows.append((name, runs, secs, rc))
    print(f"\n{'target':16} {'inputs':>10} {'seconds':>8} {'inputs/s':>9} result")
    for name, runs, secs, rc in rows:
        rate = f"{runs / max(secs, 1):.0f}"
        result = "ok" if rc == 0 else f"FAILED (exit {rc}, input saved)"
        print(f"{name:16} {runs:>10} {secs:8.0f} {rate:>9} {result}")
    return 1 if failed else 0


def replay(paths: list[str], hang: float) -> int:
    ft.setup()
    bad = 0
    for p in paths:
        path = Path(p)
        name = next((t for t in ft.TARGETS if path.name.startswith(t + "-")), None)
        if name is None:
            print(f"{path}: no target named by its file name", file=sys.stderr)
            return 2
        try:
            with ft.hang_limit(hang):
                ft.TARGETS[name]()(path.read_bytes())
            print(f"{path}: ok")
        except BaseException:
            bad += 1
            print(f"{path}: FAILS", file=sys.stderr)
            traceback.print_exc()
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--target", default="all", help="a target, several (a,b) or all")
    p.add_argument("--runs", type=int, default=1_000_000, help="inputs per target")
    p.add_argument("--hang", type=float, default=2.0, help="CPU seconds one input may take")
    p.add_argument("--max-len", type=int, default=0, help="longest input (default: per target)")
    p.add_argument(
        "--seconds", type=int, default=0, help="stop a target after this long (0: --runs only)"
    )
    p.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    p.add_argument("--crashes", default=str(VAR / "crashes"), help="where failing inputs go")
    p.add_argument("--replay", nargs="+", metavar="FILE", help="run saved inputs once")
    p.add_argument("--list", action="store_true", help="list the targets")
    args = p.parse_args()
    if args.list:
        for name, cls in ft.TARGETS.items():
            print(f"{name:16} {(cls.__doc__ or '').strip().splitlines()[0]}")
        return 0
    if args.replay:
        return replay(args.replay, args.hang)
    if args.target in ft.TARGETS:
        return run_one(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
