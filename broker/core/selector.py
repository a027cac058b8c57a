"""JMS 2.0 message selectors (JMS 2.0 section 3.8.1), compiled to Python closures.

Why one module (about 1,050 lines): the lexer, parser, static checks, constant folding
and closure compiler are the stages of one small compiler over one set of AST types, and
none of them is used alone.

A selector is parsed once per consumer into a small typed AST, checked for the
errors that can be found statically, constant-folded, and turned into nested
closures, so :meth:`Selector.matches` does no parsing and only one
``values.get`` per identifier occurrence.

Evaluation uses SQL three-valued logic: every closure returns ``True``,
``False`` or ``None`` (UNKNOWN, which is also how NULL is represented), and a
message matches only when the whole expression is ``True``.

Semantic choices (the JMS text leaves room, or OpenMQ differs from it):

* Comparing values of different types (``'1' = 1``, ``flag = 1``) is UNKNOWN,
  not FALSE as the JMS text says: the JMS FALSE would make ``NOT ('1' = 1)``
  match, while OpenMQ raises an error at match time, so neither the expression
  nor its negation ever matches there.  UNKNOWN gives that same observable
  behaviour without an error.  When both sides have a type known at compile
  time (``'1' = 1``, ``'a' < 'b'``, ``x + 'a'``, ``NOT 5``) the selector is
  rejected, as OpenMQ does.
* ``bytes`` and any other unsupported Python type in ``values`` is NULL
  everywhere, including ``IS NULL``.
* Header fields other than the six JMS allows in selectors (JMSDeliveryMode,
  JMSPriority, JMSMessageID, JMSTimestamp, JMSCorrelationID, JMSType) are
  NULL even when the caller puts them in ``values``; ``JMSX*`` and ``JMS_*``
  names are ordinary properties.  This is what OpenMQ does.
* Exact arithmetic is Java ``long`` arithmetic: results wrap to 64 bits and
  ``/`` truncates toward zero.  Division by zero is UNKNOWN for exact and
  approximate operands alike (Java would throw, or give an infinity).
* Mixed exact/approximate arithmetic is done in ``float`` (Java binary numeric
  promotion).  Mixed comparisons use Python's exact int/float comparison,
  which differs from Java's long-to-double conversion only beyond 2**53.
* Literals follow Java syntax as the spec says: decimal, hex (``0x1F``) and
  octal (``017``) integers with an optional ``L``; floats such as ``7E3``,
  ``7.``, ``.5``, ``1.5e-3`` and ``7F`` with an optional ``F``/``D`` suffix.
  ``F`` rounds the value to single precision like a Java ``float`` literal.
  Hex floats, binary literals and underscores in numbers are not accepted.
* ``BETWEEN`` is exactly ``a >= b AND a <= c`` and ``NOT BETWEEN`` its
  negation, with three-valued logic (OpenMQ makes NULL operands FALSE/TRUE).
* ``IN``/``LIKE`` accept any string-typed operand, not only an identifier;
  ``IS [NOT] NULL`` accepts any operand.  In a ``LIKE`` pattern the escape
  character makes the next character literal, whatever it is; a pattern that
  ends with the escape character is an error.
"""

from __future__ import annotations

import enum
import operator
import re
import struct
import unicodedata
from collections.abc import Callable, Mapping
from functools import lru_cache, partial
from typing import Any, NamedTuple, cast

__all__ = ["Selector", "SelectorError", "compile_selector"]

_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_MAX_DEPTH = 200  # AST depth: bounds recursion when compiling and matching
_MAX_NESTING = 64  # parentheses / NOT / unary chains: bounds parser recursion

_KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE", "NULL", "TRUE", "FALSE"}
)
# The only header fields JMS allows in a selector; other JMS* names are NULL.
_SELECTABLE_HEADERS = frozenset(
    {
        "JMSDeliveryMode",
        "JMSPriority",
        "JMSMessageID",
        "JMSTimestamp",
        "JMSCorrelationID",
        "JMSType",
    }
)


