"""The OpenMQ command names on the PATH (``[project.scripts]``, broker/management/console.py):
each is declared, runs its manage.py command from any directory, and ``imqcmd`` administers
a real broker.

The installed script (``.venv/bin/imqcmd``, written by ``make install``) is run when the
virtual environment has it; otherwise the same entry point through ``python -c`` (a venv
installed before the scripts existed).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from broker.management.console import COMMANDS
from openmq_client import Queue, TextMessage, connect

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(120)


def script(name: str) -> list[str]:
    installed = Path(sys.executable).parent / name
    if installed.is_file():
        return [str(installed)]
    return [sys.executable, "-c", f"from broker.management.console import {name}; {name}()"]


def run(name: str, *args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [*script(name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=90
    )


def test_every_console_command_is_declared_and_runs_its_manage_command() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {name: f"broker.management.console:{name}" for name in COMMANDS}
    assert COMMANDS["imqbrokerd"] == "runbroker"


def test_help_from_another_directory(tmp_path: Path) -> None:
    r = run("imqcmd", "-h", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: imqcmd [-h]")
    assert "list dst [-t q|t] [-tmp]" in r.stdout
    r = run("imqbrokerd", "-h", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: imqbrokerd [-h] [-name INSTANCE] [-port PM_PORT]")
    # imqdbmgr prints OpenMQ's own usage text, naming the command it was run as.
    r = run("imqdbmgr", "-h", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\nimqdbmgr <subcommand> <argument> [<options>]\n" in r.stdout
    assert "manage.py" not in r.stdout
    r = run("imqdbmgr", "-bogus", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "Unrecognized command line option: -bogus",
        'Please type "imqdbmgr -h" for help.',
    ]


def test_imqcmd_list_dst_against_a_broker(broker, tmp_path: Path) -> None:
    name = f"console{tmp_path.name[-8:].replace('-', '')}"

    async def send() -> None:
        conn = await connect(broker.host, broker.portmapper_port)
        try:
            sess = await conn.create_session()
            await (await sess.create_producer(Queue(name))).send(TextMessage("hi"))
        finally:
            await conn.close()

    asyncio.run(send())
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    r = run(
        "imqcmd",
        *("list", "dst", "-t", "q", "-b", f"{broker.host}:{broker.portmapper_port}"),
        *("-u", "admin", "-passfile", str(passfile)),
        cwd=tmp_path,
        env=broker.extra["env"],
    )
    assert r.returncode == 0, r.stderr
    assert "Successfully performed the requested operation." in r.stdout
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.split()[:1] == [name]]
    assert len(rows) == 1 and rows[0][1] == "Queue", r.stdout
