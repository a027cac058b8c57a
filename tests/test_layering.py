"""Rooms: which of the project's packages each package may import (DESIGN.md, README's
layout).  The broker (protocol, store, core, engine, cluster, server, security) never
imports the administration tools (broker/admintools, whose broker side is
broker/server/admin_service) or the portal; the tools and the portal talk to the broker
over the wire (openmq_client, broker/admintools), not by importing its server.

Read from the source like tests/test_import_cycles.py (every import that runs, at the top
or in a function).  The imports that break a rule today are listed in ``ALLOWED`` with
why; a new one fails, and so does a listed one that is gone.  One more test checks the
same in a fresh interpreter, as ``runbroker`` starts: Django set up, every module of the
broker's packages imported, and no module of broker/admintools or openmq_client loaded.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .test_import_cycles import find_cycle, import_graph, package_of, scan

ROOT = Path(__file__).resolve().parent.parent

# The shared base every room may use: properties, configuration, log levels and setup,
# the Django data model and its migrations, the package itself.
BASE = frozenset(
    {
        "broker",
        "broker.apps",
        # Names and formats more than one process shares: the live events' channel group,
        # the raw metrics files, each process's command line (standard library only).
        "broker.channel_groups",
        "broker.commandlines",
        "broker.rawmetrics",
        "broker.config",
        "broker.loglevels",
        "broker.logsetup",
        "broker.migrations",
        "broker.models",
        "broker.props",
        # The broker process's Django settings, which the portal's extend.
        "broker.settings",
        # What the configuration sets that the broker does not honour (props and config).
        "broker.propcheck",
    }
)
PROTOCOL = "broker.protocol"
BROKER_ROOMS = (
    "broker.security",
    "broker.store",
    "broker.core",
    "broker.engine",
    "broker.driver",
    "broker.cluster",
    "broker.server",
)

# Room -> the rooms it may import besides itself and BASE.
MAY_IMPORT: dict[str, frozenset[str]] = {
    PROTOCOL: frozenset(),  # the codec: nothing of ours
    "broker.security": frozenset({PROTOCOL}),
    "broker.store": frozenset({PROTOCOL}),
    "broker.core": frozenset({PROTOCOL, "broker.store"}),
    "broker.engine": frozenset({PROTOCOL, "broker.security", "broker.store", "broker.core"}),
    # The cluster's link engine has the client engine's shape and returns its effects.
    # The asyncio drivers' shared base: the engines' effects, nothing above them.
    "broker.driver": frozenset({"broker.engine"}),
    "broker.cluster": frozenset(
        {
            PROTOCOL,
            "broker.security",
            "broker.store",
            "broker.core",
            "broker.engine",
            "broker.driver",
        }
    ),
    "broker.server": frozenset(
        {
            PROTOCOL,
            "broker.security",
            "broker.store",
            "broker.core",
            "broker.engine",
            "broker.driver",
            "broker.cluster",
        }
    ),
    # Work on a stopped broker's rows (the portal's jobs run it): the store's rows under
    # core's rules, e.g. the expiry job's dead messages (broker/core/dmq.py).
    "broker.jobs": frozenset({PROTOCOL, "broker.store", "broker.core"}),
    # The Python client library (its own top-level package, which applications install):
    # the wire, and OpenMQ's password digest.
    "openmq_client": frozenset({PROTOCOL, "broker.security"}),
    # The tools: the broker through the client and the admin protocol.
    "broker.admintools": frozenset({PROTOCOL, "broker.security", "openmq_client"}),
    # Where the stock OpenMQ client and broker the tests compare with are (third_party).
    "broker.stock_paths": frozenset(),
    # A development helper that starts broker processes (tests, manage.py up), ours and
    # the stock one.
    "broker.launcher": frozenset({"broker.stock_paths"}),
    # The commands (runbroker, up, imqcmd, ...): entry points, anything of the broker.
    "broker.management": frozenset(
        {
            PROTOCOL,
            *BROKER_ROOMS,
            "openmq_client",
            "broker.admintools",
            "broker.launcher",
        }
    ),
}
# The portal (every portal/ package and module): its own rooms, the tools, the client.
PORTAL_MAY_IMPORT = frozenset({PROTOCOL, "broker.security", "openmq_client", "broker.admintools"})
# portal/jobs/expiry.py is the database store's expiry job: it reclaims a stopped broker's
# rows (broker/jobs/dbexpiry.py) under the store's ownership rules (ownership.py).
MAY_IMPORT["portal.jobs"] = PORTAL_MAY_IMPORT | {"broker.store", "broker.jobs"}

# The imports that break a rule today: (importer module, imported module) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("broker.admintools.workflows", "broker.core.selector"): (
        "delete/move by selector validates the selector with the broker's own parser"
    ),
}


def room_of(module: str) -> str:
    pkg = package_of(module)
    return "broker" if pkg in BASE else pkg


def may_import(src: str, dst: str) -> bool:
    if dst == src or dst == "broker" or package_of(dst) in BASE:
        return True
    if src == "broker" or package_of(src) in BASE:
        # The base: broker/models.py checks passwords with broker/security/digest.py.
        return dst == PROTOCOL or dst == "broker.security"
    if src.startswith("portal"):
        allowed = MAY_IMPORT.get(src, PORTAL_MAY_IMPORT)
        return dst.startswith("portal") or dst in allowed
    return dst in MAY_IMPORT[src]


def direct_imports() -> dict[str, set[str]]:
    """Module -> the modules its imports name (the packages they run first are the
    same rooms, or the package ``broker`` itself)."""
    return import_graph(parents=False)


def violations() -> dict[tuple[str, str], str]:
    found = {}
    for mod, targets in direct_imports().items():
        src = room_of(mod)
        for t in targets:
            dst = room_of(t)
            if not may_import(src, dst):
                found[(mod, t)] = f"{src} may not import {dst}"
    return found


@pytest.mark.fast
def test_every_room_has_rules() -> None:
    rooms = {room_of(m) for m in direct_imports()}
    unruled = [
        r for r in rooms if r != "broker" and not r.startswith("portal") and r not in MAY_IMPORT
    ]
    assert unruled == [], "packages without a rule in MAY_IMPORT"
    assert {"broker.cluster", "broker.store", "broker.admintools", "portal.ui"} <= rooms


@pytest.mark.fast
def test_the_rules_catch_what_they_should() -> None:
    assert not may_import("broker.core", "broker.admintools")
    assert not may_import("broker.server", "portal.ui")
    assert not may_import("portal.ui", "broker.server")
    assert not may_import("openmq_client", "broker.core")
    assert not may_import(PROTOCOL, "broker.core")
    assert may_import("broker.server", "broker.cluster")
    assert may_import("portal.api", "broker.admintools")


@pytest.mark.fast
def test_no_room_imports_what_it_may_not() -> None:
    new = {edge: why for edge, why in violations().items() if edge not in ALLOWED}
    assert new == {}, "\n".join(f"{a} imports {b}: {why}" for (a, b), why in sorted(new.items()))


@pytest.mark.fast
def test_every_allowed_import_still_breaks_a_rule() -> None:
    stale = sorted(set(ALLOWED) - set(violations()))
    assert stale == [], "gone (or allowed now): remove from ALLOWED"


@pytest.mark.fast
def test_the_broker_never_names_the_portal_or_the_tools() -> None:
    """No module of the broker's rooms imports ``portal``, ``broker.admintools`` or the
    Python client library ``openmq_client``, allowed or not (DESIGN.md: the portal and
    the tools talk to the broker, not the other way round; the client is a product of
    its own)."""
    offenders = [
        (mod, t)
        for mod, targets in direct_imports().items()
        if room_of(mod) in (PROTOCOL, *BROKER_ROOMS)
        for t in targets
        if t.startswith("portal") or room_of(t) in ("broker.admintools", "openmq_client")
    ]
    assert offenders == []


@pytest.mark.fast
def test_the_client_library_has_no_import_circle() -> None:
    """openmq_client's modules import one another one way (errors, wire, destination,
    message ... session, connection, sync); type hints under TYPE_CHECKING may name a
    module above."""
    graph = {
        mod: {t for t in targets if t.startswith("openmq_client")}
        for mod, targets in import_graph().items()
        if mod.startswith("openmq_client")
    }
    assert len(graph) > 10 and "openmq_client.session" in graph["openmq_client.connection"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


@pytest.mark.fast
def test_the_client_library_is_installed_with_the_project() -> None:
    """``pip install -e .`` (and the wheel) carry openmq_client beside broker and portal."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "openmq_client*" in cfg["tool"]["setuptools"]["packages"]["find"]["include"]