class SelectorError(ValueError):
    """An invalid selector; ``str(err)`` names the problem and its position."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message, position)  # both in args, so it pickles
        self.message = message
        self.position = position  # 0-based character offset in the selector

    def __str__(self) -> str:
        return f"{self.message} at position {self.position}"


Values = Mapping[str, object]
Eval = Callable[[Values], object]


class Selector:
    """A compiled selector; :meth:`matches` is safe to call from any thread."""

    __slots__ = ("text", "_eval")

    def __init__(self, text: str, evaluate: Eval) -> None:
        self.text = text
        self._eval = evaluate

    def matches(self, values: Values) -> bool:
        """True only when the selector evaluates to TRUE (not FALSE or UNKNOWN)."""
        return self._eval(values) is True

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def compile_selector(text: str | None) -> Selector:
    """Compile ``text``; None, empty or blank selects every message."""
    return _compile_cached("" if text is None else text)


@lru_cache(maxsize=512)
def _compile_cached(text: str) -> Selector:
    # Consumers often share a selector string; a Selector is immutable.
    try:
        tree = _Parser(text).parse()
        if tree is None:
            return Selector(text, _always(True))
        return Selector(text, _as_fn(tree.compile()))
    except RecursionError:
        # Backstop only: the nesting and depth limits should prevent this.
        raise SelectorError("selector is nested too deeply", 0) from None


# --------------------------------------------------------------------------
# Runtime values
# --------------------------------------------------------------------------


class _Kind(enum.Enum):
    """Static type of an expression; ANY is an identifier (type known at match time)."""

    BOOL = "boolean"
    NUM = "numeric"
    STR = "string"
    ANY = "untyped"


# Exact Python types that need no normalisation (NoneType included).
_PLAIN = frozenset({int, float, str, bool, type(None)})
_NUM_TYPES = frozenset({int, float})
_KIND_OF = {int: _Kind.NUM, float: _Kind.NUM, str: _Kind.STR, bool: _Kind.BOOL}
_ACCEPT = {
    _Kind.NUM: _NUM_TYPES,
    _Kind.STR: frozenset({str}),
    _Kind.BOOL: frozenset({bool}),
}


def _norm(value: object) -> object:
    """Map a property value to a plain bool/int/float/str, or None (NULL).

    JByte/JInt/JLong, JFloat and JChar become plain int/float/str so the
    evaluators can dispatch on ``type(v) is ...``; bytes and unknown types are NULL.
    """
    if type(value) in _PLAIN:
        return value
    if isinstance(value, int):  # bool cannot be subclassed, so this is numeric
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return None


def _wrap(n: int) -> int:
    """Wrap an exact result to a Java long, as Java arithmetic overflows."""
    if _LONG_MIN <= n <= _LONG_MAX:
        return n
    return ((n - _LONG_MIN) & 0xFFFFFFFFFFFFFFFF) + _LONG_MIN


def _long_div(a: int, b: int) -> int | None:
    """Java long division: truncates toward zero; x / 0 is UNKNOWN here."""
    if b == 0:
        return None
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return _wrap(q)


def _float_div(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


_INT_OPS: dict[str, Callable[[int, int], int | None]] = {
    "+": lambda a, b: _wrap(a + b),
    "-": lambda a, b: _wrap(a - b),
    "*": lambda a, b: _wrap(a * b),
    "/": _long_div,
}
_FLOAT_OPS: dict[str, Callable[[float, float], float | None]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _float_div,
}
_CMP_OPS = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# a OP b  ==  b SWAPPED[OP] a
_SWAPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class _Const:
    """A compile-time constant result (constant folding)."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value


_Part = _Const | Eval
_EMPTY: Values = {}


def _always(value: object) -> Eval:
    return lambda values: value


def _as_fn(part: _Part) -> Eval:
    return _always(part.value) if isinstance(part, _Const) else part


def _fetcher(name: str) -> Eval:
    def fetch(values: Values) -> object:
        v = values.get(name)
        return v if type(v) in _PLAIN else _norm(v)

    return fetch


# --------------------------------------------------------------------------
# AST; compile() returns a _Const or a closure over the compiled children
# --------------------------------------------------------------------------


