"""imqcmd's subcommands about client connections: list, query and destroy cxn."""

from __future__ import annotations

from ..actions.connections import destroy_connection, list_connections, query_connection
from .output import Table
from .session import Run, Spec, change, one


def list_cxn(run: Run) -> None:
    service = run.opts["service"]
    rows = list_connections(run.admin, service)
    if service:
        run.say("Listing all the connections on the service where:")
        run.say()
        run.show(one("Service Name", service))
        run.say()
        run.on_broker("On the broker specified by:")
    else:
        run.on_broker("Listing all the connections on the broker specified by:")
    table = Table(6, 3).title(
        ("Connection ID", "User", "Service", "Producers", "Consumers", "Host")
    )
    for c in rows:
        table.add(
            (
                c["id"],
                c["user"],
                c["service"],
                c["producers"],
                c["consumers"],
                c["address"] or c["host"],
            )
        )
    run.show(table)
    run.done()


def query_cxn(run: Run) -> None:
    c = query_connection(run.admin, int(run.name))
    run.about("Querying", "connection", one("Connection ID", run.name))
    run.pairs(
        [
            ("Connection ID", c["id"]),
            ("User", c["user"]),
            ("Service", c["service"]),
            ("Client ID", c["client_id"]),
            ("Client Platform", c["platform"]),
            ("Producers", c["producers"]),
            ("Consumers", c["consumers"]),
            ("Sessions", c["sessions"]),
            ("Host", c["host"]),
            ("Port", c["port"]),
        ]
    )
    run.done()


COMMANDS: dict[tuple[str, str], Spec] = {
    ("list", "cxn"): Spec(list_cxn),
    ("query", "cxn"): Spec(query_cxn, ("name",)),
    ("destroy", "cxn"): Spec(
        change(
            lambda run: run.about("Destroying", "connection", one("Connection ID", int(run.name))),
            lambda run: destroy_connection(run.admin, run.actor, int(run.name)),
            lambda run: f"Are you sure you want to destroy the connection {int(run.name)}?",
        ),
        ("name",),
    ),
}
