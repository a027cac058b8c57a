"""Rooms: the broker (broker/server, core, store, security, protocol) never imports the
administration tools' package broker/admin/ (the admin protocol's broker side is
broker/server/admin_service/).  Checked in a fresh interpreter, as ``runbroker`` starts:
Django set up, then every module of the broker's packages imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import importlib, os, pkgutil, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django.setup()
loaded = []
for pkg in ("broker.server", "broker.core", "broker.store", "broker.security", "broker.protocol"):
    for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
        importlib.import_module(info.name)
        loaded.append(info.name)
print(len(loaded), "broker.server.admin_service.handler" in loaded)
print(" ".join(sorted(m for m in sys.modules if m == "broker.admin" or m.startswith("broker.admin."))))
"""


def test_broker_packages_do_not_import_the_admin_tools():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    counts, tools = (done.stdout.splitlines() + ["", ""])[:2]
    count, handler = counts.split()
    assert int(count) > 40 and handler == "True"  # the broker's modules were all imported
    assert tools == "", f"the broker imports {tools}"


def test_broker_packages_do_not_import_the_portal():
    """The portal talks to the broker, not the other way round
    (docs/developers/architecture.md): no module of the broker's packages names
    ``portal`` in an import (Django's settings module is
    loaded by name through DJANGO_SETTINGS_MODULE, not imported)."""
    import ast

    offenders = []
    for pkg in ("server", "core", "store", "security", "protocol", "engine"):
        for path in sorted((ROOT / "broker" / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                offenders += [
                    f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "portal"
                ]
    assert offenders == []