class _Node:
    kind: _Kind
    children: tuple[_Node, ...] = ()
    depth: int

    def __init__(self, pos: int, *children: _Node) -> None:
        self.pos = pos
        self.children = children
        self.depth = 1 + max((c.depth for c in children), default=0)
        if self.depth > _MAX_DEPTH:
            raise SelectorError("expression is nested too deeply", pos)

    def compile(self) -> _Part:
        parts = [c.compile() for c in self.children]
        result = self.build(parts)
        if isinstance(result, _Const):
            return result
        if all(isinstance(p, _Const) for p in parts):
            return _Const(result(_EMPTY))
        return result

    def build(self, parts: list[_Part]) -> _Part:
        raise NotImplementedError


class _Lit(_Node):
    def __init__(self, pos: int, value: object, kind: _Kind) -> None:
        super().__init__(pos)
        self.value = value
        self.kind = kind

    def compile(self) -> _Part:
        return _Const(self.value)


class _Ident(_Node):
    kind = _Kind.ANY

    def __init__(self, pos: int, name: str) -> None:
        super().__init__(pos)
        self.name = name

    def compile(self) -> _Part:
        return _fetcher(self.name)


def _typed_test(
    operand: _Node,
    part: _Part,
    accept: frozenset[type],
    test: Callable[[Any], bool],
    negated: bool = False,
) -> Eval:
    """Apply ``test`` to the operand when its runtime type is in ``accept``, else UNKNOWN.

    This is the hot path (``prop = 'x'``, ``JMSPriority > 4``, IN, LIKE,
    BETWEEN): for an identifier operand the lookup is inlined.
    """
    if isinstance(operand, _Ident):
        name = operand.name

        def test_ident(values: Values) -> object:
            v = values.get(name)
            if type(v) not in accept:
                v = _norm(v)
                if type(v) not in accept:
                    return None
            return test(v) is not negated

        return test_ident

    fn = _as_fn(part)

    def test_expr(values: Values) -> object:
        v = fn(values)
        if type(v) not in accept:
            return None
        return test(v) is not negated

    return test_expr


class _Neg(_Node):
    kind = _Kind.NUM

    def build(self, parts: list[_Part]) -> _Part:
        (fn,) = map(_as_fn, parts)

        def neg(values: Values) -> object:
            # Any: the exact type() tests below (bools are not numbers) stand for narrowing.
            v: Any = fn(values)
            t = type(v)
            if t is int:
                return _wrap(-v)
            return -v if t is float else None

        return neg


class _Pos(_Node):
    """Unary plus on an untyped operand: a no-op that still requires a number."""

    kind = _Kind.NUM

    def build(self, parts: list[_Part]) -> _Part:
        (fn,) = map(_as_fn, parts)

        def pos(values: Values) -> object:
            v = fn(values)
            return v if type(v) in _NUM_TYPES else None

        return pos


class _Not(_Node):
    kind = _Kind.BOOL

    def build(self, parts: list[_Part]) -> _Part:
        (fn,) = map(_as_fn, parts)

        def not_(values: Values) -> object:
            v = fn(values)
            if v is True:
                return False
            return True if v is False else None

        return not_


class _Arith(_Node):
    kind = _Kind.NUM

    def __init__(self, pos: int, op: str, left: _Node, right: _Node) -> None:
        super().__init__(pos, left, right)
        self.op = op

    def build(self, parts: list[_Part]) -> _Part:
        if any(isinstance(p, _Const) and p.value is None for p in parts):
            return _Const(None)
        lf, rf = map(_as_fn, parts)
        int_op, float_op = _INT_OPS[self.op], _FLOAT_OPS[self.op]

        def arith(values: Values) -> object:
            # Any: the exact type() tests below (bools are not numbers) stand for narrowing.
            a: Any = lf(values)
            b: Any = rf(values)
            ta = type(a)
            tb = type(b)
            if ta is int and tb is int:
                return int_op(a, b)
            if ta in _NUM_TYPES and tb in _NUM_TYPES:
                try:
                    return float_op(float(a), float(b))
                except OverflowError:  # only for ints beyond any Java long
                    return None
            return None

        return arith


