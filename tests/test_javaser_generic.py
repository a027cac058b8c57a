"""The generic policy of broker/protocol/javaser.py (``decode_object(generic=True)``).

Admin replies carry OpenMQ's own Serializable classes; the admin client reads them with
the same reader as message bodies, only with a wider policy.  The bytes come from the
project's writer (broker/protocol/admin_info.py, byte-exact to JDK 17) and from the
JDK-captured fixtures of the admin tests.
"""

from __future__ import annotations

import pytest

from broker.protocol.admin_info import (
    PACKAGE,
    connection_info,
    consumer_info,
    destination_info,
    encode_admin_object,
    encode_admin_vector,
)
from broker.protocol.javaser import (
    JavaSerializationError,
    decode_object,
    decode_vector,
    encode_hashtable,
    encode_map_body,
)
from broker.protocol.jtypes import JInt, JLong

from .test_admin_commands import JDK_DURABLES
from .test_metrics_events import DEST_VALUES, JDK_DMC_FULL, JDK_MC_FULL, MC_FULL

pytestmark = pytest.mark.fast

MAGIC = "aced0005"
OBJECT_ARRAY_DESC = (
    "72" + "0013" + b"[Ljava.lang.Object;".hex() + "90ce589f1073296c" + "02" + "0000" + "7870"
)


def generic(data: bytes) -> object:
    return decode_object(data, generic=True)


def utf(text: str) -> str:
    raw = text.encode()
    return f"{len(raw):04x}" + raw.hex()


def classdesc(
    name: str, suid: str = "00" * 8, flags: str = "02", fields: tuple[str, ...] = ()
) -> str:
    """A TC_CLASSDESC without its superclass (append one, or "70" for none)."""
    return "72" + utf(name) + suid + flags + f"{len(fields):04x}" + "".join(fields) + "78"


def int_field(name: str) -> str:
    return "49" + utf(name)


INTEGER_ONE = (
    "73"
    + classdesc("java.lang.Integer", "12e2a0a4f7818738", "02", (int_field("value"),))
    + classdesc("java.lang.Number", "86ac951d0b94e08b")
    + "70"
    + "00000001"
)


def hashmap(size: int, entries: str) -> bytes:
    fields = ("46" + utf("loadFactor"), int_field("threshold"))
    desc = classdesc("java.util.HashMap", "0507dac1c31660d1", "03", fields) + "70"
    return bytes.fromhex(
        MAGIC
        + "73"
        + desc
        + "3f4000000000000c"
        + "7708"
        + "00000010"
        + f"{size:08x}"
        + entries
        + "78"
    )


# ---------------------------------------------------------------------------
# What the admin client reads
# ---------------------------------------------------------------------------


def test_nested_objects_with_superclass_fields() -> None:
    info = consumer_info(
        connection=connection_info(3003), uidString="2002", destination="q1", type=1, updateMask=5
    )
    value = generic(encode_admin_object(info))
    assert value == {
        "__class__": PACKAGE + "ConsumerInfo",
        "updateMask": 5,  # AdminInfo's field: superclass data come first
        "type": 1,
        "brokerAddressShortString": None,
        "connection": {
            "__class__": PACKAGE + "ConnectionInfo",
            "updateMask": 0,
            "nconsumers": 0,
            "nproducers": 0,
            "remPort": 0,
            "uuid": 3003,
            "clientID": "",
            "id": None,
            "metrics": None,
            "remoteIP": None,
            "service": "",
            "user": "",
            "userAgent": "",
        },
        "destination": "q1",
        "id": None,
        "selector": None,
        "subuidString": None,
        "uidString": "2002",
    }
    assert list(value)[:3] == ["__class__", "updateMask", "type"]  # type: ignore[arg-type]


def test_jdk_durables_vector() -> None:
    first, second = generic(JDK_DURABLES)  # type: ignore[misc]
    assert first["__class__"] == PACKAGE + "DurableInfo"
    # activeConsumers is a LinkedHashMap keyed by the ConsumerInfo's own uidString object
    ((uid, cinfo),) = first["activeConsumers"].items()
    assert uid == "2002" and cinfo["uidString"] == "2002"
    assert cinfo["connection"]["uuid"] == 3003 and cinfo["updateMask"] == 0
    assert first["consumer"]["selector"] == "a > 1" and first["isActive"] is True
    assert second["activeConsumers"] == {} and second["isJMSShared"] is True


def test_hashmap_subclass_entries_become_keys() -> None:
    """DestMetricsCounters extends HashMap: its entries (written by HashMap.writeObject)
    are the metrics, next to its own field; HashMap's loadFactor/threshold are not kept."""
    value = generic(JDK_DMC_FULL)
    assert isinstance(value, dict)
    assert list(value)[:2] == ["__class__", "timeStamp"]
    assert value.pop("__class__") == "com.sun.messaging.jmq.util.DestMetricsCounters"
    assert value.pop("timeStamp") == 1767225600456
    assert value.pop("diskReserved") == value.pop("diskUsed") == 0
    assert value.pop("diskUtilizationRatio") == value.pop("numExpiredMsgs") == 0
    assert value.pop("numPurgedMsgs") == 0
    assert value == DEST_VALUES
    assert type(value["numMsgs"]) is JInt and type(value["msgBytesIn"]) is JLong


def test_plain_fields_keep_python_types() -> None:
    value = generic(JDK_MC_FULL)
    assert isinstance(value, dict)
    assert {k: value[k] for k in MC_FULL} == MC_FULL
    assert all(type(value[k]) is int for k in MC_FULL)


