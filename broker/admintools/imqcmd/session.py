"""One imqcmd run: the options, the broker connection and the output, which every
subcommand's handler is given (:class:`Run`), and the table entry naming a handler
(:class:`Spec`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandError

from ..broker_handle import BrokerAdmin
from .output import SUCCESS, Table


class Cancelled(Exception):
    """The administrator answered no: nothing was changed."""


@dataclass
class Run:
    """What a handler works with: the parsed options, the -o attributes, the broker
    (its admin connection and the address it was reached at) and the output."""

    opts: dict[str, Any]
    attrs: dict[str, str]
    admin: BrokerAdmin
    host: str
    port: int
    stdout: Any  # Django's OutputWrapper: write(text, ending=...), flush()

    @property
    def actor(self) -> str:
        """Who the change is logged under: the -u user."""
        return self.opts["user"]

    @property
    def name(self) -> str:
        return self.opts["name"]

    def dest(self) -> tuple[str, str, str]:
        """(name, kind code as the actions take it, "queue"/"topic")."""
        kind = self.opts["dest_type"].lower()[:1]
        return self.opts["name"], kind, "queue" if kind == "q" else "topic"

    # -- output --------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        if not self.opts["silent"]:
            self.stdout.write(text)

    def show(self, table: Table, *, with_title: bool = True) -> None:
        for line in table.lines(with_title=with_title):
            self.say(line)

    def pairs(self, items: Sequence[tuple[str, object]]) -> None:
        width = max(len(k) for k, _ in items)
        for k, v in items:
            self.say(f"{k.ljust(width)}    {'' if v is None else v}".rstrip())

    def broker_info(self) -> None:
        table = Table(2, 4).title(("Host", "Primary Port"))
        table.add((self.host, self.port))
        self.show(table)
        self.say()

    def done(self) -> None:
        self.say()
        self.say(SUCCESS)

    def confirm(self, question: str) -> None:
        """OpenMQ's "Are you sure ...? (y/n)[n]" unless -f; no (the default) cancels."""
        if self.opts["force"]:
            return
        self.stdout.write(f"{question} (y/n)[n] ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower() or "n"
        if not sys.stdin.isatty():
            self.stdout.write("")  # the answer was not echoed: end the question's line
        if answer in ("y", "yes"):
            return
        if answer in ("n", "no"):
            raise Cancelled
        raise CommandError(f"Error: unrecognised answer {answer!r}; nothing was changed")

    # -- the headers OpenMQ prints before a subcommand's result ---------------------------

    def on_broker(self, first: str) -> None:
        """``first``, then "On the broker specified by:" and the broker's address."""
        self.say(first)
        self.say()
        self.broker_info()

    def about(self, doing: str, what: str, table: Table) -> None:
        """ "<doing> the <what> where:", the table naming it, and the broker."""
        self.say(f"{doing} the {what} where:")
        self.say()
        self.show(table)
        self.say()
        self.on_broker("On the broker specified by:")


def one(label: str, value: object) -> Table:
    """A one-column table naming one thing (a service, a connection ID, ...)."""
    table = Table(1, 4).title((label,))
    table.add((value,))
    return table


Handler = Callable[[Run], None]


@dataclass(frozen=True)
class Spec:
    """One subcommand: its handler and the options it cannot do without."""

    handler: Handler
    needs: tuple[str, ...] = field(default=())


def change(
    header: Callable[[Run], None],
    act: Callable[[Run], object],
    question: Callable[[Run], str] | None = None,
) -> Handler:
    """The shape of most changes: the header, "Are you sure ...?" (when there is a
    question), the action, the success line."""

    def handler(run: Run) -> None:
        header(run)
        if question is not None:
            run.confirm(question(run))
        act(run)
        run.done()

    return handler
