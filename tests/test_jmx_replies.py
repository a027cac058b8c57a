"""The JMX answers kept encoded and written in one pass (broker/engine/jmx_replies.py,
jmxser.write_attribute_list, jrmp.encode_returned and the call memo) give exactly the
bytes the generic writer gives; a kept answer is sent again only for the same values
of the same Java types.  The JDK's client reads them in tests/interop/test_java_jmx*.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.engine import jmx_stockinfo
from broker.engine.jmx import JmxServer, JrmpSession, Send
from broker.engine.jmx_mbeans import DOMAIN, Registry, one_reading
from broker.engine.jmx_names import ObjectName
from broker.engine.jmx_replies import ReplyMemo, layout_key, value_key
from broker.protocol import jmxser
from broker.protocol.javaser import ObjectStreamWriter
from broker.protocol.jrmp import (
    NORMAL_RETURN,
    RETURN_DATA,
    Call,
    JrmpDecoder,
    ObjID,
    encode_call,
    encode_handshake,
    encode_return,
    encode_return_of,
    encode_returned,
    encode_returned_by,
)
from broker.protocol.jtypes import JByte, JChar, JInt, JLong, JShort
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

from .test_jmx_operations import _login
from .test_jmx_rmi import in_process_broker

if TYPE_CHECKING:
    from broker.server.broker import Broker

pytestmark = pytest.mark.fast

GET_ATTRIBUTES = 6285293806596348999
QUERY_NAMES = 9152567528369059802
INVOKE = 1434350937885235744
UID = bytes(range(14))

# Every kind of value an attribute has, repeated (the repeats are back-references).
VALUES: list[tuple[str, object]] = [
    ("Name", "jms"),
    ("Port", JInt(7676)),
    ("Small", JInt(5)),
    ("Small2", JInt(5)),
    ("Negative", JInt(-129)),
    ("Count", JLong(123456789012)),
    ("Zero", JLong(0)),
    ("Zero2", JLong(0)),
    ("On", True),
    ("Off", False),
    ("On2", True),
    ("Unset", None),
    ("Unicode", "caf\u00e9 \U0001f600 nul\x00"),
    ("Empty", ""),
    ("Plain", 42),
    ("Short", JShort(3)),
    ("Byte", JByte(-1)),
    ("Char", JChar("x")),
    ("Float", -0.0),
    ("Ids", jmxser.string_array(["1", "2"])),
    (
        "Info",
        jmxser.composite(
            "t",
            "d",
            [("a", "A", "java.lang.String", "x"), ("b", "B", "java.lang.Integer", JInt(1))],
        ),
    ),
]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = in_process_broker(tmp_path / "var")
    try:
        yield b
    finally:
        b.executor.shutdown(wait=False)


def _generic(pairs: list[tuple[str, object]]) -> bytes:
    """The AttributeList's ReturnData as the generic writer gives it."""
    return encode_return(UID, jmxser.attribute_list([jmxser.attribute(n, v) for n, v in pairs]))


def _one_pass(pairs: list[tuple[str, object]]) -> bytes:
    body = encode_returned_by(lambda w: jmxser.write_attribute_list(w, pairs))
    return encode_return_of(UID, body)


@pytest.mark.parametrize("n", [0, 1, 2, len(VALUES)])
def test_attribute_list_in_one_pass_is_the_generic_bytes(n: int) -> None:
    pairs = VALUES[:n]
    assert _one_pass(pairs) == _generic(pairs)
    assert _one_pass(pairs[::-1]) == _generic(pairs[::-1])


def test_return_of_kept_bytes_is_the_stream_encode_return_writes() -> None:
    for value in [None, "x", JInt(1), jmxser.hash_set([jmxser.object_name(f"{DOMAIN}:a=b")])]:
        whole = encode_return(UID, value)
        assert encode_return_of(UID, encode_returned(value)) == whole
        # By hand: ReturnData, then one stream with the return type and UID in block data.
        w = ObjectStreamWriter(annotate=True)
        w.block(bytes([NORMAL_RETURN]) + UID)
        w.value(value)
        assert whole == bytes([RETURN_DATA]) + bytes(w.out)
    exc = jmxser.exception("InstanceNotFoundException", "gone")
    assert encode_return(UID, exc, exceptional=True) == encode_return_of(
        UID, encode_returned(exc), exceptional=True
    )


def test_every_mbean_info_kept_is_its_encoding() -> None:
    memo = ReplyMemo()
    for key in jmx_stockinfo.kinds():
        body = memo.value(("getMBeanInfo", key), key, partial(jmx_stockinfo.info_object, key))
        assert body == encode_returned(jmx_stockinfo.info_object(key))
        assert memo.value(("getMBeanInfo", key), key, lambda: 1 / 0) is body


