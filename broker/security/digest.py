"""OpenMQ password hashing and the digest challenge/response (docs/developers/protocol.md).

OpenMQ never stores or sends passwords for ``digest`` authentication.  The password
file holds ``MD5STR(username + ":" + password)`` and the client answers a nonce with
``MD5STR(stored + ":" + nonce)``.  ``MD5STR`` is Java's
``new BigInteger(md5).toString(16)``: the digest read as a *signed* big-endian
integer, printed in lower-case hex without leading zeros and with a ``-`` sign when
negative.  Pure Python on purpose: the broker calls this without Django.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = [
    "constant_time_equals",
    "digest_response",
    "md5str",
    "new_nonce",
    "password_digest",
]


def md5str(s: str) -> str:
    """Return OpenMQ's MD5STR of ``s`` (UTF-8), e.g. ``-2d5455c8583c24eec82c7a1e273ea02e``."""
    n = int.from_bytes(hashlib.md5(s.encode("utf-8")).digest(), "big", signed=True)
    return "-" + format(-n, "x") if n < 0 else format(n, "x")


def password_digest(user: str, password: str) -> str:
    """Return the stored credential for ``user``/``password`` as the passwd file holds it:
    ``MD5STR(user:password)`` (what the digest exchange starts from; not the basic
    credential a client sends, broker.protocol.auth.encode_basic_password)."""
    return md5str(user + ":" + password)


def digest_response(stored: str, nonce: str) -> str:
    """Return the digest response expected for a stored credential and a nonce."""
    return md5str(stored + ":" + nonce)


def constant_time_equals(a: str, b: str) -> bool:
    """Compare two credentials without leaking the position of the first difference."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def new_nonce() -> str:
    """Return a fresh digest challenge.

    Shaped like the Java broker's nonce (an MD5STR) so clients that log or size it
    see nothing unusual, but built from a CSPRNG rather than time and ids.
    """
    return md5str(secrets.token_hex(16))
