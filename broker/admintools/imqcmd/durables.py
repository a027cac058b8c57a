"""imqcmd's subcommands about durable subscriptions: list, purge and destroy dur."""

from __future__ import annotations

from collections.abc import Callable

from ..actions.durables import destroy_durable, list_durables, purge_durable
from .output import Table
from .session import Handler, Run, Spec, change


def list_dur(run: Run) -> None:
    topic = run.opts["topic"]
    rows = list_durables(run.admin, topic)
    if topic:
        run.say(f"Listing all the durable subscriptions on the topic: {topic}")
    else:
        run.say("Listing all the durable subscriptions")
    run.say()
    run.say("On the broker specified by:")
    run.say()
    run.broker_info()
    table = Table(5, 3).title(
        ("Name", "Client ID", "Topic", "Number of Messages", "Durable Sub State")
    )
    for d in rows:
        state = "ACTIVE" if d["active"] else "INACTIVE"
        table.add((d["name"], d["client_id"] or "-", d["topic"] or "-", d["messages"], state))
    run.show(table)
    run.done()


def dur_header(run: Run, doing: str) -> None:
    table = Table(2, 4).title(("Durable Subscription Name", "Client ID"))
    table.add((run.opts["name"], run.opts["client_id"]))
    run.about(doing, "durable subscription", table)


def dur_change(doing: str, verb: str, act: Callable[..., None]) -> Handler:
    """A change of the -n/-c subscription: "Are you sure you want to <verb> the durable
    subscription NAME (CLIENTID)?", then ``act(admin, actor, name, client_id)``."""
    return change(
        lambda run: dur_header(run, doing),
        lambda run: act(run.admin, run.actor, run.opts["name"], run.opts["client_id"]),
        lambda run: (
            f"Are you sure you want to {verb} the durable subscription "
            f"{run.opts['name']} ({run.opts['client_id']})?"
        ),
    )


NAME_AND_CLIENT = ("name", "client_id")
COMMANDS: dict[tuple[str, str], Spec] = {
    ("list", "dur"): Spec(list_dur),
    ("purge", "dur"): Spec(
        dur_change("Purging all the messages of", "purge", purge_durable), NAME_AND_CLIENT
    ),
    ("destroy", "dur"): Spec(dur_change("Destroying", "destroy", destroy_durable), NAME_AND_CLIENT),
}
