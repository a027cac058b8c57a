"""Which destination names the broker takes: the one rule, for every way in.

OpenMQ has two rules.  The client's (``com.sun.messaging.jmq.DestinationName.isSyntaxValid``,
what ``new com.sun.messaging.Queue(name)`` checks, ``[C4050] Invalid destination name``):
a Java identifier start, ``*`` or ``>`` first, then Java identifier parts, ``.``, ``*``
and ``>``; names starting ``mq.`` pass as they are, and temporary destinations are not
checked.  The administrator's (imqcmd create dst, ``B4091 ... contains invalid
characters``): a Java identifier start, then identifier parts and ``.``.

Java counts "identifier-ignorable" characters (NUL, the other C0 and C1 controls but TAB,
LF, VT, FF, CR and the separators, and Unicode format characters) as identifier parts,
so the stock client sends ``a\\0b`` and the stock broker creates it (and shuts down when a
message for it cannot be stored, the file store's directory name having a NUL in it).
Here no name may hold a control or format character, whichever way it comes (JMS
packets, the admin service, the UMS gateway, the REST API, the portal): such a name
cannot be shown, logged, put in an HTTP header or an XML document as it is
(:func:`name_problem`, the broker's rule).  On top of it the UMS gateway applies the
client's rule (:func:`client_name_problem`), the portal, the REST API and administered
objects the administrator's (:func:`admin_name_problem`, :func:`valid_admin_name`).
A queue may not be named like a topic pattern, ``*`` or ``>`` in it
(:func:`queue_name_problem`): 415 at every JMS way in, as on the stock broker; a topic
pattern must be well formed (:func:`topic_pattern_problem`): 406 NOT_ACCEPTABLE.
"""

from __future__ import annotations

import unicodedata

# Java's Character.isJavaIdentifierStart: letters, letter numbers, currency symbols and
# connector punctuation.
_START = frozenset(("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Sc", "Pc"))
# ...isJavaIdentifierPart adds digits and combining marks (and the ignorable characters,
# refused here).
_PART = _START | {"Nd", "Mn", "Mc"}
# Control, format, surrogate, private use and unassigned code points.
_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Co", "Cn"))

INTERNAL_PREFIX = "mq."
WILDCARDS = "*>"


def _category(ch: str) -> str:
    return unicodedata.category(ch)


def bad_character(name: str) -> str | None:
    """The first control or format character of ``name`` (None: it has none)."""
    for ch in name:
        if ch < " " or "\x7f" <= ch <= "\x9f" or (ch > "~" and _category(ch) in _INVISIBLE):
            return ch
    return None


def _shown(name: str) -> str:
    # repr() shows CR, LF and NUL as escapes, so the reason is one printable line.
    return repr(name)


def _identifier(name: str, extra: str) -> bool:
    first = name[0]
    if not (first in extra or first == "$" or first == "_" or _category(first) in _START):
        return False
    return all(ch in extra or ch == "." or _category(ch) in _PART for ch in name[1:])


def name_problem(name: object) -> str | None:
    """Why the broker refuses ``name`` for a destination any client creates or uses (None:
    it takes it): the broker's rule, for every way in.

    Only what no way out can carry: an empty name, control and format characters.
    Names the Java client refuses for their syntax (``a-b``, ``1abc``) stay usable, as
    on the stock broker: the C client does not check names, and its applications may
    use them.
    """
    if not isinstance(name, str) or not name:
        return "a destination name is required"
    ch = bad_character(name)
    if ch is not None:
        return (
            f"invalid destination name {_shown(name)}: it holds the control or format "
            f"character U+{ord(ch):04X}"
        )
    return None


def is_wildcard(name: str) -> bool:
    """Whether OpenMQ's broker takes ``name`` for a topic pattern: a ``*`` or ``>``
    anywhere, well formed or not (``DestinationUID.isWildcard``)."""
    return "*" in name or ">" in name


