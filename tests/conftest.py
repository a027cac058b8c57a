"""Shared fixtures: a real broker process on free ports, driven over TCP."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.launcher import BrokerProcess, free_port, start_broker

# A real PostgreSQL for any test that asks, and database aliases of a test module's own.
from .pg import db_access, pg_alias, postgres_url, sqlite_alias  # noqa: F401
from .redis import redis_url  # noqa: F401 - a real redis-server for any test that asks
from .vectors import missing_reason, placeholder_reason

__all__ = ["BrokerProcess", "ROOT", "free_port", "start_broker"]

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/interop/conftest.py: pytest reads options only from the root's.
    parser.addoption(
        "--interop-broker",
        choices=("ours", "stock"),
        default=None,
        help="run the Java-client programs of tests/interop against our broker (default) or the "
        "stock OpenMQ 6.9 broker of ../shared/realbroker (also INTEROP_BROKER=stock)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "broker_props(*props): -D properties of a module's interop_broker"
    )
    config.addinivalue_line(
        "markers", "needs_vectors: fails (never skips) without ../shared/vectors (tests/vectors.py)"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A vector-driven test fails when the captured packets are missing or empty."""
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        reason = placeholder_reason(value)
        if reason:
            pytest.fail(reason, pytrace=False)
    if item.get_closest_marker("needs_vectors") and (reason := missing_reason()):
        pytest.fail(reason, pytrace=False)


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    """One broker shared by the tests that do not need a broker of their own."""
    tmp = Path(tempfile.mkdtemp(prefix="imq-test-"))
    b = start_broker(tmp)
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def own_broker(tmp_path: Path):
    """Factory for a broker private to one test (custom properties, restarts, kills)."""
    started: list[BrokerProcess] = []

    def make(
        *props: str,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
        instance: str = "testbroker",
    ) -> BrokerProcess:
        b = start_broker(tmp_path, *props, database_url=database_url, env=env, instance=instance)
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop()
