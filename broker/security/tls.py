"""Key material and SSL contexts for the TLS connection services (ssljms, ssladmin).

OpenMQ keeps the broker's key pair in a Java keystore,
``imq.keystore.file.dirpath``/``imq.keystore.file.name`` (default ``${imq.etchome}/keystore``),
unlocked with ``imq.keystore.password``.  We keep the same place and password but use PEM
files, written by ``manage.py imqkeytool -broker``:

* ``<dirpath>/<name>.pem`` (default ``<instance>/etc/keystore.pem``): the broker's
  certificate followed by its private key, PKCS#8, **encrypted with the keystore
  password**.  This is what the broker loads.  (A name that already ends in ``.pem`` is
  used as it is.)
* ``<dirpath>/<name>.crt`` (default ``keystore.crt``): the certificate alone, not secret;
  the "trust store" to hand to clients (``ssl.create_default_context(cafile=...)``).
  The broker does not read it.

The keystore password is ``imq.keystore.password``, or, when ``imq.passfile.enabled`` is
true, the ``imq.keystore.password=...`` line of the passfile
``imq.passfile.dirpath``/``imq.passfile.name`` (default ``<instance>/etc/passfile``, Java
properties syntax), which takes precedence.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from broker import props
from broker.config import BrokerConfig, ConfigError, parse_properties

PASSWORD_PROP = props.KEYSTORE_PASSWORD.name
# Services whose protocol type means "wrap the socket in TLS".
TLS_PROTOCOLS = ("tls",)


@dataclass(frozen=True)
class KeystorePaths:
    directory: Path
    keystore: Path  # certificate + encrypted private key (what the broker loads)
    certificate: Path  # the certificate alone (for clients)


def keystore_paths(config: BrokerConfig) -> KeystorePaths:
    """Where this instance's key material lives."""
    directory = Path(config.get(props.KEYSTORE_DIRPATH) or config.instance_dir / "etc")
    name = config.get(props.KEYSTORE_NAME)
    base = name[:-4] if name.endswith(".pem") else name
    return KeystorePaths(directory, directory / f"{base}.pem", directory / f"{base}.crt")


def passfile_path(config: BrokerConfig) -> Path:
    directory = Path(config.get(props.PASSFILE_DIRPATH) or config.instance_dir / "etc")
    return directory / config.get(props.PASSFILE_NAME)


def write_key_file(path: Path, data: bytes, mode: int) -> None:
    """Write key material (a keystore, a certificate, a passfile) whole or not at all,
    readable as ``mode`` says from its first byte."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def read_passfile(path: Path, key: str = PASSWORD_PROP) -> str | None:
    """The value of ``key`` in a passfile (Java properties syntax), None when absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read passfile {path}: {exc}") from exc
    return parse_properties(text).get(key)


def keystore_password(config: BrokerConfig) -> str:
    """The keystore password: from the passfile when imq.passfile.enabled, else the property."""
    if config.get(props.PASSFILE_ENABLED):
        path = passfile_path(config)
        password = read_passfile(path)
        if password is not None:
            return password
        if config.get(PASSWORD_PROP) is None:
            raise ConfigError(f"passfile {path} has no {PASSWORD_PROP}=... line")
    password = config.get(PASSWORD_PROP)
    if password is None:
        raise ConfigError(
            f"no keystore password: set {PASSWORD_PROP}, or imq.passfile.enabled=true "
            f"with a passfile containing {PASSWORD_PROP}=..."
        )
    return password


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """The server-side context shared by the TLS services (TLS 1.2 or later).

    Raises ConfigError when the key material is missing or the password does not open it.
    """
    paths = keystore_paths(config)
    if not paths.keystore.is_file():
        raise ConfigError(
            f"SSL service active but no keystore at {paths.keystore}: create one with "
            f"'manage.py imqkeytool -broker -name {config.instance}'"
        )
    password = keystore_password(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(paths.keystore), password=password.encode("utf-8"))
    except ssl.SSLError as exc:
        detail = f" ({exc.reason})" if exc.reason else ""
        raise ConfigError(
            f"cannot open keystore {paths.keystore}: wrong keystore password "
            f"or damaged key material{detail}"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read keystore {paths.keystore}: {exc}") from exc
    return ctx


def client_trust_context(
    truststore: str | Path | None = None, also_trust: Path | None = None
) -> ssl.SSLContext:
    """A client context (TLS 1.2 or later, the broker's certificate and host name
    verified) trusting ``truststore``, a PEM file of certificates (e.g. the broker's
    ``keystore.crt``), when given; otherwise the system's CAs and, when the file exists,
    ``also_trust`` (the local instance's ``keystore.crt``: a self-signed broker on this
    machine is trusted without a trust store being named).

    Raises ConfigError when the trust store cannot be read."""
    ctx = ssl.create_default_context()
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if truststore is not None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_verify_locations(cafile=str(truststore))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot read the trust store {truststore}: {exc}") from exc
    elif also_trust is not None and also_trust.is_file():
        try:
            ctx.load_verify_locations(cafile=str(also_trust))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot read the broker certificate {also_trust}: {exc}") from exc
    return ctx


__all__ = [
    "PASSWORD_PROP",
    "TLS_PROTOCOLS",
    "KeystorePaths",
    "client_trust_context",
    "keystore_password",
    "keystore_paths",
    "passfile_path",
    "read_passfile",
    "server_context",
    "write_key_file",
]