SCRIPT = """
import importlib, os, pkgutil, sys
import django
from broker.commandlines import settings_module
os.environ["DJANGO_SETTINGS_MODULE"] = settings_module("runbroker")  # as manage.py runbroker
django.setup()
loaded = []
for pkg in ROOMS:
    for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
        importlib.import_module(info.name)
        loaded.append(info.name)
importlib.import_module("broker.management.commands.runbroker")
print(len(loaded), "broker.server.admin_service.handler" in loaded)
print(" ".join(sorted(m for m in sys.modules if m.split(".")[:2] == ["broker", "admintools"] or m.split(".")[0] == "openmq_client")))
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in PORTAL_ONLY)))
print(os.environ["DJANGO_SETTINGS_MODULE"])
"""
# What only the portal's processes load: the REST API, its schema and filters, Celery and
# its schedules, the portal itself.
PORTAL_ONLY = (
    "rest_framework", "drf_spectacular", "django_filters", "django_celery_beat", "celery",
    "portal",
)  # fmt: skip


@functools.cache
def broker_process_imports() -> tuple[int, str, str, str, str]:
    """What the broker process loads, under the settings it runs with (a fresh
    interpreter started as the tests start brokers, with the portal's settings named in
    its environment): how many broker modules, whether the admin service's handler is
    among them, the broker/admintools modules, the portal-only modules, the settings."""
    rooms = (PROTOCOL, *BROKER_ROOMS)
    done = subprocess.run(
        [sys.executable, "-c", f"ROOMS = {rooms!r}\nPORTAL_ONLY = {PORTAL_ONLY!r}\n" + SCRIPT],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts, tools, portal_only, settings = (done.stdout.splitlines() + ["", "", "", ""])[:4]
    count, handler = counts.split()
    return int(count), handler, tools, portal_only, settings


def test_broker_packages_do_not_import_the_admin_tools() -> None:
    """Run-time, transitively: what importing every broker module loads (a fresh
    interpreter, so not in the fast tier)."""
    count, handler, tools, _, _ = broker_process_imports()
    assert count > 60 and handler == "True"  # the broker's modules were all imported
    assert tools == "", f"the broker imports {tools}"


def test_the_broker_process_runs_without_the_portals_apps() -> None:
    """The broker runs under broker/settings.py, which the portal's extend: neither DRF,
    drf-spectacular, django-filter, Celery (beat) nor the portal is loaded in it."""
    _, _, _, portal_only, settings = broker_process_imports()
    assert settings == "broker.settings"
    assert portal_only == "", f"the broker process loads {portal_only}"


@pytest.mark.fast
def test_each_command_runs_under_its_settings(monkeypatch) -> None:
    from broker.commandlines import settings_module

    for named in (None, "portal.settings", "broker.settings"):
        if named is None:
            monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
        else:
            monkeypatch.setenv("DJANGO_SETTINGS_MODULE", named)
        assert settings_module("runbroker") == "broker.settings"
        assert settings_module("imqcmd") == "portal.settings"
        assert settings_module(None) == "portal.settings"
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "site.settings")  # an operator's own
    assert settings_module("runbroker") == "site.settings"


def test_broker_packages_do_not_import_the_portal():
    """The portal talks to the broker, not the other way round
    (docs/developers/architecture.md): no module of the broker's packages names
    ``portal`` in an import (Django's settings module is
    loaded by name through DJANGO_SETTINGS_MODULE, not imported)."""
    offenders = []
    for pkg in ("server", "core", "store", "security", "protocol", "engine"):
        for path in sorted((ROOT / "broker" / pkg).rglob("*.py")):
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in sorted(scan(path)[1])
                if n.split(".")[0] == "portal"
            ]
    assert offenders == []
