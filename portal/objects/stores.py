"""Publishing administered objects to JNDI object stores, in the layouts the JDK's own
providers read, so that a Java application finds them with ``InitialContext.lookup``:

* LDAP (``com.sun.jndi.ldap.LdapCtxFactory``): one entry per object, as the JDK's LDAP
  provider binds a ``javax.naming.Reference`` (com.sun.jndi.ldap.Obj): object classes
  ``top``, ``javaContainer``, ``javaObject``, ``javaNamingReference``; ``javaClassName``,
  ``javaFactory`` and one ``javaReferenceAddress`` value ``#<index>#<type>#<content>``
  per address.  The directory needs OpenLDAP's ``java.schema``.
* the file system (``com.sun.jndi.fscontext.RefFSContextFactory``): the directory's
  ``.bindings`` file, Java properties ``<name>/ClassName``, ``<name>/FactoryName`` and
  ``<name>/RefAddr/<index>/Type|Content|Encoding``.

A store with no initial context factory is the database alone: nothing is published.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

from broker.config import format_properties, parse_properties

__all__ = [
    "FS_FACTORY",
    "LDAP_FACTORY",
    "StoreError",
    "publish",
    "read_bindings",
    "unpublish",
]

LDAP_FACTORY = "com.sun.jndi.ldap.LdapCtxFactory"
FS_FACTORY = "com.sun.jndi.fscontext.RefFSContextFactory"
SUPPORTED_FACTORIES = ("", LDAP_FACTORY, FS_FACTORY)
LDAP_OBJECT_CLASSES = ["top", "javaContainer", "javaObject", "javaNamingReference"]
LDAP_TIMEOUT = 10
BINDINGS = ".bindings"
BINDINGS_HEADER = "This file is used by the JNDI FSContext."

Reference = tuple[str, str, list[tuple[str, str]]]


class StoreError(Exception):
    """The object store refused or could not be reached; nothing was changed there."""


def check_store(factory: str, url: str) -> None:
    """Refuse a store this module cannot publish to, before anything is saved."""
    if factory not in SUPPORTED_FACTORIES:
        raise StoreError(
            f"object store {factory!r} is not supported: use {LDAP_FACTORY} (LDAP), "
            f"{FS_FACTORY} (file system) or none (the database alone)"
        )
    if factory == LDAP_FACTORY:
        _ldap_url(url)
    elif factory == FS_FACTORY:
        _fs_dir(url)


def check_name(factory: str, name: str) -> None:
    """Refuse a lookup name the store cannot hold."""
    if factory == LDAP_FACTORY:
        _ldap_rdn(name)
    elif factory == FS_FACTORY:
        if "/" in name or name in (".", "..") or name.startswith("."):
            raise StoreError(
                f"lookup name {name!r}: the file-system store takes a plain name "
                "(no '/', not starting with '.')"
            )


def publish(factory: str, url: str, props: Mapping[str, str], name: str, ref: Reference) -> None:
    """Bind ``ref`` under ``name`` in the store, replacing what was bound there."""
    if factory == LDAP_FACTORY:
        _ldap_publish(url, props, name, ref)
    elif factory == FS_FACTORY:
        _fs_update(url, name, ref)


def unpublish(factory: str, url: str, props: Mapping[str, str], name: str) -> None:
    """Remove ``name`` from the store (nothing to do when it is not there)."""
    if factory == LDAP_FACTORY:
        _ldap_unpublish(url, props, name)
    elif factory == FS_FACTORY:
        _fs_update(url, name, None)


# --------------------------------------------------------------------------------------
# LDAP
# --------------------------------------------------------------------------------------


def _ldap_url(url: str) -> tuple[str, int, bool, str]:
    parts = urlsplit(url or "")
    if parts.scheme not in ("ldap", "ldaps") or not parts.hostname:
        raise StoreError(
            f"LDAP provider URL {url!r}: expected ldap://host:port/base-DN "
            "(e.g. ldap://localhost:389/ou=jndi,dc=example,dc=com)"
        )
    base = unquote(parts.path.lstrip("/"))
    if not base:
        raise StoreError(f"LDAP provider URL {url!r} names no base DN after the host")
    ssl = parts.scheme == "ldaps"
    try:
        port = parts.port or (636 if ssl else 389)
    except ValueError:
        raise StoreError(f"LDAP provider URL {url!r}: bad port") from None
    return parts.hostname, port, ssl, base


def _ldap_rdn(name: str) -> str:
    from ldap3.core.exceptions import LDAPInvalidDnError
    from ldap3.utils.dn import parse_dn

    try:
        parsed = parse_dn(name)
    except LDAPInvalidDnError:
        parsed = []
    if not parsed or parsed[0][0].lower() != "cn":
        raise StoreError(
            f"lookup name {name!r}: an LDAP store takes a name such as cn=MyQueueName "
            "(the entry's first attribute must be cn)"
        )
    return parsed[0][1]


def _ldap_connection(url: str, props: Mapping[str, str]):
    from ldap3 import ANONYMOUS, SIMPLE, Connection, Server
    from ldap3.core.exceptions import LDAPException

    host, port, ssl, base = _ldap_url(url)
    auth = (props.get("java.naming.security.authentication") or "").lower()
    principal = props.get("java.naming.security.principal") or ""
    if auth not in ("", "none", "simple"):
        raise StoreError(f"java.naming.security.authentication {auth!r}: none or simple")
    simple = auth == "simple" or (auth == "" and principal)
    server = Server(host, port=port, use_ssl=ssl, connect_timeout=LDAP_TIMEOUT)
    try:
        conn = Connection(
            server,
            user=principal if simple else None,
            password=props.get("java.naming.security.credentials") if simple else None,
            authentication=SIMPLE if simple else ANONYMOUS,
            receive_timeout=LDAP_TIMEOUT,
            raise_exceptions=True,
        )
        conn.bind()
    except LDAPException as exc:
        raise StoreError(f"LDAP store {url}: {_ldap_reason(exc)}") from None
    return conn, base


def _ldap_reason(exc: Exception) -> str:
    return getattr(exc, "description", None) or str(exc) or type(exc).__name__


def _ldap_publish(url: str, props: Mapping[str, str], name: str, ref: Reference) -> None:
    from ldap3.core.exceptions import LDAPException, LDAPNoSuchObjectResult

    class_name, factory, addrs = ref
    values = []
    for index, (kind, content) in enumerate(addrs):
        # The JDK reads "#i#type##..." as a serialized (binary) address.
        if content.startswith("#"):
            raise StoreError(
                f"{kind}: a value starting with '#' cannot be stored in LDAP "
                "(the JDK would read it as a serialized address)"
            )
        values.append(f"#{index}#{kind}#{content}")
    attributes = {
        "objectClass": LDAP_OBJECT_CLASSES,
        "cn": _ldap_rdn(name),
        "javaClassName": class_name,
        "javaFactory": factory,
        "javaReferenceAddress": values,
    }
    conn, base = _ldap_connection(url, props)
    dn = f"{name},{base}"
    try:
        try:
            conn.delete(dn)  # a rebind: what was there goes
        except LDAPNoSuchObjectResult:
            pass
        conn.add(dn, attributes=attributes)
    except LDAPException as exc:
        raise StoreError(f"LDAP store {url}: cannot bind {dn}: {_ldap_reason(exc)}") from None
    finally:
        conn.unbind()


def _ldap_unpublish(url: str, props: Mapping[str, str], name: str) -> None:
    from ldap3.core.exceptions import LDAPException, LDAPNoSuchObjectResult

    conn, base = _ldap_connection(url, props)
    dn = f"{name},{base}"
    try:
        conn.delete(dn)
    except LDAPNoSuchObjectResult:
        pass
    except LDAPException as exc:
        raise StoreError(f"LDAP store {url}: cannot unbind {dn}: {_ldap_reason(exc)}") from None
    finally:
        conn.unbind()


# --------------------------------------------------------------------------------------
# File system (.bindings)
# --------------------------------------------------------------------------------------


def _fs_dir(url: str) -> Path:
    parts = urlsplit(url or "")
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        raise StoreError(
            f"file-system provider URL {url!r}: expected file:///a/directory on this machine"
        )
    directory = Path(unquote(parts.path))
    if not directory.is_absolute():
        raise StoreError(f"file-system provider URL {url!r}: the directory must be absolute")
    return directory


def read_bindings(url: str) -> dict[str, str]:
    """The properties of the store's ``.bindings`` file (empty when there is none)."""
    path = _fs_dir(url) / BINDINGS
    try:
        return parse_properties(path.read_text(encoding="latin-1"))
    except FileNotFoundError:
        return {}