def queue_name_problem(name: str) -> str | None:
    """Why no queue may have this name on top of :func:`name_problem` (None: one may).

    Only topics can be patterns.  OpenMQ's broker refuses every JMS way to such a queue
    (create, verify, producer, consumer, send) with 415 UNSUPPORTED_TYPE, so a mistyped
    queue name fails at once instead of filling a queue no stock client can reach.
    """
    if is_wildcard(name):
        return f"{_shown(name)}: wildcards (* and >) are not supported for queues"
    return None


def topic_pattern_problem(name: str) -> str | None:
    """Why OpenMQ's broker refuses ``name`` as a topic pattern, in its words (406 at every
    JMS way in), None when it takes it (or it has no wildcard).

    Its rule (``DestinationUID.createRegExString``), odd corners included: a ``*`` (or
    ``**``) stands alone between dots; ``>`` may not follow a dot (``a.>`` is refused,
    ``a>`` and ``>.a`` pass); a pattern may not start or end with a dot nor hold ``..``.
    """
    if not is_wildcard(name):
        return None
    last = len(name) - 1
    after_dot = False
    i = 0
    while i <= last:
        ch = name[i]
        if ch == "*":
            if i and not after_dot:
                return f"{name}-Wildcard should be surrounded by ."
            if i != last and name[i + 1] == "*":
                i += 1
            if i != last and name[i + 1] not in ".>":
                return f"{name}-Wildcard should be surrounded by ."
            after_dot = False
        elif ch == ">":
            if after_dot:
                return f"{name}-Wildcard should never be preceded by ."
        elif ch == ".":
            if i == 0:
                return f"{name}-Bad wildcard, name starts with ."
            if i == last:
                return f"{name}-Bad wildcard, name ends with ."
            if after_dot:
                return f"{name}-Bad wildcard, name was .."
            after_dot = True
        elif ch != "$":
            after_dot = False
        i += 1
    return None


def client_name_problem(name: object) -> str | None:
    """Why the stock Java client would refuse ``name`` (``[C4050] Invalid destination
    name``), Java's ignorable characters refused too (None: it takes it).

    The UMS gateway's rule: OpenMQ's UMS makes its destinations with that client.
    """
    problem = name_problem(name)
    if problem is not None or str(name).startswith(INTERNAL_PREFIX):
        return problem
    if not _identifier(str(name), WILDCARDS):
        return (
            f"invalid destination name {_shown(str(name))}: a letter, _ or $ first, then "
            "letters, digits, _, $ and . (topics may use the wildcards * and >)"
        )
    return None


def valid_admin_name(name: str) -> bool:
    """The administrator's rule (imqcmd create dst, the portal, administered objects):
    a Java identifier start, then identifier parts and dots; no wildcards."""
    return bool(name) and bad_character(name) is None and _identifier(name, "")


def admin_name_problem(name: str) -> str | None:
    """Why an administrator may not create a destination of this name (None: they may),
    in the words of OpenMQ's admin service (B4175, B4091), so the stock imqcmd prints what
    it prints against OpenMQ's broker.  A name that cannot be shown as it is (control or
    format characters) is quoted."""
    if not name:
        return "a destination name is required"
    shown = name if bad_character(name) is None else _shown(name)
    if name.startswith(INTERNAL_PREFIX):
        return (
            f"[B4175]: The following destination cannot be created: {shown}\n"
            f'Destination names starting with "{INTERNAL_PREFIX}" are reserved for internal '
            "Message Queue use.\nThey cannot be created administratively."
        )
    if not valid_admin_name(name):
        return f"[B4091]: The Destination of {shown} contains invalid characters"
    return None


# What the administrator's rule allows, for forms and the REST API to say with a refusal.
ADMIN_NAME_RULE = "a letter, _ or $ first, then letters, digits, _, $ or ."


__all__ = [
    "ADMIN_NAME_RULE",
    "INTERNAL_PREFIX",
    "admin_name_problem",
    "bad_character",
    "client_name_problem",
    "is_wildcard",
    "name_problem",
    "queue_name_problem",
    "topic_pattern_problem",
    "valid_admin_name",
]
