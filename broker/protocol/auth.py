"""AUTHENTICATE bodies: two Java ``writeUTF`` strings (user name, then credential).

For ``basic`` the credential is base64 of the UTF-8 password; for ``digest`` it is
``MD5STR(MD5STR(user:password):nonce)`` (docs/developers/protocol.md, "Authentication").
"""

from __future__ import annotations

import base64
import binascii

from .errors import ProtocolError
from .properties import PropertyError, read_utf, write_utf

AUTH_BASIC = "basic"
AUTH_DIGEST = "digest"
AUTH_ADMINKEY = "jmqadminkey"


class AuthBodyError(ProtocolError):
    """A malformed AUTHENTICATE body."""


def encode_auth_body(username: str, credential: str) -> bytes:
    return write_utf(username) + write_utf(credential)


def decode_auth_body(body: bytes) -> tuple[str, str]:
    """Return ``(username, credential)``; trailing bytes are ignored as Java ignores them."""
    try:
        user, pos = read_utf(body, 0)
        cred, _ = read_utf(body, pos)
    except PropertyError as exc:
        raise AuthBodyError(f"malformed authentication body: {exc}") from exc
    return user, cred


def encode_basic_password(password: str) -> str:
    """The basic-auth credential a client sends: base64 of the UTF-8 password (no line
    breaks; not the stored digest, broker.security.digest.password_digest)."""
    return base64.b64encode(password.encode("utf-8")).decode("ascii")


def decode_basic_password(credential: str) -> str:
    """Undo :func:`encode_basic_password`, tolerating whitespace as the Java decoder does."""
    try:
        raw = base64.b64decode("".join(credential.split()), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise AuthBodyError("basic credential is not base64 of UTF-8 text") from exc
