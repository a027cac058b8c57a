"""A short run of each fuzz target (tests/fuzz_targets.py) in process: its seeds, then a
few hundred inputs made from them by a deterministic mutator (no atheris: the same inputs
every run), then the inputs committed under tests/fuzz_corpus/ (each one a failure a
long run of ``bench/fuzz.py`` found, fixed since).  A target raises for anything but
refused input, so each test asserts that every input was handled by the rules."""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path

import pytest

from tests import fuzz_targets as ft
from tests.vectors import NEEDS_VECTORS

pytestmark = [pytest.mark.fast, NEEDS_VECTORS]

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"

# Inputs per target beyond its seeds: the whole module stays at a few seconds.
RUNS = {
    "jmq-packet": 1500,
    "jmq-engine": 600,
    "gpacket": 1500,
    "link-engine": 600,
    "tunnel-http": 1500,
    "tunnel-packets": 1500,
    "ums": 1000,
    "stomp-frames": 1500,
    "jmx-rmi": 1500,
    "websocket": 1500,
}

_INTERESTING = (b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00", b"\xff\xff", b"\x7f\xff\xff\xff")


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    """``data`` changed one to four times as libFuzzer's mutators change an input: bits
    flipped, bytes set, inserted, erased, copied, interesting values, a splice with
    another seed.  The first byte (the target's mode byte) is mutated like the rest."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        n = len(buf)
        if op == 0 and n:
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 2:
            i = rng.randrange(n + 1)
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3 and n > 1:
            i = rng.randrange(n)
            del buf[i : i + rng.randint(1, max(1, n // 8))]
        elif op == 4 and n > 1:
            i, j = rng.randrange(n), rng.randrange(n)
            buf[j:j] = buf[i : i + rng.randint(1, 32)]
        elif op == 5:
            v = rng.choice(_INTERESTING)
            i = rng.randrange(n + 1)
            buf[i : i + len(v)] = v
        elif op == 6 and others:
            other = rng.choice(others)
            cut = rng.randrange(n + 1)
            buf = buf[:cut] + other[rng.randrange(len(other) + 1) :]
    return bytes(buf)


@pytest.fixture(scope="module", autouse=True)
def _setup():
    ft.setup()
    yield
    logging.disable(logging.NOTSET)
    logging.getLogger().removeHandler(ft.ERRORS)


def _run(target: ft.Target, data: bytes) -> None:
    try:
        with ft.hang_limit(2.0):
            target(data)
    except BaseException as exc:
        name = f"{target.name}-{hashlib.sha1(data).hexdigest()}.bin"
        raise AssertionError(
            f"{target.name} failed on an input (put it in tests/fuzz_corpus/{name} and run "
            f"bench/fuzz.py --replay on it): {type(exc).__name__}: {exc}\n{data.hex()[:2000]}"
        ) from exc


@pytest.mark.parametrize("name", list(ft.TARGETS))
def test_target_handles_its_seeds_and_their_mutations(name: str) -> None:
    target = ft.TARGETS[name]()
    try:
        seeds = target.seeds()
        assert seeds, f"{name} has no seeds"
        for s in seeds:
            _run(target, s)
        rng = random.Random(f"fuzz-{name}")
        for _ in range(RUNS[name]):
            data = mutate(rng, rng.choice(seeds), seeds)
            _run(target, data[: target.max_len])
    finally:
        target.close()


def test_saved_inputs_replay_clean() -> None:
    files = sorted(CORPUS.glob("*.bin"))
    assert files, f"no inputs in {CORPUS}"
    targets: dict[str, ft.Target] = {}
    try:
        for f in files:
            name = next((t for t in ft.TARGETS if f.name.startswith(t + "-")), None)
            assert name is not None, f"{f.name} names no target"
            if name not in targets:
                targets[name] = ft.TARGETS[name]()
            _run(targets[name], f.read_bytes())
    finally:
        for t in targets.values():
            t.close()


def test_the_harness_sees_hangs_and_logged_errors() -> None:
    with pytest.raises(ft.Hang), ft.hang_limit(0.05):
        while True:
            pass
    logging.getLogger("broker.connection").error("something the code did not expect")
    with pytest.raises(ft.InvariantBroken, match="something the code did not expect"):
        ft.ERRORS.check()
    ft.ERRORS.check()  # cleared once reported
