"""Shared fixtures: a real broker process on free ports, driven over TCP."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker import launcher
from broker.launcher import BrokerProcess, free_port, start_broker

from . import fasttier, manage_fork
from .jvmflags import SPARK_DRIVER_JVM, SPARK_LAUNCHER_JVM, STOCK_BROKER_JVM

# A real PostgreSQL for any test that asks, and database aliases of a test module's own.
from .pg import db_access, pg_alias, postgres_url, sqlite_alias  # noqa: F401

# The browser and portal-stack fixtures are registered here, not imported by each test
# module: a fixture imported into a module is that module's own, so a "session" stack
# imported by two modules was started twice and both lived to the end of the session.
from .portal_server import chromium, portal_server  # noqa: F401
from .redis import needs_redis_server, redis_url  # noqa: F401 - a real redis-server
from .ums_stack import ums_stack_fixture  # noqa: F401
from .vectors import missing_reason, placeholder_reason

__all__ = ["BrokerProcess", "ROOT", "free_port", "start_broker"]

ROOT = Path(__file__).resolve().parent.parent

# Every stock broker a test starts (run.sh reads it; the benchmarks keep the defaults),
# and the Spark driver of the rollup tests and Spark's launcher: C1 only, the serial
# collector, Spark's classes not verified (tests/jvmflags.py says why).
os.environ.setdefault("IMQ_JVM_ARGS", STOCK_BROKER_JVM)
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", SPARK_DRIVER_JVM)
os.environ.setdefault("SPARK_LAUNCHER_OPTS", SPARK_LAUNCHER_JVM)


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/interop/conftest.py: pytest reads options only from the root's.
    parser.addoption(
        "--interop-broker",
        choices=("ours", "stock"),
        default=None,
        help="run the Java-client programs of tests/interop against our broker (default) or the "
        "stock OpenMQ 6.9 broker of third_party/openmq/realbroker (also INTEROP_BROKER=stock)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fast: in-process only (make test-fast); tests/fasttier.py fails one that starts a "
        "process or connects to a listener outside the test process",
    )
    if not config.pluginmanager.is_registered(fasttier):
        config.pluginmanager.register(fasttier, "fasttier")
    # Brokers start forked from a process with the libraries imported (tests/manage_fork.py).
    launcher.spawn = manage_fork.popen
    # So are the migrations of the migrated templates (a SQLite file, a PostgreSQL database).
    launcher.migrate = manage_fork.migrate
    config.addinivalue_line(
        "markers", "broker_props(*props): -D properties of a module's interop_broker"
    )
    config.addinivalue_line(
        "markers",
        "needs_vectors: fails (never skips) without third_party/openmq/vectors (tests/vectors.py)",
    )


# The modules that take longest (wall time on 2 cores, most first). `make test` runs the
# files in five workers a file at a time with --no-loadscope-reorder, so these start first
# and the run does not end on one long file while the other workers idle. (Every module
# over 15 s in the --durations of a full `make test` on c905ea3, 2026-11-30; the shorter
# ones follow in collection order.)
LONGEST_FIRST = [
    "tests/test_ha.py",
    "tests/test_ha_fencing.py",
    "tests/test_up.py",
    "tests/interop/test_java_backlog.py",
    "tests/test_docker.py",
    "tests/test_store_expiry.py",
    "tests/test_imqcmd.py",
    "tests/test_cluster.py",
    "tests/test_up_deaths.py",
    "tests/test_reports_live.py",
    "tests/interop/test_stock_cluster_topics.py",
    "tests/test_rest_schema.py",
    "tests/test_persistence.py",
    "tests/interop/test_cclient.py",
    "tests/test_dbstore.py",
    "tests/interop/test_java_failover.py",
    "tests/test_imqdbmgr.py",
    "tests/test_pipeline_rollup.py",
    "tests/interop/test_stock_cluster.py",
    "tests/test_https.py",
    "tests/interop/test_stock_cluster_master.py",
    "tests/test_user_repositories.py",
    "tests/test_portal_pages.py",
    "tests/test_security_paths.py",
    "tests/test_filestore.py",
    "tests/interop/test_java_exclusive.py",
    "tests/test_dmq_limits.py",
    "tests/test_definitions.py",
    "tests/interop/test_stock_cluster_exclusive.py",
    "tests/interop/test_stock_cluster_rolling.py",
    "tests/test_pipeline_broker.py",
    "tests/test_workflow_pages.py",
    "tests/test_crash_up.py",
    "tests/test_portal_credentials.py",
    "tests/test_ums_robustness.py",
    "tests/interop/test_crash_paging.py",
    "tests/test_codec_errors.py",
    "tests/test_producer_hold.py",
    "tests/test_ums_simple.py",
    "tests/test_history_pages.py",
    "tests/interop/test_java_tunnel.py",
    "tests/interop/test_imqcmd_stock.py",
    "tests/test_acl.py",
    "tests/test_prometheus.py",
    "tests/interop/test_stock_import.py",
    "tests/test_javaser.py",
    "tests/test_commit_crash.py",
    "tests/test_metrics_events.py",
    "tests/test_crash_jobs.py",
    "tests/test_ums_xml.py",
    "tests/test_jobs_expiry.py",
    "tests/test_admin_commands.py",
    "tests/test_crash_ums.py",
    "tests/interop/test_java_features.py",
    "tests/test_jobs_logs.py",
    "tests/test_java_reconnect.py",
    "tests/test_delivery_policies.py",
    "tests/test_layering.py",
    "tests/test_vectors.py",
    "tests/interop/test_java_tls.py",
    "tests/interop/test_java_jndi.py",
]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m fast`` (make test-fast) does not import the modules that mark nothing fast:
    they would all be deselected, and importing them (Playwright, Spark, schemathesis)
    is most of the collection's time."""
    if (
        config.getoption("markexpr", "").strip() == "fast"
        and collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
        and "mark.fast" not in collection_path.read_text()
    ):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (rank.get(it.nodeid.split("::", 1)[0], len(rank)), order[id(it)]))


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
