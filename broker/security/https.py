"""HTTPS for the portal (daphne) and the UMS gateway (uvicorn): their key material.

Both servers read it from the environment, set by ``manage.py up --https`` or, in the
Docker stack, by docker/https.yaml:

* ``PORTAL_HTTPS_CERT``: a PEM file with the server certificate, then any intermediate
  certificates (its chain);
* ``PORTAL_HTTPS_KEY``: a PEM file with the private key (may be the same file as the
  certificate, as the broker's ``keystore.pem`` is);
* ``PORTAL_HTTPS_KEY_PASSWORD``: the key's password when it is encrypted (the broker's
  keystore password for its ``keystore.pem``).

It lives beside the broker's own TLS key material (tls.py) because ``manage.py up``
defaults to that material and the commands, the portal and the image's entry point all
read this module; the broker itself does not.  The password travels in the environment,
never on a command line (``ps`` shows those).
Standard library only at import: daphne's and uvicorn's TLS libraries are imported by the
function that needs them.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CERT_ENV = "PORTAL_HTTPS_CERT"
KEY_ENV = "PORTAL_HTTPS_KEY"
PASSWORD_ENV = "PORTAL_HTTPS_KEY_PASSWORD"
# uvicorn takes its key password only as an option or from this variable (click's
# UVICORN_ prefix); the variable keeps it off the command line.
UVICORN_PASSWORD_ENV = "UVICORN_SSL_KEYFILE_PASSWORD"


class HttpsError(ValueError):
    """Key material that cannot serve HTTPS (the message says which file and why)."""


@dataclass(frozen=True)
class HttpsKeys:
    """Where the HTTPS server's certificate and key are, and the key's password."""

    cert: Path
    key: Path
    password: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HttpsKeys | None:
        """The key material named by the environment; None when HTTPS is not asked for."""
        cert = env.get(CERT_ENV, "").strip()
        key = env.get(KEY_ENV, "").strip()
        if not cert and not key:
            return None
        if not cert or not key:
            missing = CERT_ENV if not cert else KEY_ENV
            raise HttpsError(f"HTTPS needs {CERT_ENV} and {KEY_ENV}; {missing} is not set")
        return cls(Path(cert), Path(key), env.get(PASSWORD_ENV) or None)

    def environment(self) -> dict[str, str]:
        """The variables a child serving HTTPS with these keys needs."""
        env = {CERT_ENV: str(self.cert), KEY_ENV: str(self.key)}
        if self.password is not None:
            env[PASSWORD_ENV] = self.password
            env[UVICORN_PASSWORD_ENV] = self.password
        return env

    def server_context(self) -> ssl.SSLContext:
        """A server context (TLS 1.2 or later) with this key material loaded: what the
        starters check before they start a server, so a wrong password or a missing file
        is one clear line instead of a child's traceback."""
        for what, path in (("certificate", self.cert), ("private key", self.key)):
            if not path.is_file():
                raise HttpsError(f"HTTPS {what} {path}: no such file")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        password = self.password.encode("utf-8") if self.password is not None else None
        try:
            # A callable, not bytes: with no password OpenSSL would prompt on the terminal.
            ctx.load_cert_chain(str(self.cert), str(self.key), lambda: password or b"")
        except ssl.SSLError as exc:
            detail = f" ({exc.reason})" if exc.reason else ""
            raise HttpsError(
                f"cannot load the HTTPS key material {self.cert} / {self.key}: wrong or "
                f"missing password ({PASSWORD_ENV}), or not a PEM certificate and key{detail}"
            ) from exc
        except OSError as exc:
            raise HttpsError(f"cannot read the HTTPS key material: {exc}") from exc
        return ctx

    def twisted_context_factory(self) -> Any:
        """The same key material as a Twisted context factory (daphne serves the portal
        on Twisted, whose endpoint strings cannot carry a key password)."""
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
        from OpenSSL import SSL

        self.server_context()  # the clear message for bad material
        certs = x509.load_pem_x509_certificates(self.cert.read_bytes())
        password = self.password.encode("utf-8") if self.password is not None else None
        key = load_pem_private_key(self.key.read_bytes(), password)
        ctx = SSL.Context(SSL.TLS_SERVER_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
        ctx.use_certificate(certs[0])
        for extra in certs[1:]:
            ctx.add_extra_chain_cert(extra)
        ctx.use_privatekey(key)  # type: ignore[arg-type]
        ctx.check_privatekey()
        return _FixedContext(ctx)


class _FixedContext:
    """Twisted's ``IOpenSSLContextFactory``: one context for every connection."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def getContext(self) -> Any:  # noqa: N802 - Twisted's name
        return self.context


def tls_endpoints(context_factory: Any) -> Any:
    """A ``serverFromString`` for daphne that serves each ``tcp:`` endpoint over TLS with
    ``context_factory`` (other kinds of endpoint as they are)."""
    from twisted.internet.endpoints import SSL4ServerEndpoint, serverFromString

    def endpoint(reactor: Any, description: str) -> Any:
        if not description.startswith("tcp:"):
            return serverFromString(reactor, description)
        parts = re.split(r"(?<!\\):", description[4:])  # "\:" escapes an IPv6 colon
        fields = dict(part.split("=", 1) for part in parts if "=" in part)
        interface = fields.get("interface", "").replace("\\:", ":")
        return SSL4ServerEndpoint(
            reactor, int(fields["port"]), context_factory, interface=interface
        )

    return endpoint


__all__ = [
    "CERT_ENV",
    "KEY_ENV",
    "PASSWORD_ENV",
    "UVICORN_PASSWORD_ENV",
    "HttpsError",
    "HttpsKeys",
    "tls_endpoints",
]