class _Cmp(_Node):
    kind = _Kind.BOOL

    def __init__(self, pos: int, op: str, left: _Node, right: _Node) -> None:
        super().__init__(pos, left, right)
        self.op = op

    def build(self, parts: list[_Part]) -> _Part:
        lp, rp = parts
        left, right = self.children
        op = self.op
        if any(isinstance(p, _Const) and p.value is None for p in parts):
            return _Const(None)
        if isinstance(lp, _Const) and not isinstance(rp, _Const):
            # Normalise "const OP expr" to "expr OP' const" for the fast path.
            lp, rp, left, op = rp, lp, right, _SWAPPED[op]
        if isinstance(rp, _Const):
            c: Any = rp.value
            kind = _KIND_OF[type(c)]
            # v OP c is c SWAPPED(OP) v: a C-level partial, no Python frame.
            test = partial(_CMP_OPS[_SWAPPED[op]], c)
            return _typed_test(left, lp, _ACCEPT[kind], test)

        lf, rf = _as_fn(lp), _as_fn(rp)
        cmp = _CMP_OPS[op]
        if op in ("=", "<>"):

            def equality(values: Values) -> object:
                a: Any = lf(values)
                b: Any = rf(values)
                ka = _KIND_OF.get(type(a))
                if ka is None or ka is not _KIND_OF.get(type(b)):
                    return None
                return cmp(a, b)

            return equality

        def ordering(values: Values) -> object:
            a: Any = lf(values)
            b: Any = rf(values)
            if type(a) in _NUM_TYPES and type(b) in _NUM_TYPES:
                return cmp(a, b)
            return None

        return ordering


class _Logic(_Node):
    """n-ary AND / OR; chains are flattened so long ones stay shallow."""

    kind = _Kind.BOOL

    def __init__(self, pos: int, is_and: bool, items: list[_Node]) -> None:
        super().__init__(pos, *items)
        self.is_and = is_and

    def build(self, parts: list[_Part]) -> _Part:
        # AND: FALSE dominates, TRUE is neutral; OR: the reverse.
        dominant = not self.is_and
        neutral = self.is_and
        fns = []
        for p in parts:
            if isinstance(p, _Const):
                if p.value is dominant:
                    return _Const(dominant)
                if p.value is neutral:
                    continue
            fns.append(_as_fn(p))
        if not fns:
            return _Const(neutral)
        if len(fns) == 2:
            f1, f2 = fns

            def logic2(values: Values) -> object:
                a = f1(values)
                if a is dominant:
                    return dominant
                b = f2(values)
                if b is dominant:
                    return dominant
                return neutral if a is neutral and b is neutral else None

            return logic2

        def logic(values: Values) -> object:
            result: object = neutral
            for fn in fns:
                v = fn(values)
                if v is dominant:
                    return dominant
                if v is not neutral:
                    result = None  # UNKNOWN, unless a later operand dominates
            return result

        return logic


class _Between(_Node):
    kind = _Kind.BOOL

    def __init__(self, pos: int, negated: bool, operand: _Node, low: _Node, high: _Node) -> None:
        super().__init__(pos, operand, low, high)
        self.negated = negated

    def build(self, parts: list[_Part]) -> _Part:
        op, lo, hi = parts
        negated = self.negated
        if isinstance(lo, _Const) and isinstance(hi, _Const):
            low, high = lo.value, hi.value
            if low is not None and high is not None:
                return _typed_test(
                    self.children[0], op, _NUM_TYPES, lambda v: low <= v <= high, negated
                )
        of, lf, hf = map(_as_fn, parts)

        def between(values: Values) -> object:
            # Three-valued "v >= low AND v <= high", then NOT if negated.
            v: Any = of(values)
            if type(v) not in _NUM_TYPES:
                return None
            a = lf(values)
            b = hf(values)
            ge = v >= a if type(a) in _NUM_TYPES else None
            le = v <= b if type(b) in _NUM_TYPES else None
            if ge is False or le is False:
                return negated
            if ge is None or le is None:
                return None
            return not negated

        return between


class _In(_Node):
    kind = _Kind.BOOL

    def __init__(self, pos: int, negated: bool, operand: _Node, items: frozenset[str]) -> None:
        super().__init__(pos, operand)
        self.negated = negated
        self.items = items

    def build(self, parts: list[_Part]) -> _Part:
        return _typed_test(
            self.children[0], parts[0], _ACCEPT[_Kind.STR], self.items.__contains__, self.negated
        )


