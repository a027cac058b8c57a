"""A real PostgreSQL server for tests, and Django database aliases pointing at it.

``postgres_url`` (session fixture) runs Debian's server binaries
(``/usr/lib/postgresql/*/bin``, installed by ``make install-dev``) on a throwaway data
directory: 127.0.0.1 on a free port, its unix socket in the temporary directory (so it
never meets the package's own cluster on 5432), trust authentication, a fresh database.
It is stopped and deleted at the end of the session.  PostgreSQL refuses to run as root,
so as root the server runs as the ``postgres`` system user (created when missing).

Use it from a test module with ``from tests.pg import postgres_url  # noqa: F401``, and
``database_alias`` to reach it through the ORM.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from broker.launcher import free_port
from tests.memdir import memory_dir, memory_root

PG_USER = "postgres"
PG_DATABASE = "imqtest"


def find_pg_bin() -> Path | None:
    """The newest installed server's bin directory, or None."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        return None
    newest = max(found, key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
    return Path(newest).parent


def _as_postgres() -> list[str]:
    """Command prefix running a program as the ``postgres`` user (needed only as root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:  # Debian's package creates it; a bare machine may not have it
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            check=True,
        )
    return ["runuser", "-u", PG_USER, "--"]


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


class PostgresServer:
    """One private PostgreSQL server: ``start()``, ``url``, ``stop()``."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        # In memory where possible (tests/memdir.py): a session copies a database per
        # test (7 MB each), and deleting a hundred megabytes of just-written files from a
        # busy disk at the end took seconds (4-10 s a test process, the run's last ones).
        self.tmp = Path(tempfile.mkdtemp(prefix="imq-pg-", dir=memory_root()))
        self.data = self.tmp / "data"
        self.log = self.tmp / "server.log"
        self.port = 0
        self.prefix = _as_postgres()

    @property
    def url(self) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def start(self) -> None:
        if self.prefix:  # the server user must own its directory (and reach the socket)
            info = pwd.getpwnam(PG_USER)
            os.chown(self.tmp, info.pw_uid, info.pw_gid)
            os.chmod(self.tmp, 0o755)
        _run(
            [*self.prefix, str(self.bin / "initdb"), "-D", str(self.data), "-U", PG_USER,
             "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"],
            "initdb",
        )  # fmt: skip
        for attempt in range(3):  # a free port can be taken before the server binds it
            self.port = free_port()
            # fsync=off: a commit is still written to the kernel before it is acknowledged,
            # so killing the server (or a broker) loses nothing; only a crash of the
            # machine could, and the tests' databases do not outlive one.  With it on, each
            # commit waits for the disk, tens of milliseconds while other tests write.
            options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.tmp} -c fsync=off"
            done = subprocess.run(
                [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-l",
                 str(self.log), "-o", options, "-w", "-t", "60", "start"],
                capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            if done.returncode == 0:
                break
            if attempt == 2:
                log = self.log.read_text(errors="replace") if self.log.exists() else ""
                raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}{done.stderr}\n{log}")
        self._create_database()

    def _create_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(
                    host="127.0.0.1", port=self.port, user=PG_USER, dbname="postgres",
                    autocommit=True,
                ) as conn:  # fmt: skip
                    conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        if self.data.exists():
            # Immediate: the data directory is deleted next, so the shutdown checkpoint a
            # fast stop writes (every database the session copied, seconds under load) is
            # for nothing.
            subprocess.run(
                [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                 "immediate", "-w", "stop"],
                capture_output=True, timeout=60,
            )  # fmt: skip
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """``postgres://postgres@127.0.0.1:PORT/imqtest`` of a real server for this session."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.fail(
            "PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin/initdb): "
            "run `make install-dev` (it installs Debian's postgresql package) or "
            "`apt-get install postgresql`",
            pytrace=False,
        )
    server = PostgresServer(bin_dir)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


@contextmanager
def database_alias(alias: str, url: str, *, migrate: bool = True) -> Iterator[str]:
    """A Django database alias for ``url`` while the block runs (migrated if asked).

    The caller must allow database access (pytest-django's ``django_db_blocker``).
    """
    import dj_database_url
    from django.core.management import call_command
    from django.db import connections

    config = dj_database_url.parse(url)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {"timeout": 20}  # the writer thread and the test share it
    connections.settings[alias] = config
    connections.configure_settings(connections.settings)  # fills in every key Django expects
    try:
        if migrate:
            call_command("migrate", database=alias, interactive=False, verbosity=0)
        yield alias
    finally:
        connections[alias].close()
        del connections[alias]  # this thread's wrapper, so the alias can be reused
        del connections.settings[alias]


@pytest.fixture(scope="module")
def db_access(django_db_blocker) -> Iterator[None]:
    """Database tests that use their own aliases, outside pytest-django's test database."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture(scope="module")
def pg_alias(db_access, postgres_url: str) -> Iterator[str]:
    """The alias ``store_pg``: the real PostgreSQL, migrated, for one test module."""
    with database_alias("store_pg", postgres_url) as alias:
        yield alias


@pytest.fixture(scope="module")
def sqlite_alias(db_access) -> Iterator[str]:
    """The alias ``store_sqlite``: a fresh SQLite file, migrated, for one test module."""
    # In memory where possible (tests/memdir.py): the store commits (and syncs) per batch.
    with memory_dir("imq-store-") as tmp:
        with database_alias("store_sqlite", f"sqlite:///{tmp / 'store.sqlite3'}") as alias:
            yield alias


# server URL -> name of a database on it with every migration applied, the template of the
# migrated fresh databases (a `manage.py migrate` of an empty database costs seconds of CPU).
_MIGRATED: dict[str, str] = {}


def fresh_database(url: str, name: str, *, migrated: bool = True) -> str:
    """Create database ``name`` on the server ``url`` points at; returns its URL.

    It is a copy of a database migrated once per server, unless ``migrated`` is False
    (then it is empty, for a test of the migration itself)."""
    import psycopg

    from broker.launcher import migrate

    template = "template0"
    if migrated:
        template = _MIGRATED.get(url, "")
        if not template:
            template = "imq_migrated_template"
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{template}"')
            migrate({**os.environ, "DATABASE_URL": _on_server(url, template)})
            _MIGRATED[url] = template
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return _on_server(url, name)


def _on_server(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name