def test_strict_policy_refuses_what_generic_accepts() -> None:
    body = encode_admin_object(destination_info(name="q1", nMessages=3))
    with pytest.raises(JavaSerializationError, match="DestinationInfo is not allowed"):
        decode_object(body)
    with pytest.raises(JavaSerializationError, match="not allowed"):
        decode_vector(encode_admin_vector([destination_info(name="q1")]))
    with pytest.raises(JavaSerializationError, match="DestMetricsCounters is not allowed"):
        decode_object(JDK_DMC_FULL)
    info = generic(body)
    assert isinstance(info, dict) and info["name"] == "q1" and info["nMessages"] == 3
    evil = bytes.fromhex(MAGIC + "73" + classdesc("com.example.Evil") + "70")
    with pytest.raises(JavaSerializationError, match="com.example.Evil"):
        decode_object(evil)
    assert generic(evil) == {"__class__": "com.example.Evil"}


def test_whitelisted_values_decode_alike() -> None:
    values = {"s": "x", "i": JInt(7), "l": JLong(1 << 40), "b": b"\x00\x01", "n": None}
    body = encode_map_body(values)
    assert generic(body) == decode_object(body) == values
    table = encode_hashtable({"k": "v"})
    assert generic(table) == {"k": "v"}


# ---------------------------------------------------------------------------
# JDK collections, arrays and enums (hand-built streams)
# ---------------------------------------------------------------------------


def test_array_list_primitive_arrays_and_enums() -> None:
    array_list = (
        "73"
        + classdesc("java.util.ArrayList", "7881d21d99c7619d", "03", (int_field("size"),))
        + "70"
        + "00000002"
        + "7704"
        + "00000002"
        + "740001"
        + b"a".hex()
        + "70"
        + "78"
    )
    assert generic(bytes.fromhex(MAGIC + array_list)) == ["a", None]
    int_array = "75" + classdesc("[I", "4dba602676eab2a5") + "70" + "00000002" + "0000000700000008"
    assert generic(bytes.fromhex(MAGIC + int_array)) == [7, 8]
    enum_desc = classdesc("java.time.DayOfWeek", flags="12") + classdesc(
        "java.lang.Enum", flags="12"
    )
    assert generic(bytes.fromhex(MAGIC + "7e" + enum_desc + "70" + "74" + utf("MON"))) == "MON"


def test_back_reference_to_a_finished_object_is_shared() -> None:
    # Handles: Object[]'s class 0x7e0000, the array 1, Foo's class 2, the Foo 3.
    body = (
        MAGIC
        + "75"
        + OBJECT_ARRAY_DESC
        + "00000002"
        + "73"
        + classdesc("Foo")
        + "70"
        + "71007e0003"
    )
    first, second = generic(bytes.fromhex(body))  # type: ignore[misc]
    assert first == {"__class__": "Foo"} and first is second


# ---------------------------------------------------------------------------
# The strict reader's limits hold for the generic policy too
# ---------------------------------------------------------------------------


def _cycle() -> bytes:
    # Foo's one object field refers to the Foo being read (handle 0x7e0002).
    field = "4c" + utf("self") + "74" + utf("LFoo;")
    return bytes.fromhex(MAGIC + "73" + classdesc("Foo", fields=(field,)) + "70" + "71007e0002")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes.fromhex(MAGIC + "73" + classdesc("A") * 5000 + "70"), "nested"),
        (
            bytes.fromhex(MAGIC + ("75" + OBJECT_ARRAY_DESC + "00000001") * 100 + "70"),
            "nested",
        ),
        (bytes.fromhex(MAGIC + "75" + OBJECT_ARRAY_DESC + "7fffffff"), "bad array length"),
        (
            bytes.fromhex(MAGIC + "75" + classdesc("[J", "78200415b512b175") + "70" + "00000002"),
            "bad array length",
        ),
        (_cycle(), "still being read"),
        (
            bytes.fromhex(MAGIC + "73" + classdesc("Ext", flags="0c") + "70"),
            "default serialisation",
        ),
        (bytes.fromhex(MAGIC + "7e" + classdesc("NotEnum") + "70" + "74" + utf("A")), "enum"),
        (bytes.fromhex(MAGIC + "75" + classdesc("Q") + "70" + "00000000"), "not an array"),
        (bytes.fromhex(MAGIC + "70" + "70"), "trailing"),
        (bytes.fromhex(MAGIC + "79"), "TC_RESET"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_generic_rejects(data: bytes, message: str) -> None:
    with pytest.raises(JavaSerializationError, match=message):
        generic(data)


def test_generic_map_rules() -> None:
    # Non-String keys are fine where a Java map holds them; unhashable ones are not.
    assert generic(hashmap(1, INTEGER_ONE + "70")) == {JInt(1): None}
    with pytest.raises(JavaSerializationError, match="only String keys"):
        generic(hashmap(1, "73" + classdesc("Foo") + "70" + "70"))
    with pytest.raises(JavaSerializationError, match="exceeds"):
        generic(hashmap(0x7FFFFFFF, ""))
    with pytest.raises(JavaSerializationError, match="extra data"):
        generic(hashmap(0, "70"))


def test_every_truncation_and_byte_change_is_rejected_cleanly() -> None:
    for body in (JDK_DURABLES, JDK_DMC_FULL):
        for end in range(len(body)):
            with pytest.raises(JavaSerializationError):
                generic(body[:end])
        for position in range(0, len(body), 3):
            for byte in (0x00, 0x70, 0x71, 0x73, 0x75, 0x77, 0x78, 0x7E, 0xFF):
                try:
                    generic(body[:position] + bytes((byte,)) + body[position + 1 :])
                except JavaSerializationError:
                    pass
