"""``python manage.py imqkeytool -broker``: the key pair and self-signed certificate of
a broker's TLS services (ssljms, ssladmin), like OpenMQ's ``imqkeytool -broker``.

Writes, in the instance's keystore directory (``imq.keystore.file.dirpath``, default the
instance's ``etc``; see :mod:`broker.security.tls`):

* ``keystore.pem``: the certificate and the private key, encrypted with the keystore
  password (``-password``, the ``imq.keystore.password`` line of ``-passfile``, or asked
  for); the broker needs the same password (``imq.keystore.password`` or its passfile);
* ``keystore.crt``: the certificate alone, for clients to trust.

The certificate's subject is ``-dname`` (default ``CN=<this host>``); its subject
alternative names are the CN's host, this host's name, ``localhost``, 127.0.0.1 and ::1.
Existing key material is kept unless ``-f`` is given.
"""

from __future__ import annotations

import datetime
import getpass
import ipaddress
import re
import socket
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from broker.config import BrokerConfig, ConfigError
from broker.security.tls import PASSWORD_PROP, keystore_paths, read_passfile, write_key_file

MIN_PASSWORD = 6  # Java keytool refuses shorter keystore passwords


def parse_dname(dname: str):
    """An X.500 name like keytool's ``-dname "CN=host, OU=unit, O=org, L=city, S=state, C=US"``
    (comma-separated, spaces allowed around the commas, ``\\,`` for a literal comma)."""
    from cryptography.x509 import Name, NameAttribute
    from cryptography.x509.oid import NameOID

    oids = {
        "CN": NameOID.COMMON_NAME,
        "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
        "O": NameOID.ORGANIZATION_NAME,
        "L": NameOID.LOCALITY_NAME,
        "S": NameOID.STATE_OR_PROVINCE_NAME,
        "ST": NameOID.STATE_OR_PROVINCE_NAME,
        "C": NameOID.COUNTRY_NAME,
        "STREET": NameOID.STREET_ADDRESS,
        "DC": NameOID.DOMAIN_COMPONENT,
        "E": NameOID.EMAIL_ADDRESS,
        "EMAILADDRESS": NameOID.EMAIL_ADDRESS,
    }
    attrs = []
    for part in re.split(r"(?<!\\),", dname):
        key, sep, value = part.strip().partition("=")
        value = value.strip().replace("\\,", ",")
        oid = oids.get(key.strip().upper())
        if not sep or not value or oid is None:
            raise CommandError(f"bad -dname {dname!r}: cannot read {part.strip()!r}")
        try:
            attrs.append(NameAttribute(oid, value))
        except ValueError as exc:
            raise CommandError(f"bad -dname {dname!r}: {exc}") from exc
    return Name(attrs)


def subject_alt_names(dname, extra_hosts: list[str]) -> list:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    hosts = [a.value for a in dname.get_attributes_for_oid(NameOID.COMMON_NAME)]
    hosts += extra_hosts + ["localhost", "127.0.0.1", "::1"]
    names: list = []
    seen: set[str] = set()
    for host in hosts:
        host = str(host).strip()
        if not host or host.lower() in seen:
            continue
        seen.add(host.lower())
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def generate(
    dname_text: str, validity_days: int, password: str, keyalg: str = "RSA"
) -> tuple[bytes, bytes]:
    """(keystore PEM: certificate + encrypted key, certificate PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if keyalg.upper() == "EC":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = parse_dname(dname_text)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=validity_days))
        .add_extension(
            x509.SubjectAlternativeName(subject_alt_names(name, [socket.gethostname()])),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=keyalg.upper() != "EC",
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode("utf-8")),
    )
    return cert_pem + key_pem, cert_pem


class Command(BaseCommand):
    help = "Create the key pair and self-signed certificate of a broker's TLS services."
    # A command-line tool: the portal's URL checks are not its business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "-broker", dest="broker", action="store_true", help="key material for a broker"
        )
        parser.add_argument("-name", dest="instance", help="broker instance name")
        parser.add_argument("-varhome", dest="varhome", help="the brokers' var home")
        parser.add_argument("-dname", dest="dname", help='subject, e.g. "CN=broker.example.com"')
        parser.add_argument(
            "-validity", dest="validity", type=int, default=365, help="days (default 365)"
        )
        parser.add_argument(
            "-keyalg",
            dest="keyalg",
            choices=["RSA", "EC"],
            default="RSA",
            help="RSA 2048 or EC P-256",
        )
        parser.add_argument(
            "-passfile", dest="passfile", help=f"file with a {PASSWORD_PROP}=... line"
        )
        parser.add_argument("-password", dest="password", help="keystore password")
        parser.add_argument(
            "-f", dest="force", action="store_true", help="replace existing key material"
        )

    def handle(self, *args, **opts) -> None:
        if not opts["broker"]:
            raise CommandError("only -broker is supported: imqkeytool -broker [-name INSTANCE]")
        if opts["validity"] <= 0:
            raise CommandError("-validity must be a positive number of days")
        instance = opts["instance"] or settings.IMQ_INSTANCE
        varhome = Path(opts["varhome"] or settings.IMQ_VARHOME).resolve()
        try:
            config = BrokerConfig.load(instance, varhome)
            paths = keystore_paths(config)
        except ConfigError as exc:
            raise CommandError(str(exc)) from exc
        if paths.keystore.exists() and not opts["force"]:
            raise CommandError(f"{paths.keystore} already exists; use -f to replace it")
        password = self._password(opts)
        if len(password) < MIN_PASSWORD:
            raise CommandError(f"the keystore password needs at least {MIN_PASSWORD} characters")
        dname = opts["dname"] or f"CN={socket.getfqdn() or 'localhost'}"
        keystore, cert = generate(dname, opts["validity"], password, opts["keyalg"])
        paths.directory.mkdir(parents=True, exist_ok=True)
        write_key_file(paths.keystore, keystore, 0o600)
        write_key_file(paths.certificate, cert, 0o644)
        self.stdout.write(f"keystore (certificate + encrypted private key): {paths.keystore}")
        self.stdout.write(f"certificate for clients: {paths.certificate}")

    def _password(self, opts) -> str:
        if opts["password"] is not None:
            return opts["password"]
        if opts["passfile"]:
            try:
                password = read_passfile(Path(opts["passfile"]))
            except ConfigError as exc:
                raise CommandError(str(exc)) from exc
            if password is None:
                raise CommandError(f"passfile {opts['passfile']} has no {PASSWORD_PROP}=... line")
            return password
        try:
            first = getpass.getpass("Keystore password: ")
            second = getpass.getpass("Keystore password (again): ")
        except (EOFError, OSError) as exc:
            raise CommandError("no keystore password: give -password or -passfile") from exc
        if first != second:
            raise CommandError("the passwords do not match")
        return first