def test_value_keys_tell_apart_what_is_written_apart() -> None:
    def key(value: object) -> object:
        return value_key(["A"], [value])

    # Equal in Python, different in Java: each its own key.
    assert len({key(True), key(1), key(JInt(1)), key(JLong(1)), key(JShort(1))}) == 5
    assert key("x") != key(JChar("x"))
    assert key(-0.0) is None and key(0.5) is None  # floats are never kept
    assert key(object()) is None
    info = VALUES[-1][1]
    assert key(info) == key(jmxser.composite(*_composite_args(JInt(1))))
    assert key(info) != key(jmxser.composite(*_composite_args(JLong(1))))


def _composite_args(b: object) -> tuple[str, str, list[jmxser.Item]]:
    return "t", "d", [("a", "A", "java.lang.String", "x"), ("b", "B", "java.lang.Integer", b)]


def _kept(memo: ReplyMemo, slot: str, pairs: list[tuple[str, object]]) -> bytes:
    return memo.attribute_list(slot, [n for n, _ in pairs], [v for _, v in pairs])


@pytest.mark.parametrize("n", [12, len(VALUES)])
def test_the_memo_sends_kept_bytes_only_for_the_same_values(n: int) -> None:
    memo = ReplyMemo()
    first = _kept(memo, "m", VALUES[:n])
    assert encode_return_of(UID, first) == _generic(VALUES[:n])
    if n == 12:  # (VALUES has a float further on: never kept)
        assert _kept(memo, "m", list(VALUES[:n])) is first
    for changed in (
        [*VALUES[: n - 1], ("Other", VALUES[n - 1][1])],  # another name
        [*VALUES[: n - 1], (VALUES[n - 1][0], JInt(0))],  # another value
        [*VALUES[: n - 2], (VALUES[n - 2][0], 1), VALUES[n - 1]],  # True as an Integer
    ):
        again = _kept(memo, "m", changed)
        assert again is not first and encode_return_of(UID, again) == _generic(changed)
    # A float is encoded every time, and its bytes are still the generic ones.
    floats: list[tuple[str, object]] = [("F", -0.0)]
    assert encode_return_of(UID, _kept(memo, "f", floats)) == _generic(floats)
    assert encode_return_of(UID, _kept(memo, "f", [("F", 0.0)])) == _generic([("F", 0.0)])
    small = ReplyMemo(limit=1)
    _kept(small, "a", VALUES[:1])
    _kept(small, "b", VALUES[:1])  # the memo starts again: only "b" is kept
    assert len(small._kept) == 1


def test_a_call_decoded_again_from_the_memo_is_the_same_call(broker: Broker) -> None:
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    _s, conn = _login(srv)
    name = jmxser.object_name(f"{DOMAIN}:type=Broker,subtype=Config")
    call = encode_call(conn, GET_ATTRIBUTES, [name, jmxser.string_array(["Port"]), None])
    first = JrmpDecoder()
    first.feed(encode_handshake())
    (a,) = first.feed(call)
    second = JrmpDecoder()
    second.feed(encode_handshake())
    assert second.feed(call[:10]) == []
    (b,) = second.feed(call[10:])
    assert isinstance(a, Call) and a == b and a.name == "getAttributes"
    # Two calls in one read: decoded, not taken from the memo as one.
    both = second.feed(call + call)
    assert [c.name for c in both if isinstance(c, Call)] == ["getAttributes"] * 2
    # invoke is never kept: its arguments are the caller's to read.
    inv = encode_call(conn, INVOKE, [name, "x", None, None, None])
    (c,) = first.feed(inv)
    (d,) = first.feed(inv)
    assert isinstance(c, Call) and c == d and c is not d


def test_polled_answers_are_the_generic_bytes(broker: Broker) -> None:
    """What getAttributes and queryNames send, kept or not, is what encoding the values
    read gives (every MBean of a broker with destinations and a connection)."""
    broker.router.create_destination("q1", DEST_QUEUE)
    broker.router.create_destination("t1", DEST_TOPIC)
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    names = Registry(broker).query(None)
    pattern = jmxser.object_name(f"{DOMAIN}:*")
    null = None
    for _round in range(2):  # the second round sends what the first kept
        (reply,) = s.feed(encode_call(conn, QUERY_NAMES, [pattern, null, None]))
        assert isinstance(reply, Send)
        expected = jmxser.hash_set([jmxser.object_name(n.canonical) for n in names])
        assert reply.data == encode_return(reply.data[8:22], expected)
        for name in names:
            kind = jmx_stockinfo.kind_of(name)
            assert kind is not None
            wanted = [a[0] for a in kind.attributes]
            args = [jmxser.object_name(name.canonical), jmxser.string_array(wanted), None]
            (reply,) = s.feed(encode_call(conn, GET_ATTRIBUTES, args))
            assert isinstance(reply, Send)
            mbean = srv.registry.get(name)
            assert mbean is not None
            with one_reading():
                pairs = [(a, mbean.attributes[a](broker)) for a in wanted if a in mbean.attributes]
            assert reply.data == encode_return(
                reply.data[8:22], jmxser.attribute_list([jmxser.attribute(*p) for p in pairs])
            ), name.canonical