class _Like(_Node):
    kind = _Kind.BOOL

    def __init__(
        self, pos: int, negated: bool, operand: _Node, matcher: Callable[[str], bool]
    ) -> None:
        super().__init__(pos, operand)
        self.negated = negated
        self.matcher = matcher

    def build(self, parts: list[_Part]) -> _Part:
        return _typed_test(
            self.children[0], parts[0], _ACCEPT[_Kind.STR], self.matcher, self.negated
        )


class _IsNull(_Node):
    kind = _Kind.BOOL

    def __init__(self, pos: int, negated: bool, operand: _Node) -> None:
        super().__init__(pos, operand)
        self.negated = negated

    def build(self, parts: list[_Part]) -> _Part:
        fn = _as_fn(parts[0])
        negated = self.negated
        return lambda values: (fn(values) is None) is not negated


_ANY_RUN = object()  # LIKE '%'
_ONE_CHAR = object()  # LIKE '_'


def _like_matcher(pattern: str, escape: str | None, pos: int) -> Callable[[str], bool]:
    """Compile a LIKE pattern once: str methods for simple shapes, else an anchored regex."""
    pieces: list[object] = []  # literal str chunks, "%" -> _ANY_RUN, "_" -> _ONE_CHAR
    chunk: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 == len(pattern):
                raise SelectorError("LIKE pattern ends with its escape character", pos)
            chunk.append(pattern[i + 1])
            i += 2
            continue
        if c in "%_":
            if chunk:
                pieces.append("".join(chunk))
                chunk = []
            marker = _ANY_RUN if c == "%" else _ONE_CHAR
            if not (marker is _ANY_RUN and pieces and pieces[-1] is _ANY_RUN):
                pieces.append(marker)
        else:
            chunk.append(c)
        i += 1
    if chunk:
        pieces.append("".join(chunk))

    if _ONE_CHAR not in pieces:
        literals = [p for p in pieces if isinstance(p, str)]
        shape = tuple(p is _ANY_RUN for p in pieces)
        if shape == ():
            return "".__eq__
        if shape == (False,):
            return literals[0].__eq__
        if shape == (True,):
            return lambda _text: True
        if shape == (False, True):
            return partial(_startswith, literals[0])
        if shape == (True, False):
            return partial(_endswith, literals[0])
        if shape == (True, False, True):
            return partial(_contains, literals[0])
    regex = "".join(
        ".*" if p is _ANY_RUN else "." if p is _ONE_CHAR else re.escape(str(p)) for p in pieces
    )
    fullmatch = re.compile(regex, re.DOTALL).fullmatch
    return lambda s: fullmatch(s) is not None


def _startswith(prefix: str, s: str) -> bool:
    return s.startswith(prefix)


def _endswith(suffix: str, s: str) -> bool:
    return s.endswith(suffix)


def _contains(part: str, s: str) -> bool:
    return part in s


# --------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------


class _Tok(NamedTuple):
    type: str  # "int" | "float" | "str" | "id" | "kw" | "op" | "eof"
    value: object  # int: (magnitude, is_decimal); kw: upper-case word
    pos: int
    text: str