def _fs_update(url: str, name: str, ref: Reference | None) -> None:
    directory = _fs_dir(url)
    if not directory.is_dir():
        raise StoreError(f"file-system store {url}: directory {directory} does not exist")
    path = directory / BINDINGS
    try:
        with open(directory / ".bindings.lock", "a") as lock:
            # Every writer of this store (CLI, portal, API processes) takes turns here.
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = parse_properties(path.read_text(encoding="latin-1"))
            except FileNotFoundError:
                current = {}
            prefix = name + "/"
            props = {k: v for k, v in current.items() if not k.startswith(prefix)}
            if ref is not None:
                class_name, factory, addrs = ref
                props[prefix + "ClassName"] = class_name
                props[prefix + "FactoryName"] = factory
                for index, (kind, content) in enumerate(addrs):
                    base = f"{prefix}RefAddr/{index}/"
                    props[base + "Type"] = kind
                    props[base + "Content"] = content
                    props[base + "Encoding"] = "String"
            stamp = datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
            text = format_properties(props, header=f"{BINDINGS_HEADER}\n{stamp}")
            fd, tmp = tempfile.mkstemp(prefix=".bindings.", dir=directory)
            try:
                with os.fdopen(fd, "w", encoding="latin-1") as out:
                    out.write(text)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise StoreError(f"file-system store {url}: {exc.strerror or exc}") from None