def test_destination_mbeans_are_found_by_name(broker: Broker) -> None:
    broker.router.create_destination("q1", DEST_QUEUE)
    broker.router.create_destination("t1", DEST_TOPIC)
    reg = Registry(broker)
    listed = {n.canonical for n in reg.query(None)}
    for desttype, dest in (("q", "q1"), ("t", "t1"), ("t", "mq.metrics.broker"), ("q", "t1")):
        for subtype in ("Config", "Monitor"):
            name = ObjectName.parse(
                f'{DOMAIN}:type=Destination,subtype={subtype},desttype={desttype},name="{dest}"'
            )
            found = reg.get(name)
            # Found exactly when listed (the metrics topics are the broker's own).
            assert (found is not None) == (name.canonical in listed), name.canonical
            if found is not None:
                assert found.key.name == dest


def _rounds() -> list[list[tuple[str, object]]]:
    """One MBean's answers poll after poll: counters growing, strings changing length,
    a counter crossing into and out of the range Java shares (-128..127), a value
    changing type."""
    base = VALUES[:18] + VALUES[19:]  # no float: the memo keeps them
    out = []
    for big, text, small, count in (
        (1000, "a", 5, JLong(200)),
        (1001, "bb", 5, JLong(201)),
        (2**40, "caf\u00e9", 5, JLong(127)),  # into the shared range: another layout
        (-(2**31), "x" * 70_000, 6, JLong(-129)),  # a long string; small value changed
        (70_000, "", 6, JLong(-129)),
        (8, None, 6, JLong(300)),  # a String becomes null
        (9, "z", 6, JInt(300)),  # a Long becomes an Integer
    ):
        pairs = [
            *base,
            ("Big", JLong(big) if abs(big) > 2**31 else JInt(big)),
            ("Text", text),
            ("Small3", JInt(small)),
            ("Count", count),
            ("Text2", text),
            ("Count2", JLong(10_000 + big)),
        ]
        out.append(pairs)
    return out


def test_changed_values_fill_the_kept_layout_with_the_generic_bytes() -> None:
    memo = ReplyMemo()
    layouts = []
    for pairs in _rounds():
        body = _kept(memo, "m", pairs)
        assert encode_return_of(UID, body) == _generic(pairs)
        layouts.append(memo._layouts["m"])
    # Filled again, not made again, while only in-place values change.
    assert layouts[0] is layouts[1] and layouts[1] is not layouts[2]
    assert layouts[3] is layouts[4] and len(layouts[0].slots) >= 6
    # Only the in-place values vary in a layout: the first two rounds share one.
    first, second = _rounds()[:2]
    assert layout_key([n for n, _ in first], [v for _, v in first]) == layout_key(
        [n for n, _ in second], [v for _, v in second]
    )
    # Among flat values a small Long is written in place unless an equal one came before
    # (then it is a reference); beside a nested value it is keyed by itself.
    assert layout_key(["A"], [JLong(5)]) == layout_key(["A"], [JLong(6)])
    assert layout_key(["A", "B"], [JLong(5), JLong(5)]) != layout_key(
        ["A", "B"], [JLong(5), JLong(6)]
    )
    info = dict(VALUES)["Info"]
    assert layout_key(["A", "I"], [JLong(5), info]) != layout_key(["A", "I"], [JLong(6), info])
    assert layout_key(["A"], [JLong(500)]) == layout_key(["A"], [JLong(600)])
    assert layout_key(["A"], [JLong(500)]) != layout_key(["A"], [JInt(500)])
    assert layout_key(["A"], ["x"]) != layout_key(["A"], [JChar("x")])
    assert layout_key(["A"], [0.5]) is None


