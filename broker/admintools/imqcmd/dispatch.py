"""imqcmd's subcommand table, (verb, noun) -> :class:`~.session.Spec`, gathered from the
subject modules, and the run of one subcommand with its errors as imqcmd prints them."""

from __future__ import annotations

from django.core.management.base import CommandError

from ..actions import ActionError, AdminError, BrokerUnavailable
from . import broker, connections, destinations, durables, metrics, services, transactions
from .session import Cancelled, Run, Spec

COMMANDS: dict[tuple[str, str], Spec] = {
    **broker.COMMANDS,
    **services.COMMANDS,
    **connections.COMMANDS,
    **destinations.COMMANDS,
    **durables.COMMANDS,
    **transactions.COMMANDS,
    **metrics.COMMANDS,
}


def execute(key: tuple[str, str], run: Run) -> None:
    """Run subcommand ``key``; a refusal, bad input or a broker that does not answer is
    a CommandError of one line ("Error <verb> <noun>: ..."), a "no" at the question
    leaves everything as it was."""
    what = f"{key[0]} {key[1]}"
    try:
        COMMANDS[key].handler(run)
    except Cancelled:
        run.say("Cancelled: nothing was changed.")
    except ActionError as exc:
        raise CommandError(f"Error {what}: {exc}") from exc
    except AdminError as exc:
        raise CommandError(f"Error {what}: {exc.text or 'failed'} (status {exc.status})") from exc
    except BrokerUnavailable as exc:
        raise CommandError(f"Error {what}: {exc}") from exc
    except (TimeoutError, OSError) as exc:
        raise CommandError(f"Error {what}: the broker did not answer: {exc}") from exc