# Java literal syntax.  Floats are tried before integers so "1.5" and "7e3" are
# not split; "[0-9]+(?=[fFdD])" is Java's "7F" (a float with no point or exponent).
_NUMBER = re.compile(
    r"0[xX](?P<hex>[0-9a-fA-F]+)[lL]?"
    r"|(?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+|[0-9]+(?=[fFdD]))(?P<suffix>[fFdD])?"
    r"|(?P<int>[0-9]+)[lL]?"
)
_OPERATORS = ("<=", ">=", "<>", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")
_ID_START_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"})
_ID_PART_CATEGORIES = _ID_START_CATEGORIES | {"Nd", "Mn", "Mc", "Cf"}
_ASCII_SPACE = frozenset(" \t\n\r\f\x0b\x1c\x1d\x1e\x1f")


def _is_id_start(c: str) -> bool:
    """Character.isJavaIdentifierStart, from Unicode categories."""
    if c.isascii():
        return c.isalpha() or c in "_$"
    return unicodedata.category(c) in _ID_START_CATEGORIES


def _is_id_part(c: str) -> bool:
    """Character.isJavaIdentifierPart, minus the "ignorable" control characters."""
    if c.isascii():
        return c.isalnum() or c in "_$"
    return unicodedata.category(c) in _ID_PART_CATEGORIES


def _is_space(c: str) -> bool:
    """Character.isWhitespace: the JMS set (space, tab, FF, line ends) and a few more."""
    if c.isascii():
        return c in _ASCII_SPACE
    return unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in "\xa0\u2007\u202f"


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if _is_space(c):
            i += 1
            continue
        start = i
        if c == "'":
            chunks = []
            j = i + 1
            while True:
                k = text.find("'", j)
                if k < 0:
                    raise SelectorError("unterminated string literal", start)
                chunks.append(text[j:k])
                if text.startswith("''", k):  # '' is an escaped quote
                    chunks.append("'")
                    j = k + 2
                    continue
                break
            i = k + 1
            toks.append(_Tok("str", "".join(chunks), start, text[start:i]))
            continue
        if c.isascii() and (
            c.isdigit() or (c == "." and i + 1 < n and text[i + 1] in "0123456789")
        ):
            toks.append(_number(text, i))
            i += len(toks[-1].text)
            continue
        if _is_id_start(c):
            i += 1
            while i < n and _is_id_part(text[i]):
                i += 1
            word = text[start:i]
            # isascii(): "ın".upper() == "IN" must not make a keyword.
            if word.isascii() and word.upper() in _KEYWORDS:
                toks.append(_Tok("kw", word.upper(), start, word))
            else:
                toks.append(_Tok("id", word, start, word))
            continue
        if text.startswith("==", i):
            raise SelectorError("invalid operator '==', use '='", start)
        if text.startswith("!=", i):
            raise SelectorError("invalid operator '!=', use '<>'", start)
        for op in _OPERATORS:
            if text.startswith(op, i):
                toks.append(_Tok("op", op, start, op))
                i += len(op)
                break
        else:
            raise SelectorError(f"invalid character {c!r}", start)
    toks.append(_Tok("eof", None, n, ""))
    return toks


def _number(text: str, i: int) -> _Tok:
    m = _NUMBER.match(text, i)
    end = m.end() if m else i
    if m is None or (end < len(text) and (text[end] == "." or _is_id_part(text[end]))):
        j = end
        while j < len(text) and (text[j] == "." or _is_id_part(text[j])):
            j += 1
        raise SelectorError(f"invalid numeric literal {text[i:j]!r}", i)
    lexeme = m.group()
    if m.group("hex") is not None:
        return _Tok("int", (int(m.group("hex"), 16), False), i, lexeme)
    digits = m.group("int")
    if digits is not None:
        if len(digits) > 1 and digits[0] == "0":  # Java octal
            if not set(digits) <= set("01234567"):
                raise SelectorError(f"invalid octal literal {lexeme!r}", i)
            return _Tok("int", (int(digits, 8), False), i, lexeme)
        return _Tok("int", (int(digits), True), i, lexeme)
    body = m.group("float")
    value = float(body)
    try:
        if m.group("suffix") in ("f", "F"):
            value = struct.unpack(">f", struct.pack(">f", value))[0]
    except OverflowError:
        value = float("inf")
    if value == float("inf"):
        raise SelectorError(f"floating-point literal {lexeme!r} is too large", i)
    mantissa = re.split("[eE]", body)[0]
    if value == 0.0 and any(d in mantissa for d in "123456789"):
        raise SelectorError(f"floating-point literal {lexeme!r} is too small", i)
    return _Tok("float", value, i, lexeme)


# --------------------------------------------------------------------------
# Parser (recursive descent, one method per precedence level)
# --------------------------------------------------------------------------


def _describe(tok: _Tok) -> str:
    if tok.type == "eof":
        return "end of selector"
    if tok.type == "kw":
        return f"reserved word {tok.text!r}"
    if tok.type == "str":
        return "string literal"
    if tok.type in ("int", "float"):
        return f"number {tok.text}"
    if tok.type == "id":
        return f"identifier {tok.text!r}"
    return repr(tok.text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.nesting = 0

    # -- helpers --

    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def advance(self) -> _Tok:
        tok = self.toks[self.i]
        if tok.type != "eof":
            self.i += 1
        return tok

    def at(self, type_: str, *values: object) -> bool:
        tok = self.toks[self.i]
        return tok.type == type_ and (not values or tok.value in values)

    def expect(self, what: str, type_: str, *values: object) -> _Tok:
        """Consume a token of ``type_`` (and one of ``values``, if given) or fail."""
        if not self.at(type_, *values):
            tok = self.peek()
            raise SelectorError(f"expected {what} but found {_describe(tok)}", tok.pos)
        return self.advance()

    def enter(self, pos: int) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise SelectorError("expression is nested too deeply", pos)

    @staticmethod
    def require(node: _Node, kind: _Kind, what: str, pos: int) -> None:
        """Reject operands whose static type is known and wrong (``NOT 5``, ``x + 'a'``)."""
        if node.kind is not kind and node.kind is not _Kind.ANY:
            raise SelectorError(
                f"{what} needs a {kind.value} operand, not a {node.kind.value} expression", pos
            )

    # -- grammar --

    def parse(self) -> _Node | None:
        if self.at("eof"):
            return None
        node = self.parse_or()
        if not self.at("eof"):
            tok = self.peek()
            raise SelectorError(f"unexpected {_describe(tok)}", tok.pos)
        if node.kind not in (_Kind.BOOL, _Kind.ANY):
            raise SelectorError(
                f"selector must be a boolean expression, not a {node.kind.value} one", node.pos
            )
        return node

    def parse_logic(self, word: str, operand: Callable[[], _Node]) -> _Node:
        first = operand()
        if not self.at("kw", word):
            return first
        items = [first]
        self.require(first, _Kind.BOOL, word, self.peek().pos)
        while self.at("kw", word):
            pos = self.advance().pos
            item = operand()
            self.require(item, _Kind.BOOL, word, pos)
            items.append(item)
        return _Logic(first.pos, word == "AND", items)

    def parse_or(self) -> _Node:
        return self.parse_logic("OR", self.parse_and)

    def parse_and(self) -> _Node:
        return self.parse_logic("AND", self.parse_not)

    def parse_not(self) -> _Node:
        if not self.at("kw", "NOT"):
            return self.parse_comparison()
        pos = self.advance().pos
        self.enter(pos)
        operand = self.parse_not()
        self.nesting -= 1
        self.require(operand, _Kind.BOOL, "NOT", pos)
        return _Not(pos, operand)

    def parse_comparison(self) -> _Node:
        left = self.parse_additive()
        tok = self.peek()
        if tok.type == "op" and tok.value in _CMP_OPS:
            self.advance()
            right = self.parse_additive()
            return self.comparison(tok, left, right)
        negated = False
        if self.at("kw", "NOT") and self.peek(1).type == "kw":
            if self.peek(1).value in ("BETWEEN", "LIKE", "IN"):
                self.advance()
                negated = True
                tok = self.peek()
        if self.at("kw", "BETWEEN"):
            self.advance()
            low = self.parse_additive()
            self.expect("AND in BETWEEN", "kw", "AND")
            high = self.parse_additive()
            for node in (left, low, high):
                self.require(node, _Kind.NUM, "BETWEEN", tok.pos)
            return _Between(tok.pos, negated, left, low, high)
        if self.at("kw", "IN"):
            self.advance()
            self.require(left, _Kind.STR, "IN", tok.pos)
            return _In(tok.pos, negated, left, self.in_list())
        if self.at("kw", "LIKE"):
            self.advance()
            self.require(left, _Kind.STR, "LIKE", tok.pos)
            pattern = self.expect("a string literal pattern after LIKE", "str")
            escape = None
            if self.at("kw", "ESCAPE"):
                self.advance()
                esc = self.expect("a string literal after ESCAPE", "str")
                escape = str(esc.value)
                if len(escape) != 1:
                    raise SelectorError("ESCAPE must be a single character", esc.pos)
            matcher = _like_matcher(str(pattern.value), escape, pattern.pos)
            return _Like(tok.pos, negated, left, matcher)
        if self.at("kw", "IS"):
            self.advance()
            is_not = self.at("kw", "NOT")
            if is_not:
                self.advance()
            self.expect("NULL after IS" + (" NOT" if is_not else ""), "kw", "NULL")
            return _IsNull(tok.pos, is_not, left)
        return left

    def comparison(self, tok: _Tok, left: _Node, right: _Node) -> _Node:
        op = str(tok.value)
        lk, rk = left.kind, right.kind
        if op in ("=", "<>"):
            if _Kind.ANY not in (lk, rk) and lk is not rk:
                raise SelectorError(
                    f"cannot compare a {lk.value} value with a {rk.value} value using {op!r}",
                    tok.pos,
                )
        else:
            for k in (lk, rk):
                if k in (_Kind.STR, _Kind.BOOL):
                    raise SelectorError(
                        f"{op!r} cannot compare {k.value} values (only = and <> can)", tok.pos
                    )
        return _Cmp(tok.pos, op, left, right)

    def in_list(self) -> frozenset[str]:
        self.expect("'(' after IN", "op", "(")
        if self.at("op", ")"):
            raise SelectorError("IN list must not be empty", self.peek().pos)
        items = []
        while True:
            tok = self.peek()
            if tok.type != "str":
                raise SelectorError(
                    f"IN list may only contain string literals, found {_describe(tok)}", tok.pos
                )
            items.append(str(self.advance().value))
            if not self.at("op", ","):
                break
            self.advance()
        self.expect("',' or ')' in IN list", "op", ")")
        return frozenset(items)

    def parse_additive(self) -> _Node:
        left = self.parse_multiplicative()
        while self.at("op", "+", "-"):
            tok = self.advance()
            right = self.parse_multiplicative()
            left = self.arithmetic(tok, left, right)
        return left

    def parse_multiplicative(self) -> _Node:
        left = self.parse_unary()
        while self.at("op", "*", "/"):
            tok = self.advance()
            right = self.parse_unary()
            left = self.arithmetic(tok, left, right)
        return left

    def arithmetic(self, tok: _Tok, left: _Node, right: _Node) -> _Node:
        for node in (left, right):
            self.require(node, _Kind.NUM, repr(tok.value), tok.pos)
        return _Arith(tok.pos, str(tok.value), left, right)

    def parse_unary(self) -> _Node:
        if not self.at("op", "+", "-"):
            return self.parse_primary()
        tok = self.advance()
        nxt = self.peek()
        if tok.value == "-" and nxt.type == "int" and nxt.value == (2**63, True):
            # Like Java, 9223372036854775808 is only valid right after a minus.
            self.advance()
            return _Lit(tok.pos, _LONG_MIN, _Kind.NUM)
        self.enter(tok.pos)
        operand = self.parse_unary()
        self.nesting -= 1
        self.require(operand, _Kind.NUM, f"unary {tok.value!r}", tok.pos)
        if tok.value == "-":
            return _Neg(tok.pos, operand)
        return operand if operand.kind is _Kind.NUM else _Pos(tok.pos, operand)

    def parse_primary(self) -> _Node:
        tok = self.advance()
        if tok.type == "int":
            n, decimal = cast("tuple[int, bool]", tok.value)
            if n > (_LONG_MAX if decimal else 2**64 - 1):
                raise SelectorError(
                    f"integer literal {tok.text} is out of range for a long", tok.pos
                )
            return _Lit(tok.pos, _wrap(n), _Kind.NUM)  # hex/octal are two's complement
        if tok.type == "float":
            return _Lit(tok.pos, tok.value, _Kind.NUM)
        if tok.type == "str":
            return _Lit(tok.pos, tok.value, _Kind.STR)
        if tok.type == "id":
            name = tok.text
            if (
                name.startswith("JMS")
                and name not in _SELECTABLE_HEADERS
                and not name.startswith(("JMSX", "JMS_"))
            ):
                return _Lit(tok.pos, None, _Kind.ANY)  # header not selectable: NULL
            return _Ident(tok.pos, name)
        if tok.type == "kw":
            if tok.value in ("TRUE", "FALSE"):
                return _Lit(tok.pos, tok.value == "TRUE", _Kind.BOOL)
            if tok.value == "NULL":
                raise SelectorError("NULL may only be used in IS [NOT] NULL", tok.pos)
            raise SelectorError(
                f"expected an operand but found reserved word {tok.text!r}"
                " (reserved words cannot be identifiers)",
                tok.pos,
            )
        if tok.type == "op" and tok.value == "(":
            self.enter(tok.pos)
            node = self.parse_or()
            self.nesting -= 1
            self.expect("')'", "op", ")")
            return node
        raise SelectorError(f"expected an operand but found {_describe(tok)}", tok.pos)