def test_small_counters_moving_keep_the_layout_and_give_the_generic_bytes() -> None:
    """Flat answers (a Destination or Service Monitor's) whose counters move within the
    range Java shares, meet each other, part and leave the range: each answer is the
    generic writer's bytes, and a layout is made again only when which values repeat an
    earlier one changes."""
    memo = ReplyMemo()
    made = []
    rounds = [
        (0, 1, 2, 7, True),
        (3, 4, 5, 7, True),  # all moved, none equal: the same layout
        (3, 3, 5, 7, True),  # the second equals the first: a reference
        (9, 9, 5, 7, True),  # still equal: that layout again
        (9, 10, 5, 7, False),
        (-128, 127, 128, -129, False),  # to both ends, and out of the range
        (127, 127, 127, 127, True),
        (1, 2, 3, 4, True),
    ]
    for a, b, c, d, flag in rounds:
        pairs: list[tuple[str, object]] = [
            ("Name", "q1"),
            ("A", JLong(a)),
            ("B", JLong(b)),
            ("C", JInt(c)),
            ("D", JInt(d)),
            ("E", JLong(c)),  # a Long equal to an Integer: not the same object
            ("Flag", flag),
            ("Unset", None),
        ]
        body = _kept(memo, "m", pairs)
        assert encode_return_of(UID, body) == _generic(pairs), (a, b, c, d)
        made.append(memo._layouts["m"])
    assert made[0] is made[1] and made[1] is not made[2] and made[2] is made[3]
    assert made[4] is not made[3]  # a Boolean changed: it is keyed by itself


def test_a_memo_keeping_nothing_keeps_no_layout() -> None:
    memo = ReplyMemo(limit=0)
    for pairs in _rounds()[:2]:
        assert encode_return_of(UID, _kept(memo, "m", pairs)) == _generic(pairs)
    assert not memo._kept and not memo._layouts


def test_return_uids_are_unique_past_the_count_of_shorts() -> None:
    from broker.engine.jmx import _ReturnUids

    uids = _ReturnUids()
    made = [uids.next() for _ in range(70_000)]  # the count wraps (65,536 shorts) once
    assert len(set(made)) == len(made) and {len(u) for u in made} == {14}


def _answer(
    s: JrmpSession, conn: ObjID, broker: Broker, text: str, attr: str
) -> tuple[bytes, object]:
    """getAttributes of every attribute of MBean ``text``: the answer's bytes after the
    UID, checked against the generic writer's, and the value of ``attr``."""
    name = ObjectName.parse(text)
    kind = jmx_stockinfo.kind_of(name)
    assert kind is not None
    wanted = [a[0] for a in kind.attributes]
    call = encode_call(
        conn, GET_ATTRIBUTES, [jmxser.object_name(text), jmxser.string_array(wanted), None]
    )
    (reply,) = s.feed(call)
    assert isinstance(reply, Send)
    mbean = s.server.registry.get(name)
    assert mbean is not None and mbean.kind.stamp is not None
    with one_reading():
        pairs = [(a, mbean.attributes[a](broker)) for a in wanted]
    expected = jmxser.attribute_list([jmxser.attribute(*p) for p in pairs])
    assert reply.data == encode_return(reply.data[8:22], expected), text
    return reply.data[22:], dict(pairs)[attr]


def test_a_settled_mbeans_kept_answer_follows_each_change(broker: Broker) -> None:
    """The Config MBeans whose values the properties (or a destination's attributes)
    settle are answered from what was kept until those change; then read again, as the
    generic writer encodes them."""
    broker.router.create_destination("q1", DEST_QUEUE)
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)

    def change_property(prop: str) -> Callable[[object], None]:
        return lambda value: broker.config.set(prop, str(int(value) + 11))  # type: ignore[call-overload]

    def change_destination(value: object) -> None:
        broker.router.update_destination(
            broker.router.queues["q1"],
            {"maxNumMsgs": int(value) + 11},  # type: ignore[call-overload]
        )

    def add_destination(_value: object) -> None:
        broker.router.create_destination("q2", DEST_QUEUE)

    cases: list[tuple[str, str, Callable[[object], None], int]] = [
        (
            f"{DOMAIN}:name=jms,subtype=Config,type=Service",
            "MaxThreads",
            change_property("imq.jms.max_threads"),
            11,
        ),
        (
            f"{DOMAIN}:subtype=Config,type=Log",
            "RolloverSecs",
            change_property("imq.log.file.rolloversecs"),
            11,
        ),
        # A service that is not running: its monitor shows the port configured.
        (
            f"{DOMAIN}:name=wsjms,subtype=Monitor,type=Service",
            "Port",
            change_property("imq.wsjms.ws.port"),
            11,
        ),
        (
            f'{DOMAIN}:desttype=q,name="q1",subtype=Config,type=Destination',
            "MaxNumMsgs",
            change_destination,
            11,
        ),
        (f"{DOMAIN}:subtype=Config,type=DestinationManager", "NumDestinations", add_destination, 1),
    ]
    for text, attr, change, delta in cases:
        first, value = _answer(s, conn, broker, text, attr)
        assert any(slot == ObjectName.parse(text) for slot, _ in srv.replies._settled)  # kept
        again, same = _answer(s, conn, broker, text, attr)
        assert again == first and same == value
        change(value)
        changed, new = _answer(s, conn, broker, text, attr)
        assert new == int(value) + delta and changed != first  # type: ignore[call-overload]
