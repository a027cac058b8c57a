"""imqdbmgr's command line: OpenMQ's grammar and OpenMQ's words for what it refuses."""

from __future__ import annotations

import pytest

from broker.management.commands.imqdbmgr import UsageError, help_hint, parse_args

pytestmark = pytest.mark.fast


def test_subcommands_and_options_in_any_order() -> None:
    a = parse_args(["-b", "b1", "backup", "-dir", "/bk", "-Dimq.cluster.ha=true", "-u", "mq"])
    assert (a.command, a.directory, a.instance, a.user) == ("backup", "/bk", "b1", "mq")
    assert a.defines == {"imq.cluster.ha": "true"}
    a = parse_args(["-varhome", "/v", "reset", "lck", "-n", "B2", "-D", "x=1", "-passfile", "p"])
    assert (a.command, a.varhome, a.broker_id, a.passfile) == ("reset lck", "/v", "B2", "p")
    assert a.defines == {"x": "1"}
    assert parse_args(["create", "all"]).command == "create all"
    assert parse_args(["query"]).command == "query"
    assert parse_args(["query", "-h"]).help and parse_args(["-version"]).version


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "A subcommand was expected:"),
        (["create"], "An argument was expected for subcommand: create"),
        (["create", "foo"], "Invalid argument specified for subcommand create: foo"),
        (["backup", "/bk"], "Invalid argument specified for subcommand backup: /bk"),
        (["backup", "-dir"], "An argument was expected for option: -dir"),
        (
            ["query", "delete", "tbl"],
            "Only one subcommand allowed, extra subcommand specified: delete",
        ),
        (["query", "-b"], "An argument was expected for option: -b"),
        (["query", "-x"], "Unrecognized command line option: -x"),
        (["query", "-p", "pw"], "the -p command line option is\nno longer supported"),
    ],
)
def test_what_it_refuses(argv: list[str], said: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_args(argv)
    assert said in str(exc.value)
    # The help hint is added where the message is printed, naming the command as it was
    # run (tests/test_console_scripts.py runs it as imqdbmgr).
    assert "Please type" not in str(exc.value)
    assert help_hint() == 'Please type "manage.py imqdbmgr -h" for help.'
