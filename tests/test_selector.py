"""JMS 2.0 message selector tests (broker/core/selector.py)."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.selector import Selector, SelectorError, compile_selector
from broker.protocol.jtypes import JByte, JChar, JFloat, JInt, JLong, JShort

pytestmark = pytest.mark.fast

UNKNOWN = "unknown"
INVALID = "invalid"

# One message's worth of values: properties plus the header fields the caller adds.
V: dict[str, object] = {
    "s": "abc",
    "s2": "abc",
    "quote": "it's",
    "empty": "",
    "i": 5,
    "i2": 5,
    "neg": -4,
    "ji": JInt(7),
    "jl": JLong(2**40),
    "jb": JByte(-3),
    "js": JShort(300),
    "big": JLong(2**63 - 1),
    "zero": 0,
    "f": 2.5,
    "jf": JFloat(1.5),
    "fone": JFloat(1.1),
    "ch": JChar("z"),
    "yes": True,
    "no": False,
    "nul": None,
    "raw": b"abc",
    "obj": object(),
    "dots": "a.b*c(d)+[x]?$^|",
    "pct": "50%",
    "under": "a_b",
    "nl": "line1\nline2",
    "Name": "upper",
    "name": "lower",
    "héllo": "unicode",
    "$d_1": 1,
    "JMSPriority": 7,
    "JMSDeliveryMode": "PERSISTENT",
    "JMSType": "order",
    "JMSCorrelationID": None,
    "JMSMessageID": "ID:1-2",
    "JMSTimestamp": 1_700_000_000_000,
    "JMSExpiration": 0,
    "JMSRedelivered": False,
    "JMSDeliveryTime": 5,
    "JMSDestination": "q",
    "JMSXDeliveryCount": 2,
    "JMSXGroupID": "g1",
    "JMS_SUN_COMPRESS": True,
}

CASES: list[tuple[str, dict[str, object], object]] = [
    # --- empty selectors select everything
    ("", {}, True),
    ("   \t\n ", {}, True),
    # --- string literals and escapes
    ("s = 'abc'", V, True),
    ("s = 'ABC'", V, False),
    ("s <> 'abc'", V, False),
    ("s <> 'abd'", V, True),
    ("quote = 'it''s'", V, True),
    ("'''' = ''''", {}, True),
    ("empty = ''", V, True),
    ("'a' = 'a'", {}, True),
    ("'a' <> 'b'", {}, True),
    ("ch = 'z'", V, True),  # JChar is a string
    ("s = s2", V, True),
    ("nl = 'line1\nline2'", V, True),
    # --- exact numeric literals
    ("i = 5", V, True),
    ("i = +5", V, True),
    ("neg = -4", V, True),
    ("i = 5L", V, True),
    ("0x1F = 31", {}, True),
    ("0X1f = 31l", {}, True),
    ("017 = 15", {}, True),
    ("0 = 0", {}, True),
    ("0xFFFFFFFFFFFFFFFF = -1", {}, True),
    ("big = 9223372036854775807", V, True),
    ("-9223372036854775808 < 0", {}, True),
    ("9223372036854775808 > 0", {}, INVALID),
    ("-(9223372036854775808) < 0", {}, INVALID),
    ("08 = 8", {}, INVALID),
    ("0x = 0", {}, INVALID),
    ("12abc = 1", {}, INVALID),
    ("0b101 = 5", {}, INVALID),
    ("1_000 = 1000", {}, INVALID),
    # --- approximate numeric literals
    ("7E3 = 7000", {}, True),
    ("-57.9E2 = -5790", {}, True),
    ("7. = 7", {}, True),
    (".5 = 0.5", {}, True),
    ("+6.2 > 6", {}, True),
    ("1.5e-3 = 0.0015", {}, True),
    ("1.5E+3 = 1500", {}, True),
    ("7F = 7", {}, True),
    ("2.5d = 2.5", {}, True),
    ("f = 2.5D", V, True),
    ("jf = 1.5", V, True),
    ("fone = 1.1F", V, True),  # F rounds to single precision, like Java
    ("fone = 1.1", V, False),  # a Java float is not the double 1.1
    ("1e999 > 0", {}, INVALID),
    ("1e-999 > 0", {}, INVALID),
    ("1.5.2 = 1", {}, INVALID),
    ("1e = 1", {}, INVALID),
    ("0x1p3 = 8", {}, INVALID),
    (". = 1", {}, INVALID),
    # --- boolean literals, case-insensitive keywords
    ("TRUE", {}, True),
    ("true", {}, True),
    ("FALSE", {}, False),
    ("fAlSe = FALSE", {}, True),
    ("yes = TRUE", V, True),
    ("yes = true AND no = False", V, True),
    ("yes <> no", V, True),
    ("yes", V, True),
    ("no", V, False),
    ("s = 'abc' and i = 5 Or i = 6", V, True),
    ("not s = 'abd'", V, True),
    ("i between 1 AnD 9", V, True),
    ("s iN ('abc')", V, True),
    ("s lIkE 'a%' escape '!'", V, True),
    ("nul is NULL", V, True),
    ("nul Is nOt nUlL", V, False),
    # --- identifiers: case-sensitive, Java identifier characters
    ("Name = 'upper'", V, True),
    ("name = 'lower'", V, True),
    ("NAME = 'upper'", V, UNKNOWN),  # a different, absent property
    ("héllo = 'unicode'", V, True),
    ("$d_1 = 1", V, True),
    ("_missing IS NULL", V, True),
    ("ın = 'x'", {"ın": "x"}, True),  # dotless i: not the keyword IN
    ("1a = 1", {}, INVALID),
    ("a# = 1", {}, INVALID),
    # --- reserved words cannot be identifiers
    ("NULL = 1", {}, INVALID),
    ("TRUE = TRUE", {}, True),
    ("and = 1", {}, INVALID),
    ("x = or", {}, INVALID),
    ("not = 1", {}, INVALID),
    ("between > 1", {}, INVALID),
    ("like = 'a'", {}, INVALID),
    ("In = 'a'", {}, INVALID),
    ("is IS NULL", {}, INVALID),
    ("escape = 'a'", {}, INVALID),
    ("x = NULL", {}, INVALID),
    # --- precedence
    ("1 + 2 * 3 = 7", {}, True),
    ("(1 + 2) * 3 = 9", {}, True),
    ("10 - 4 - 3 = 3", {}, True),
    ("24 / 4 / 2 = 3", {}, True),
    ("-2 * -3 = 6", {}, True),
    ("- - 2 = 2", {}, True),
    ("-i + 10 = 5", V, True),
    ("TRUE OR TRUE AND FALSE", {}, True),  # AND binds tighter than OR
    ("(TRUE OR TRUE) AND FALSE", {}, False),
    ("NOT FALSE AND FALSE", {}, False),  # NOT binds tighter than AND
    ("NOT (FALSE AND FALSE)", {}, True),
    ("NOT i = 6", V, True),  # comparison binds tighter than NOT
    ("i + 1 BETWEEN 6 AND 6", V, True),
    # --- arithmetic
    ("i + i2 = 10", V, True),
    ("i - 7 = -2", V, True),
    ("i * ji = 35", V, True),
    ("7 / 2 = 3", {}, True),  # long division
    ("-7 / 2 = -3", {}, True),  # truncates toward zero, like Java
    ("7 / 2.0 = 3.5", {}, True),
    ("i / 2 = 2.5", V, False),
    ("f * 2 = 5", V, True),
    ("i + f = 7.5", V, True),
    ("jb + js = 297", V, True),
    ("jl / 1024 = 1073741824", V, True),
    ("big + 1 = -9223372036854775808", V, True),  # Java long overflow wraps
    ("-9223372036854775808 / -1 = -9223372036854775808", {}, True),
    ("i / 0 = 1", V, UNKNOWN),
    ("i / zero > 0", V, UNKNOWN),
    ("f / 0 > 0", V, UNKNOWN),
    ("f / 0.0 < 0", V, UNKNOWN),
    ("1 / 0 = 1", {}, UNKNOWN),
    ("i + s = 1", V, UNKNOWN),  # string in arithmetic at runtime
    ("i + yes = 1", V, UNKNOWN),
    ("i + 'a' = 1", V, INVALID),
    ("i * TRUE = 1", V, INVALID),
    ("-'a' = 1", {}, INVALID),
    ("+s = 1", V, UNKNOWN),
    ("+i = 5", V, True),
    ("-s = 1", V, UNKNOWN),
    # --- numeric comparisons, int/float mixing
    ("i = 5.0", V, True),
    ("i <> 5.0", V, False),
    ("i > 4", V, True),
    ("i > 5", V, False),
    ("i >= 5", V, True),
    ("i < 5", V, False),
    ("i <= 5", V, True),
    ("i < 5.5", V, True),
    ("4 < i", V, True),
    ("5 >= i", V, True),
    ("f > i", V, False),
    ("f < i", V, True),
    ("ji = 7", V, True),
    ("jb < 0", V, True),
    ("i = i2", V, True),
    ("i <> i2", V, False),
    # --- string/boolean comparison restrictions
    ("'a' < 'b'", {}, INVALID),
    ("s > 'a'", V, INVALID),
    ("'a' >= s", V, INVALID),
    ("yes < TRUE", V, INVALID),
    ("s < s2", V, UNKNOWN),  # both strings, known only at runtime
    ("yes > no", V, UNKNOWN),
    ("1 = '1'", {}, INVALID),
    ("TRUE = 1", {}, INVALID),
    ("'a' <> FALSE", {}, INVALID),
    # --- runtime type mismatch is UNKNOWN
    ("s = 1", V, UNKNOWN),
    ("i = '5'", V, UNKNOWN),
    ("yes = 1", V, UNKNOWN),
    ("i = TRUE", V, UNKNOWN),
    ("s = i", V, UNKNOWN),
    ("s <> i", V, UNKNOWN),
    ("raw = 'abc'", V, UNKNOWN),  # bytes are NULL
    ("obj = 1", V, UNKNOWN),
    ("i", V, UNKNOWN),  # a non-boolean value used as a condition
    ("NOT s", V, UNKNOWN),
    ("s AND TRUE", V, UNKNOWN),
    # --- NULL in every operator
    ("nul = 1", V, UNKNOWN),
    ("nul <> 1", V, UNKNOWN),
    ("missing = 'x'", V, UNKNOWN),
    ("missing <> 'x'", V, UNKNOWN),
    ("missing > 1", V, UNKNOWN),
    ("1 <= missing", V, UNKNOWN),
    ("missing + 1 = 1", V, UNKNOWN),
    ("-missing = 1", V, UNKNOWN),
    ("missing * 0 = 0", V, UNKNOWN),
    ("missing = missing", V, UNKNOWN),
    ("nul", V, UNKNOWN),
    ("NOT nul", V, UNKNOWN),
    ("missing IN ('a', 'b')", V, UNKNOWN),
    ("missing NOT IN ('a', 'b')", V, UNKNOWN),
    ("missing LIKE '%'", V, UNKNOWN),
    ("missing NOT LIKE 'a%'", V, UNKNOWN),
    ("missing BETWEEN 1 AND 2", V, UNKNOWN),
    ("missing NOT BETWEEN 1 AND 2", V, UNKNOWN),
    ("missing IS NULL", V, True),
    ("missing IS NOT NULL", V, False),
    ("nul IS NULL", V, True),
    ("raw IS NULL", V, True),
    ("obj IS NULL", V, True),
    ("i IS NULL", V, False),
    ("i IS NOT NULL", V, True),
    ("no IS NOT NULL", V, True),
    ("empty IS NOT NULL", V, True),
    ("i / 0 IS NULL", V, True),
    ("(missing = 1) IS NULL", V, True),
    # --- AND truth table
    ("yes AND yes", V, True),
    ("yes AND no", V, False),
    ("yes AND nul", V, UNKNOWN),
    ("no AND yes", V, False),
    ("no AND no", V, False),
    ("no AND nul", V, False),
    ("nul AND yes", V, UNKNOWN),
    ("nul AND no", V, False),
    ("nul AND nul", V, UNKNOWN),
    # --- OR truth table
    ("yes OR yes", V, True),
    ("yes OR no", V, True),
    ("yes OR nul", V, True),
    ("no OR yes", V, True),
    ("no OR no", V, False),
    ("no OR nul", V, UNKNOWN),
    ("nul OR yes", V, True),
    ("nul OR no", V, UNKNOWN),
    ("nul OR nul", V, UNKNOWN),
    # --- NOT truth table
    ("NOT yes", V, False),
    ("NOT no", V, True),
    ("NOT nul", V, UNKNOWN),
    ("NOT NOT yes", V, True),
    # --- n-ary chains keep three-valued semantics
    ("yes AND yes AND nul AND yes", V, UNKNOWN),
    ("yes AND nul AND no", V, False),
    ("no OR nul OR no", V, UNKNOWN),
    ("no OR nul OR yes", V, True),
    ("i = 1 OR i = 2 OR i = 5", V, True),
    # --- BETWEEN
    ("i BETWEEN 1 AND 9", V, True),
    ("i BETWEEN 5 AND 5", V, True),
    ("i BETWEEN 6 AND 9", V, False),
    ("i BETWEEN 9 AND 1", V, False),
    ("i NOT BETWEEN 1 AND 9", V, False),
    ("i NOT BETWEEN 6 AND 9", V, True),
    ("f BETWEEN 2 AND 3", V, True),
    ("i BETWEEN 4.5 AND 5.5", V, True),
    ("i BETWEEN -1 AND i2", V, True),
    ("i BETWEEN i2 - 1 AND i2 + 1", V, True),
    ("i * 2 BETWEEN 9 AND 11", V, True),
    ("i BETWEEN missing AND 9", V, UNKNOWN),  # NULL >= ... is UNKNOWN, <= 9 TRUE
    ("i BETWEEN missing AND 1", V, False),  # ... AND FALSE is FALSE
    ("i NOT BETWEEN missing AND 1", V, True),
    ("i NOT BETWEEN 1 AND missing", V, UNKNOWN),
    ("s BETWEEN 1 AND 2", V, UNKNOWN),
    ("s BETWEEN 'a' AND 'b'", V, INVALID),
    ("i BETWEEN 1 AND TRUE", V, INVALID),
    ("i BETWEEN 1 OR 2", V, INVALID),
    ("i BETWEEN 1", V, INVALID),
    ("1 BETWEEN 0 AND 2", {}, True),
    # --- IN
    ("s IN ('abc', 'def')", V, True),
    ("s IN ('def')", V, False),
    ("s NOT IN ('abc', 'def')", V, False),
    ("s NOT IN ('x', 'y', 'z')", V, True),
    ("quote IN ('it''s')", V, True),
    ("ch IN ('y', 'z')", V, True),
    ("JMSType IN ('order', 'invoice')", V, True),
    ("i IN ('5')", V, UNKNOWN),
    ("i NOT IN ('5')", V, UNKNOWN),
    ("s IN ()", V, INVALID),
    ("s IN ('a', 1)", V, INVALID),
    ("s IN ('a',)", V, INVALID),
    ("s IN 'a'", V, INVALID),
    ("s IN ('a'", V, INVALID),
    ("i + 1 IN ('a')", V, INVALID),
    ("s IN (t)", V, INVALID),
    # --- LIKE
    ("s LIKE 'abc'", V, True),
    ("s LIKE 'ab'", V, False),
    ("s LIKE 'a%'", V, True),
    ("s LIKE '%c'", V, True),
    ("s LIKE '%b%'", V, True),
    ("s LIKE '%x%'", V, False),
    ("s LIKE '%'", V, True),
    ("empty LIKE '%'", V, True),
    ("empty LIKE '_'", V, False),
    ("s LIKE 'a_c'", V, True),
    ("s LIKE '_b_'", V, True),
    ("s LIKE '__'", V, False),
    ("s LIKE 'a%%c'", V, True),
    ("s LIKE '%a%b%c%'", V, True),
    ("s LIKE 'A%'", V, False),  # case-sensitive
    ("s NOT LIKE 'a%'", V, False),
    ("s NOT LIKE 'x%'", V, True),
    ("nl LIKE 'line1_line2'", V, True),  # _ and % match line breaks too
    ("nl LIKE 'line1%'", V, True),
    ("dots LIKE 'a.b*c(d)+[x]?$^|'", V, True),  # regex metacharacters are literal
    ("dots LIKE 'a.b*c(d)%'", V, True),
    ("s LIKE 'a.c'", V, False),
    ("s LIKE 'a*'", V, False),
    ("under LIKE 'a\\_b' ESCAPE '\\'", V, True),
    ("s LIKE 'a\\_c' ESCAPE '\\'", V, False),
    ("pct LIKE '50!%' ESCAPE '!'", V, True),
    ("pct LIKE '5!%' ESCAPE '!'", V, False),
    ("pct LIKE '%!%' ESCAPE '!'", V, True),
    ("s LIKE '%!%' ESCAPE '!'", V, False),
    ("quote LIKE 'it''%'", V, True),
    ("quote LIKE 'it''''s' ESCAPE ''''", V, True),  # quote as the escape character
    ("s LIKE 'a!!c' ESCAPE '!'", V, False),
    ("i LIKE '5'", V, UNKNOWN),
    ("s LIKE 'a%' ESCAPE ''", V, INVALID),
    ("s LIKE 'a%' ESCAPE '!!'", V, INVALID),
    ("s LIKE 'a!' ESCAPE '!'", V, INVALID),
    ("s LIKE t", V, INVALID),
    ("s LIKE 5", V, INVALID),
    ("s LIKE 'a' ESCAPE 1", V, INVALID),
    ("i + 1 LIKE 'a'", V, INVALID),
    # --- IS NULL syntax
    ("i IS 5", V, INVALID),
    ("i IS NOT 5", V, INVALID),
    ("i NOT IS NULL", V, INVALID),
    ("IS NULL", V, INVALID),
    # --- header fields
    ("JMSPriority > 4", V, True),
    ("JMSPriority > 4", {"JMSPriority": 4}, False),
    ("JMSPriority BETWEEN 0 AND 9", V, True),
    ("JMSDeliveryMode = 'PERSISTENT'", V, True),
    ("JMSDeliveryMode = 'NON_PERSISTENT'", V, False),
    ("JMSDeliveryMode = 'NON_PERSISTENT'", {"JMSDeliveryMode": "NON_PERSISTENT"}, True),
    ("JMSType = 'order'", V, True),
    ("JMSType = 'x'", {"JMSType": "x"}, True),
    ("JMSType = 'x'", {"JMSType": None}, UNKNOWN),
    ("JMSMessageID LIKE 'ID:%'", V, True),
    ("JMSTimestamp > 1600000000000", V, True),
    ("JMSCorrelationID IS NULL", V, True),
    ("JMSCorrelationID = 'c'", V, UNKNOWN),
    ("JMSXDeliveryCount > 1", V, True),
    ("JMSXGroupID = 'g1'", V, True),
    ("JMS_SUN_COMPRESS", V, True),
    # Header fields JMS does not allow in selectors are NULL, as in OpenMQ.
    ("JMSExpiration = 0", V, UNKNOWN),
    ("JMSExpiration IS NULL", V, True),
    ("JMSRedelivered = FALSE", V, UNKNOWN),
    ("JMSRedelivered IS NOT NULL", V, False),
    ("JMSDeliveryTime > 0", V, UNKNOWN),
    ("JMSDestination = 'q'", V, UNKNOWN),
    ("JMSReplyTo IS NULL", V, True),
    ("jmspriority = 7", {"jmspriority": 7}, True),  # not a header: names are case-sensitive
    ("JMSPriority > 4", {}, UNKNOWN),
    # --- constant expressions
    ("1 = 1", {}, True),
    ("1 = 2", {}, False),
    ("1 < 2 AND 'a' = 'a'", {}, True),
    ("missing = 1 AND 1 = 2", V, False),
    ("missing = 1 OR 1 = 1", V, True),
    # --- syntax errors and other invalid selectors
    ("s = 'abc", V, INVALID),
    ("'", {}, INVALID),
    ("s = 'a''", V, INVALID),
    ("i =", V, INVALID),
    ("= 1", V, INVALID),
    ("i = = 1", V, INVALID),
    ("i == 1", V, INVALID),
    ("i != 1", V, INVALID),
    ("i = 1 = 1", V, INVALID),
    ("(i = 1", V, INVALID),
    ("i = 1)", V, INVALID),
    ("()", V, INVALID),
    ("i = 1 AND", V, INVALID),
    ("AND i = 1", V, INVALID),
    ("i = 1 AND AND i = 2", V, INVALID),
    ("i = 1 OR", V, INVALID),
    ("NOT", V, INVALID),
    ("i 5", V, INVALID),
    ("i = 5 i = 5", V, INVALID),
    ("s = 'a' 'b'", V, INVALID),
    ("i = 1;", V, INVALID),
    ("i = 1 # comment", V, INVALID),
    ("i % 2 = 1", V, INVALID),
    ('i = "5"', V, INVALID),
    ("i, i", V, INVALID),
    # non-boolean top level / operands
    ("5", {}, INVALID),
    ("'abc'", {}, INVALID),
    ("i + 1", V, INVALID),
    ("-i", V, INVALID),
    ("(1)", {}, INVALID),
    ("NOT 5", V, INVALID),
    ("NOT 'a'", V, INVALID),
    ("i = 1 AND 5", V, INVALID),
    ("'a' OR i = 1", V, INVALID),
    ("i = 5 AND s", V, UNKNOWN),  # s could have been a boolean property
]


def _outcome(selector: str, values: dict[str, object]) -> object:
    try:
        sel = compile_selector(selector)
    except SelectorError:
        return INVALID
    result = sel.matches(values)
    if result:
        return True
    negated = compile_selector(f"NOT ({selector})").matches(values)
    return UNKNOWN if not negated else False


@pytest.mark.parametrize(("selector", "values", "expected"), CASES, ids=[c[0] for c in CASES])
def test_selector_table(selector: str, values: dict[str, object], expected: object) -> None:
    if not selector.strip():
        assert compile_selector(selector).matches(values) is True
        return
    assert _outcome(selector, values) == expected


def test_table_is_large() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("text", [None, "", " ", "\t\r\n\f"])
def test_empty_selector_matches_everything(text: str | None) -> None:
    sel = compile_selector(text)
    assert isinstance(sel, Selector)
    assert sel.text == (text or "")
    assert sel.matches({}) is True
    assert sel.matches(V) is True


def test_matches_returns_bool() -> None:
    sel = compile_selector("i = 5")
    assert sel.text == "i = 5"
    assert sel.matches(V) is True
    assert sel.matches({}) is False
    assert compile_selector("i").matches({"i": 5}) is False


def test_error_is_value_error_with_position() -> None:
    with pytest.raises(ValueError) as info:
        compile_selector("color = 'red' AND size >")
    err = info.value
    assert isinstance(err, SelectorError)
    assert err.position == len("color = 'red' AND size >")
    assert "position 24" in str(err)
    assert "end of selector" in str(err)
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.position) == (str(err), err.position)


@pytest.mark.parametrize(
    ("selector", "fragment", "position"),
    [
        ("s = 'abc", "unterminated string", 4),
        ("a LIKE 'x' ESCAPE 'ab'", "single character", 18),
        ("a IN ()", "must not be empty", 6),
        ("and = 1", "reserved word 'and'", 0),
        ("'a' < 'b'", "only = and <>", 4),
        ("a + 1", "boolean expression", 2),
        ("a ! b", "invalid character", 2),
        ("x = NULL", "IS [NOT] NULL", 4),
        ("a == 1", "'=='", 2),
    ],
)
def test_error_messages(selector: str, fragment: str, position: int) -> None:
    with pytest.raises(SelectorError) as info:
        compile_selector(selector)
    assert fragment in str(info.value)
    assert info.value.position == position


def test_java_boxed_types_are_plain_values() -> None:
    values = {"b": JByte(1), "s": JShort(2), "i": JInt(3), "l": JLong(4), "f": JFloat(0.5)}
    assert compile_selector("b + s + i + l = 10 AND f = 0.5").matches(values)
    assert compile_selector("c = 'x' AND c LIKE 'x' AND c IN ('x')").matches({"c": JChar("x")})


def test_long_or_chain_is_flat() -> None:
    text = " OR ".join(f"i = {n}" for n in range(2000))
    assert compile_selector(text).matches({"i": 1999})
    assert not compile_selector(text).matches({"i": 2000})


@pytest.mark.parametrize(
    "text",
    [
        "(" * 500 + "a" + ")" * 500,
        "NOT " * 500 + "a",
        "-" * 500 + "1 = 1",
        " + ".join(["a"] * 500) + " = 1",
        "(" * 100000,
    ],
)
def test_deep_nesting_is_a_selector_error(text: str) -> None:
    with pytest.raises(SelectorError, match="too deeply"):
        compile_selector(text)


def test_compiled_once_and_shared() -> None:
    assert compile_selector("i = 5") is compile_selector("i = 5")


_SELECTORISH = st.lists(
    st.sampled_from(
        [
            "a", "b", "s", "i", "f", "yes", "nul", "JMSPriority", "JMSType", "JMSExpiration",
            "1", "0", "-1", "2.5", "1e3", "0x1F", "'abc'", "'a%'", "'_'", "''", "'",
            "TRUE", "FALSE", "NULL", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS",
            "ESCAPE", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "(", ")", ",",
        ]
    ),
    max_size=14,
).map(" ".join)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60))
def test_random_text_only_raises_selector_error(text: str) -> None:
    try:
        sel = compile_selector(text)
    except SelectorError:
        return
    assert isinstance(sel.matches(V), bool)


@settings(max_examples=1500, deadline=None)
@given(_SELECTORISH)
def test_random_token_soup(text: str) -> None:
    try:
        sel = compile_selector(text)
    except SelectorError:
        return
    if sel.text.strip() == "":
        return  # matches everything; "NOT ()" is not a selector
    for values in (V, {}, {"a": 1, "b": "abc", "i": 2.5, "s": None}):
        result = sel.matches(values)
        assert isinstance(result, bool)
        # A selector and its negation never both match (three-valued logic).
        assert not (result and compile_selector(f"NOT ({text})").matches(values))


_PY_OPS = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(), st.text(max_size=4)),
    st.sampled_from(sorted(_PY_OPS)),
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False, width=32),
    ),
)
def test_numeric_comparison_agrees_with_python(value: object, op: str, literal: float) -> None:
    # repr() of an int or a finite float is also a valid selector literal.
    sel = compile_selector(f"x {op} {literal!r}")
    numeric = type(value) in (int, float)
    assert sel.matches({"x": value}) is (numeric and _PY_OPS[op](value, literal))
