"""The OpenMQ command names on the PATH: ``imqbrokerd``, ``imqcmd``, ``imqusermgr``,
``imqobjmgr``, ``imqdbmgr`` and ``imqkeytool`` (``[project.scripts]`` in pyproject.toml,
installed into the virtual environment's ``bin`` by ``make install``).

Each runs the matching ``manage.py`` command with the same arguments, as manage.py does:
``DJANGO_SETTINGS_MODULE`` defaults to ``portal.settings`` (``broker.settings`` for
``imqbrokerd``: broker/commandlines.py ``settings_module``), and the settings find the
database, ``IMQ_VARHOME`` and the rest from the project's directory (or the environment),
not from the current one, so the commands work from any directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = [
    "COMMANDS",
    "imqbridgemgr",
    "imqbrokerd",
    "imqcmd",
    "imqdbmgr",
    "imqkeytool",
    "imqobjmgr",
    "imqusermgr",
    "run",
]

# Console command -> the manage.py command it runs.
COMMANDS = {
    "imqbrokerd": "runbroker",
    "imqcmd": "imqcmd",
    "imqusermgr": "imqusermgr",
    "imqobjmgr": "imqobjmgr",
    "imqdbmgr": "imqdbmgr",
    "imqkeytool": "imqkeytool",
    "imqbridgemgr": "imqbridgemgr",
}


def run(script: str, args: Sequence[str] | None = None) -> None:
    """Run console command ``script`` (a key of :data:`COMMANDS`) with ``args`` (by
    default the process's own arguments); exits as the command does."""
    from django.core.management import ManagementUtility

    from broker.commandlines import settings_module

    command = COMMANDS[script]
    os.environ["DJANGO_SETTINGS_MODULE"] = settings_module(command)
    argv = [script, command, *(sys.argv[1:] if args is None else args)]

    class Utility(ManagementUtility):
        """manage.py's own dispatch (``--settings``, ``--pythonpath``, setup), with the
        usage line naming the console command (``usage: imqcmd ...``, not ``usage:
        imqcmd imqcmd ...``)."""

        def fetch_command(self, subcommand: str):
            cmd = super().fetch_command(subcommand)
            make_parser = cmd.create_parser

            def create_parser(prog_name: str, name: str, **kwargs):
                parser = make_parser(prog_name, name, **kwargs)
                parser.prog = script
                return parser

            cmd.create_parser = create_parser  # type: ignore[method-assign]
            return cmd

    Utility(argv).execute()


def imqbrokerd() -> None:
    """``imqbrokerd``: ``manage.py runbroker``."""
    run("imqbrokerd")


def imqcmd() -> None:
    """``imqcmd``: ``manage.py imqcmd``."""
    run("imqcmd")


def imqusermgr() -> None:
    """``imqusermgr``: ``manage.py imqusermgr``."""
    run("imqusermgr")


def imqobjmgr() -> None:
    """``imqobjmgr``: ``manage.py imqobjmgr``."""
    run("imqobjmgr")


def imqdbmgr() -> None:
    """``imqdbmgr``: ``manage.py imqdbmgr``."""
    run("imqdbmgr")


def imqkeytool() -> None:
    """``imqkeytool``: ``manage.py imqkeytool``."""
    run("imqkeytool")


def imqbridgemgr() -> None:
    """``imqbridgemgr``: ``manage.py imqbridgemgr``."""
    run("imqbridgemgr")
