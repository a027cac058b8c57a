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
