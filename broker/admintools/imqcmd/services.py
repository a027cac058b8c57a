"""imqcmd's subcommands about the connection services: list, query, update, pause and
resume svc (metrics svc: :mod:`.metrics`)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from ..actions.services import (
    list_services,
    pause_service,
    query_service,
    resume_service,
    update_service,
)
from .output import Table
from .session import Run, Spec, change, one

SERVICE_OPTIONS = {"port": "port", "minThreads": "min_threads", "maxThreads": "max_threads"}


def port(svc: dict[str, Any]) -> str:
    if svc["port"] < 0:
        return "-"
    return f"{svc['port']} ({'dynamic' if svc['dynamic_port'] else 'static'})"


def list_svc(run: Run) -> None:
    rows = list_services(run.admin)
    run.on_broker("Listing all the services on the broker specified by:")
    table = Table(3, 4).title(("Service Name", "Port Number", "Service State"))
    for s in rows:
        table.add((s["name"], port(s), s["state"]))
    run.show(table)
    run.done()


def query_svc(run: Run) -> None:
    s = query_service(run.admin, run.name)
    run.about("Querying", "service", one("Service Name", s["name"]))
    run.pairs(
        [
            ("Service Name", s["name"]),
            ("Service Type", s["type"]),
            ("Service Protocol", s["protocol"]),
            ("Service State", s["state"]),
            ("Port Number", port(s)),
            ("", ""),
            ("Current Number of Connections", s["connections"]),
            ("", ""),
            ("Min Number of Threads", s["min_threads"]),
            ("Max Number of Threads", s["max_threads"]),
        ]
    )
    run.done()


def update_svc(run: Run) -> None:
    name = run.name
    values: dict[str, int] = {}
    for key, value in run.attrs.items():
        if key not in SERVICE_OPTIONS:
            raise CommandError(
                f"Error update svc: unknown attribute {key!r}; one of port, minThreads, maxThreads"
            )
        try:
            values[SERVICE_OPTIONS[key]] = int(value)
        except ValueError:
            raise CommandError(f"Error update svc: {key} must be a number, not {value!r}") from None
    run.about("Updating", "service", one("Service Name", name))
    run.pairs(list(run.attrs.items()))
    run.say()
    run.confirm(f"Are you sure you want to update the service {name}?")
    update_service(run.admin, run.actor, name, **values)
    run.done()


def header(doing: str):
    return lambda run: run.about(doing, "service", one("Service Name", run.name))


COMMANDS: dict[tuple[str, str], Spec] = {
    ("list", "svc"): Spec(list_svc),
    ("query", "svc"): Spec(query_svc, ("name",)),
    ("update", "svc"): Spec(update_svc, ("name", "attrs")),
    ("pause", "svc"): Spec(
        change(
            header("Pausing"),
            lambda run: pause_service(run.admin, run.actor, run.name),
            lambda run: f"Are you sure you want to pause the service {run.name}?",
        ),
        ("name",),
    ),
    ("resume", "svc"): Spec(
        change(header("Resuming"), lambda run: resume_service(run.admin, run.actor, run.name)),
        ("name",),
    ),
}
