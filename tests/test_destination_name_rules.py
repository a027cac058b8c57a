"""The destination-name rules of broker/protocol/destname.py, in process.

The topic-pattern cases are what OpenMQ 6.9's broker makes of the same names
(``DestinationUID.createRegExString`` from imqbroker.jar, called once for each): None where
it takes the pattern, else its message (a 406 at every JMS way in).  The administrator's
rule answers in the words of OpenMQ's admin service (B4091, B4175).
"""

from __future__ import annotations

import pytest

from broker.protocol.destname import (
    admin_name_problem,
    client_name_problem,
    name_problem,
    queue_name_problem,
    topic_pattern_problem,
)

pytestmark = pytest.mark.fast

PATTERNS = {
    "a.*": None,
    "*": None,
    "*.a": None,
    "a.*.b": None,
    "a*": "surrounded",
    "*a": "surrounded",
    "a.**": None,
    "a.*b": "surrounded",
    ">": None,
    "a.>": "never be preceded",
    "a>": None,
    "a.>.b": "never be preceded",
    ">.a": None,
    "a.b>": None,
    "a..*": "name was ..",
    "a.*.": "name ends with .",
    "*.*": None,
    ".*": "name starts with .",
    "**": None,
    "a.>x": "never be preceded",
    "*>": None,
    "a.*>": None,
    "$a.*": None,
    "a$.*": None,
    "q*x": "surrounded",
    "a..b": None,  # no wildcard: not a pattern
}


def test_topic_patterns_as_openmq_checks_them() -> None:
    for name, says in PATTERNS.items():
        problem = topic_pattern_problem(name)
        if says is None:
            assert problem is None, name
        else:
            assert problem is not None and problem.startswith(f"{name}-"), (name, problem)
            assert says in problem, (name, problem)
    assert topic_pattern_problem("q*x") == "q*x-Wildcard should be surrounded by ."


def test_the_three_rules() -> None:
    # The broker's, for every way in: only what no way out can carry.
    for bad in ("", "a\r\nb", "a\x00b", "x\u200by", "\x85"):
        assert name_problem(bad) is not None, repr(bad)
    for good in ("a-b", "1abc", "bad name", "café", "a.*"):
        assert name_problem(good) is None, good
    assert queue_name_problem("a.*") is not None and queue_name_problem("a.b") is None
    # The stock Java client's (the UMS gateway's): identifiers, dots and wildcards.
    assert client_name_problem("a-b") is not None and client_name_problem("a.*") is None
    assert client_name_problem("mq.sys.dmq") is None
    # The administrator's, as OpenMQ's admin service words it.
    assert admin_name_problem("bad name") == (
        "[B4091]: The Destination of bad name contains invalid characters"
    )
    assert admin_name_problem("a\nb") == (
        "[B4091]: The Destination of 'a\\nb' contains invalid characters"
    )
    assert admin_name_problem("mq.foo") == (
        "[B4175]: The following destination cannot be created: mq.foo\n"
        'Destination names starting with "mq." are reserved for internal Message Queue use.\n'
        "They cannot be created administratively."
    )
    assert admin_name_problem("orders.eu") is None and admin_name_problem("$x_1") is None


def test_the_admin_queue_is_made_whatever_auto_creation_says() -> None:
    """With imq.autocreate.queue=false an administration tool still opens the admin queue
    (an idle one is reaped like any auto-created queue, and must come back)."""
    from broker.core.errors import RouterError
    from broker.core.router import MessageRouter, RouterSettings
    from broker.protocol.admin_types import ADMIN_QUEUE
    from broker.protocol.types import DEST_QUEUE, Status

    from .routerkit import Conn, session

    r = MessageRouter(RouterSettings(autocreate_topic=False, autocreate_queue=False))
    s = session(r, Conn(1))
    for _ in range(2):
        prod = r.add_producer(s, ADMIN_QUEUE, DEST_QUEUE)
        assert r.lookup(ADMIN_QUEUE, DEST_QUEUE) is not None
        r.remove_producer(prod)
        assert r.reap_idle(0, 60) == [] and r.reap_idle(60, 60) == [ADMIN_QUEUE]
    with pytest.raises(RouterError) as refused:
        r.add_producer(s, "orders", DEST_QUEUE)
    assert refused.value.status == Status.NOT_FOUND
