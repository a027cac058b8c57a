"""The stock OpenMQ software the tests use ships with the repository (third_party/openmq),
so a clone with nothing beside it runs the suite: the paths broker/stock_paths.py gives are
inside the repository unless an environment variable names another copy."""

from __future__ import annotations

import importlib
import os

import pytest

from broker import stock_paths

pytestmark = pytest.mark.fast

VARIABLES = ("OPENMQ_JAVA_CLIENT", "OPENMQ_CCLIENT", "OPENMQ_REALBROKER", "IMQ_TEST_VECTORS")


def test_default_paths_are_inside_the_repository() -> None:
    if any(os.environ.get(v) for v in VARIABLES):
        pytest.skip("an environment variable names another copy for this run")
    for path in (
        stock_paths.JAVA_CLIENT,
        stock_paths.C_CLIENT,
        stock_paths.REALBROKER,
        stock_paths.VECTORS,
        stock_paths.SPEC,
        stock_paths.PROTOCOL_SEED,
    ):
        assert path.is_relative_to(stock_paths.ROOT / "third_party" / "openmq"), path
        assert path.exists(), path


def test_what_the_tests_need_is_there_with_its_licence() -> None:
    java = stock_paths.JAVA_CLIENT
    for jar in ("imq.jar", "imqadmin.jar", "jakarta.jms-api-3.1.0.jar"):
        assert (java / jar).read_bytes()[:2] == b"PK", jar
    assert (java / "LICENSE-openmq.md").is_file()
    lib = stock_paths.C_CLIENT / "lib" / "libmqcrt.so.1"
    assert lib.read_bytes()[:4] == b"\x7fELF"
    assert (stock_paths.C_CLIENT / "include" / "mqcrt.h").is_file()
    broker = stock_paths.REALBROKER
    assert os.access(broker / "run.sh", os.X_OK)
    assert (broker / "mq" / "lib" / "imqbroker.jar").is_file()
    assert (broker / "LICENSE-openmq.md").is_file()
    assert len(list(stock_paths.VECTORS.rglob("*.hex"))) > 50
    assert (stock_paths.SPEC / "packet.md").is_file()


def test_a_variable_names_another_copy(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENMQ_JAVA_CLIENT", str(tmp_path / "j"))
    monkeypatch.setenv("IMQ_TEST_VECTORS", str(tmp_path / "v"))
    # The module reads the environment at import, as a test run does.
    try:
        again = importlib.reload(stock_paths)
        assert again.JAVA_CLIENT == tmp_path / "j"
        assert again.VECTORS == tmp_path / "v"
    finally:
        monkeypatch.undo()
        importlib.reload(stock_paths)
