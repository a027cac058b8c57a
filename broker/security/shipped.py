"""The shipped accounts: ``admin``/``admin`` and ``guest``/``guest``, as OpenMQ ships them
(and as :data:`broker.security.users.DEFAULT_USERS` creates them).

An account still on its shipped password is open to anyone who reaches the broker.  The
broker says so at start while a service listens beyond loopback (:func:`start_messages`)
and reports the accounts to the portal; with ``imq.user.shipped_passwords.loopback_only``
it accepts them from loopback addresses only (:func:`refused_off_loopback`, RabbitMQ's
``loopback_users`` idea), answering any other address as a wrong password.  Once a
password is changed the account is an ordinary one again.

Pure functions: the engine decides with them, the server checks the repositories with
them in its thread pool.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from broker import props

from .digest import constant_time_equals, md5str

__all__ = [
    "SHIPPED_PASSWORDS",
    "beyond_loopback",
    "is_loopback",
    "on_shipped_password",
    "refused_off_loopback",
    "start_messages",
]

SHIPPED_PASSWORDS: dict[str, str] = {"admin": "admin", "guest": "guest"}


def on_shipped_password(username: str, password_digest: str) -> bool:
    """True when ``username`` is a shipped account whose stored digest is its shipped
    password's (``MD5STR(user:password)``, as the database and passwd file hold it)."""
    shipped = SHIPPED_PASSWORDS.get(username)
    if shipped is None or not password_digest:
        return False
    return constant_time_equals(md5str(f"{username}:{shipped}"), password_digest)


def is_loopback(host: str) -> bool:
    """An address on this host only: 127.0.0.0/8, ::1, or IPv4-mapped loopback.  A
    wildcard (``0.0.0.0``, ``::``, empty), a name or anything unreadable is not."""
    text = host.strip().strip("[]").split("%", 1)[0]
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped.is_loopback
    return addr.is_loopback


def peer_host(peer: str) -> str:
    """The address of a ``host:port`` peer (IPv6 hosts hold colons of their own)."""
    host, sep, _ = peer.rpartition(":")
    return host if sep else peer


def refused_off_loopback(loopback_only: bool, peer: str, username: str, digest: str) -> bool:
    """The login of ``username`` (whose stored digest is ``digest``) from ``peer``
    (``host:port``) is refused: loopback-only is on, the account is on its shipped
    password and the peer is not a loopback address."""
    return (
        loopback_only and on_shipped_password(username, digest) and not is_loopback(peer_host(peer))
    )


def beyond_loopback(addresses: Iterable[tuple[str, str]]) -> list[str]:
    """Of ``(service, host:port)`` listening addresses, the ones other hosts can reach,
    as ``service on host:port``."""
    return [f"{svc} on {where}" for svc, where in addresses if not is_loopback(peer_host(where))]


def start_messages(
    in_use: list[str], exposed: list[str], loopback_only: bool
) -> list[tuple[int, str]]:
    """What the broker logs at start, (level, text) per shipped account ``in_use`` (on
    its shipped password), given the services ``exposed`` beyond loopback: a WARNING
    each, or INFO when those accounts are held to loopback; nothing on loopback alone."""
    if not exposed:
        return []
    name = props.SHIPPED_LOOPBACK_ONLY.name
    where = ", ".join(exposed)
    out = []
    for user in in_use:
        if loopback_only:
            out.append(
                (
                    logging.INFO,
                    f"user {user} still has its shipped password: accepted from loopback "
                    f"addresses only ({name}=true)",
                )
            )
        else:
            out.append(
                (
                    logging.WARNING,
                    f"user {user} still has its shipped password ({user}/"
                    f"{SHIPPED_PASSWORDS[user]}) and the broker listens beyond loopback "
                    f"({where}): anyone who reaches it can log in as {user}. Change the "
                    f"password (imqusermgr update -u {user} -p ..., or the portal's Users "
                    f"page) or set {name}=true",
                )
            )
    return out
