"""deploy/systemd/openmq-py.service: the unit runs ``manage.py up`` in the foreground with
options ``up`` accepts, its children's logs in the directory systemd makes for it, and is
restarted when ``up`` fails.  (``systemd-analyze verify`` passes on it once the checkout's
paths exist; that needs the installed tree, so it is not run here.)"""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

import pytest

from broker.management.commands.up import Command

pytestmark = pytest.mark.fast

UNIT = Path(__file__).resolve().parent.parent / "deploy" / "systemd" / "openmq-py.service"


def test_the_unit_runs_up_with_a_log_dir_and_restarts_on_failure() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text())
    service = unit["Service"]
    python, manage, command, *args = shlex.split(service["ExecStart"])
    workdir = service["WorkingDirectory"]
    assert (python, manage, command) == (
        f"{workdir}/.venv/bin/python",
        f"{workdir}/manage.py",
        "up",
    )
    opts = Command().create_parser("manage.py", "up").parse_args(args)
    assert opts.log_dir == f"/var/log/{service['LogsDirectory']}"
    assert service["Type"] == "simple" and service["Restart"] == "on-failure"
    # SIGTERM reaches up alone, which stops its children in order.
    assert service["KillMode"] == "mixed" and service["KillSignal"] == "SIGTERM"
    env = dict(item.split("=", 1) for item in shlex.split(service["Environment"]))
    assert env["IMQ_VARHOME"] == f"/var/lib/{service['StateDirectory']}"
    assert env["DATABASE_URL"] == f"sqlite:///{env['IMQ_VARHOME']}/db.sqlite3"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
