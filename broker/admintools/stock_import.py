"""Import a stock OpenMQ broker instance's configuration into one of ours.

A stock instance directory (``VARHOME/instances/NAME``) holds ``props/config.properties``,
``etc/passwd``, ``etc/accesscontrol.properties`` and, in the installation's ``etc`` by
default, the JKS ``keystore`` of its TLS services.  :func:`import_configuration` reads
them and writes ours through the same functions the other tools use:

* properties this broker honours go to our instance's ``config.properties``
  (:meth:`BrokerConfig.save_instance_file`, as a run-time ``imqcmd update bkr`` writes it),
  the others are reported with why (:func:`broker.admintools.stock_properties.property_support`);
* users and groups: :func:`broker.admintools.security_actions.load_users` with the stock
  password hashes as they are (both brokers store OpenMQ's ``MD5STR(user:password)``);
* access rules: :func:`broker.admintools.security_actions.import_rules_file`, for all brokers;
* the keystore: converted by the JDK's ``keytool`` and ``cryptography`` into the PEM key
  material our TLS services load (:mod:`broker.security.tls`), under the same password.

The message store is not read (its format is the stock broker's own): destinations,
durable subscriptions and queued messages are taken from the running stock broker
(:mod:`broker.admintools.stock_objects`).  Every change is recorded in the log.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from broker import props as imq
from broker.config import BrokerConfig, ConfigError, format_properties, parse_properties
from broker.security import acl
from broker.security.filerepo import parse_passwd
from broker.security.tls import PASSWORD_PROP, keystore_paths, passfile_path, write_key_file

from . import security_actions as sec
from .actions import ActionError, record_change
from .stock_properties import FIXED, property_support
from .stock_report import Report

__all__ = ["StockInstance", "convert_keystore", "import_configuration", "read_stock_passfile"]

_VAR = re.compile(r"\$\{([^}]*)\}")
KEYSTORE_ALIAS = "imq"  # the alias OpenMQ's TLS services take their key from

# Properties the steps below read themselves (they name the stock files).
_FILE_PROPS = {
    imq.KEYSTORE_DIRPATH.name,
    imq.KEYSTORE_NAME.name,
    imq.KEYSTORE_PASSWORD.name,
    imq.PASSFILE_ENABLED.name,
    imq.PASSFILE_DIRPATH.name,
    imq.PASSFILE_NAME.name,
    imq.USER_FILE_DIRPATH.name,
    imq.USER_FILE_NAME.name,
    imq.ACCESSCONTROL_FILE_NAME.name,
    imq.ACCESSCONTROL_FILE_DIRPATH.name,
}
_REPOSITORY_PROPS = {p.name for p in imq.USER_REPOSITORY.values()}
# Stock properties that name a directory of the stock installation.
_PATH_SUFFIXES = (".dirpath", ".file.url", ".pattern")


@dataclass
class StockInstance:
    """A stock broker's instance directory and its ``config.properties``."""

    directory: Path
    properties: dict[str, str]
    etchome: Path | None = None  # the stock installation's etc (its ${imq.etchome})

    @classmethod
    def open(cls, directory: Path | str, etchome: Path | str | None = None) -> StockInstance:
        """Read ``directory`` (``VARHOME/instances/NAME``); ActionError when it is not one."""
        d = Path(directory).resolve()
        config = d / "props" / "config.properties"
        if not d.is_dir() or not (config.is_file() or (d / "etc").is_dir()):
            raise ActionError(
                f"{d} is not a stock broker instance directory "
                "(VARHOME/instances/NAME with props/config.properties and etc/)"
            )
        try:
            text = config.read_bytes().decode("latin-1") if config.is_file() else ""
            properties = parse_properties(text)
        except (OSError, ConfigError) as exc:
            raise ActionError(f"cannot read {config}: {exc}") from None
        return cls(d, properties, Path(etchome).resolve() if etchome else None)

    @property
    def name(self) -> str:
        return self.directory.name

    @property
    def varhome(self) -> Path:
        return self.directory.parent.parent

    def expand(self, value: str) -> str | None:
        """``value`` with the stock broker's ``${...}`` variables; None when it refers to
        one only the stock installation knows (``${imq.etchome}`` unless given)."""
        known = {
            "/": os.sep,
            imq.INSTANCE_NAME.name: self.name,
            imq.VARHOME.name: str(self.varhome),
            imq.INSTANCES_HOME.name: str(self.varhome / "instances"),
        }
        if self.etchome is not None:
            known[imq.ETCHOME.name] = str(self.etchome)
        missing = False

        def repl(m: re.Match[str]) -> str:
            nonlocal missing
            var = m.group(1)
            if var in known:
                return known[var]
            if var in self.properties and "${" not in self.properties[var]:
                return self.properties[var]
            missing = True
            return m.group(0)

        out = _VAR.sub(repl, value)
        return None if missing else out

    def file(
        self, dir_prop: str, dir_default: str, name_prop: str, name_default: str
    ) -> Path | None:
        """The file a pair of ``*.dirpath`` / ``*.name`` properties names (the stock
        defaults when unset); None when its directory is the unknown ``${imq.etchome}``."""
        directory = self.expand(self.properties.get(dir_prop) or dir_default)
        name = self.properties.get(name_prop) or name_default
        if directory is None:
            return None
        return Path(directory) / name

    def etc_file(self, dir_prop: str, name_prop: str, name_default: str) -> Path:
        path = self.file(
            dir_prop, "${imq.instanceshome}${/}${imq.instancename}${/}etc", name_prop, name_default
        )
        return path if path is not None else self.directory / "etc" / name_default


def import_configuration(
    actor: str,
    stock: StockInstance,
    config: BrokerConfig,
    *,
    keystore: Path | None = None,
    keystore_password: str | None = None,
    replace_keystore: bool = False,
    dry_run: bool = False,
) -> Report:
    """Import ``stock``'s properties, users, access rules and keystore into the instance
    ``config`` is (its ``config.properties``, the shared database, its ``etc``); with
    ``dry_run`` only report.  One report item per thing looked at."""
    report = Report()
    to_set: dict[str, str] = {}
    _import_users(actor, stock, report, dry_run)
    _import_rules(actor, stock, config, report, to_set, dry_run)
    _import_keystore(
        actor, stock, config, report, to_set, keystore, keystore_password, replace_keystore, dry_run
    )
    _import_properties(actor, stock, config, report, to_set, dry_run)
    _report_store(stock, report)
    return report


# --------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------


def _import_properties(
    actor: str,
    stock: StockInstance,
    config: BrokerConfig,
    report: Report,
    to_set: dict[str, str],
    dry_run: bool,
) -> None:
    for name, value in sorted(stock.properties.items()):
        if _SERVICE_RULE_FILE.fullmatch(name):
            continue  # the rules step copied that file and reported it
        if name in _FILE_PROPS:
            # The user, rule and keystore steps read the stock files these name; ours
            # keeps its own copies in its instance's etc.
            if name in to_set:
                report.taken("property", name, f"{to_set[name]}: the keystore's password")
            elif name == imq.KEYSTORE_PASSWORD.name:
                report.adapted(
                    "property", name, "(hidden) used to open the keystore, kept in our passfile"
                )
            elif name == imq.PASSFILE_ENABLED.name:
                report.adapted(
                    "property", name, f"{value!r}: ours is set when the keystore is imported"
                )
            else:
                report.adapted(
                    "property",
                    name,
                    f"{value!r} locates a stock file, read by this import; this broker "
                    "keeps its own in its instance's etc",
                )
            continue
        if name in _REPOSITORY_PROPS and value.strip().lower() == "file":
            report.adapted(
                "property",
                name,
                f"{value}: the users of the stock passwd file are in this broker's "
                "database repository (its default); left at database",
            )
            continue
        why = property_support(name)
        if why is not None:
            report.not_taken("property", name, f"{_shown(name, value, True)}: {why}")
            continue
        if name.endswith(_PATH_SUFFIXES) or name in FIXED:
            expanded = stock.expand(value)
            if expanded is None or str(stock.directory) in expanded:
                report.not_taken(
                    "property",
                    name,
                    f"{value!r} names a place of the stock installation; set it by hand "
                    "if this broker should use another place than its default",
                )
                continue
        to_set[name] = value
        report.taken("property", name, _shown(name, value))
    if not to_set or dry_run:
        return
    try:
        for name, value in to_set.items():
            config.set(name, value)
        config.save_instance_file()
    except (ConfigError, OSError) as exc:
        raise ActionError(f"cannot write {config.instance_file}: {exc}") from None
    record_change(
        actor,
        f"imported {len(to_set)} properties from stock instance {stock.directory} "
        f"into {config.instance_file}",
        {"type": "broker", "op": "import", "properties": sorted(to_set)},
        instance=config.instance,
    )


def _shown(name: str, value: str, quoted: bool = False) -> str:
    """A property's value as the report shows it: never a password."""
    if "password" in name.lower():
        return "(hidden)"
    return repr(value) if quoted else value


# --------------------------------------------------------------------------------------
# Users and access rules
# --------------------------------------------------------------------------------------


def _import_users(actor: str, stock: StockInstance, report: Report, dry_run: bool) -> None:
    path = stock.etc_file(imq.USER_FILE_DIRPATH.name, imq.USER_FILE_NAME.name, "passwd")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        report.not_taken("users", str(path), f"cannot read it: {exc}")
        return
    entries: list[tuple[str, str, bool, list[str]]] = []
    for e in parse_passwd(text):
        try:
            sec.clean_username(e.username)
            groups = [sec.clean_group_name(e.group)] if e.group else []
        except ActionError as exc:
            report.not_taken("user", e.username, str(exc))
            continue
        entries.append((e.username, e.password_digest, e.active, groups))
        state = "" if e.active else ", disabled"
        report.taken(
            "user", e.username, f"group {', '.join(groups) or '(none)'}{state}, password as is"
        )
    if not entries or dry_run:
        return
    try:
        sec.load_users(actor, entries, source=f"the stock instance's {path}")
    except ActionError as exc:
        for name, *_ in entries:
            report.not_taken("user", name, f"the users were refused: {exc}")


def _import_rules(
    actor: str,
    stock: StockInstance,
    config: BrokerConfig,
    report: Report,
    to_set: dict[str, str],
    dry_run: bool,
) -> None:
    path = stock.etc_file(
        imq.ACCESSCONTROL_FILE_DIRPATH.name,
        imq.ACCESSCONTROL_FILE_NAME.name,
        imq.ACCESSCONTROL_FILE_NAME.default or "accesscontrol.properties",
    )
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.not_taken("access rules", str(path), f"cannot read it: {exc}")
        return
    try:
        rules = acl.parse_file(data.decode("latin-1"))
    except ConfigError as exc:
        report.not_taken("access rules", str(path), f"unreadable: {exc}")
        return
    if (rules.get(acl.VERSION_KEY) or "").strip() != acl.VERSION:
        report.not_taken(
            "access rules",
            str(path),
            f"no line version={acl.VERSION} (the stock broker refuses every access "
            "with such a file too)",
        )
        return
    good: dict[str, str] = {}
    for key, value in rules.items():
        if key == acl.VERSION_KEY:
            good[key] = value
        elif acl.parse_key(key) is None:
            report.not_taken("access rule", key, "not an access control rule")
        elif "\n" in value or "\r" in value:
            report.not_taken("access rule", key, "a rule value is one line")
        else:
            good[key] = value
            report.taken("access rule", key, value)
    _service_rule_files(stock, config, report, to_set, dry_run)
    if dry_run:
        return
    sec.import_rules_file(actor, acl.format_file(good), replace=True, instance="")
    from broker.models import AccessRule

    scoped = AccessRule.objects.exclude(broker_instance="").values_list("broker_instance")
    for (instance,) in sorted(set(scoped)):
        report.adapted(
            "access rules",
            f"instance {instance}",
            "taken for all brokers; that broker's own rules, kept in the database, "
            "override them there "
            f"(imqacl list -name {instance})",
        )


_SERVICE_RULE_FILE = re.compile(r"imq\.(\w+)\.accesscontrol\.file\.(filename|dirpath)")


def _service_rule_files(
    stock: StockInstance,
    config: BrokerConfig,
    report: Report,
    to_set: dict[str, str],
    dry_run: bool,
) -> None:
    """A service's own rule file (``imq.<service>.accesscontrol.file.filename``), which
    this broker reads as OpenMQ does: copied into our instance's etc, named there."""
    services = sorted(
        {m.group(1) for n in stock.properties if (m := _SERVICE_RULE_FILE.fullmatch(n))}
    )
    for svc in services:
        name_prop = f"imq.{svc}.accesscontrol.file.filename"
        path = stock.etc_file(f"imq.{svc}.accesscontrol.file.dirpath", name_prop, "")
        if not stock.properties.get(name_prop) or not path.is_file():
            report.not_taken(
                "access rules",
                f"service {svc}",
                f"its own rule file {path} was not found: this broker uses the database "
                "rules for it",
            )
            continue
        target = config.instance_dir / "etc" / path.name
        report.adapted(
            "access rules",
            f"service {svc}",
            f"its own rule file {path} copied to {target} ({name_prop}={path.name})",
        )
        to_set[name_prop] = path.name
        if not dry_run:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


# --------------------------------------------------------------------------------------
# Keystore
# --------------------------------------------------------------------------------------


def read_stock_passfile(path: Path) -> dict[str, str]:
    """A stock passfile's entries, plain (``name=value``) or as the stock ``imqusermgr
    encode`` writes them: ``name{tag}=hash:base64(value)``."""
    import base64
    import binascii

    out: dict[str, str] = {}
    for key, value in parse_properties(path.read_text(encoding="latin-1")).items():
        name, brace, _ = key.partition("{")
        if brace and ":" in value:
            try:
                value = base64.b64decode(value.rpartition(":")[2], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
        out[name] = value
    return out


def _stock_password(stock: StockInstance) -> str | None:
    """The keystore password the stock broker's passfile holds, when it uses one."""
    enabled = (stock.properties.get(imq.PASSFILE_ENABLED.name) or "").strip().lower() == "true"
    if not enabled:
        return None
    path = stock.file(
        imq.PASSFILE_DIRPATH.name, "${imq.etchome}", imq.PASSFILE_NAME.name, "passfile"
    )
    for p in (path, stock.directory / "etc" / "passfile"):
        if p is not None and p.is_file():
            try:
                return read_stock_passfile(p).get(PASSWORD_PROP)
            except (OSError, ConfigError):
                continue
    return None


def _import_keystore(
    actor: str,
    stock: StockInstance,
    config: BrokerConfig,
    report: Report,
    to_set: dict[str, str],
    keystore: Path | None,
    password: str | None,
    replace: bool,
    dry_run: bool,
) -> None:
    where = keystore or stock.file(
        imq.KEYSTORE_DIRPATH.name, "${imq.etchome}", imq.KEYSTORE_NAME.name, "keystore"
    )
    candidates = [where] if keystore else [where, stock.directory / "etc" / "keystore"]
    found = next((p for p in candidates if p is not None and p.is_file()), None)
    if found is None:
        shown = ", ".join(str(p) for p in candidates if p is not None) or "${imq.etchome}/keystore"
        report.not_taken(
            "keystore",
            shown,
            "not found (the stock default is the installation's etc/keystore: give --keystore "
            "and --etchome); no key material for ssljms/ssladmin was imported",
        )
        return
    password = (
        password or stock.properties.get(imq.KEYSTORE_PASSWORD.name) or _stock_password(stock)
    )
    if not password:
        report.not_taken(
            "keystore",
            str(found),
            "no keystore password: give --keystore-password or a --passfile with "
            f"{PASSWORD_PROP}=... (the stock broker's passfile was not found)",
        )
        return
    ours = keystore_paths(config)
    if ours.keystore.exists() and not replace:
        report.not_taken(
            "keystore",
            str(found),
            f"this instance already has {ours.keystore} (--replace-keystore)",
        )
        return
    try:
        pem, cert = convert_keystore(found, password)
    except ActionError as exc:
        report.not_taken("keystore", str(found), str(exc))
        return
    detail = (
        f"JKS converted to {ours.keystore} (certificate and private key, encrypted with the "
        f"same password) and {ours.certificate}; the password is in {passfile_path(config)}"
    )
    report.adapted("keystore", str(found), detail)
    to_set[imq.PASSFILE_ENABLED.name] = "true"
    if dry_run:
        return
    ours.directory.mkdir(parents=True, exist_ok=True)
    write_key_file(ours.keystore, pem, 0o600)
    write_key_file(ours.certificate, cert, 0o644)
    passfile = passfile_path(config)
    lines: dict[str, str] = {}
    if passfile.is_file():
        try:
            lines = parse_properties(passfile.read_text(encoding="latin-1"))
        except (OSError, ConfigError):
            lines = {}
    lines[PASSWORD_PROP] = password
    passfile.parent.mkdir(parents=True, exist_ok=True)
    write_key_file(passfile, format_properties(lines).encode("latin-1"), 0o600)
    record_change(
        actor,
        f"imported the keystore {found} of a stock instance into {ours.keystore}",
        {"type": "broker", "op": "import", "keystore": str(ours.keystore)},
        instance=config.instance,
    )


def convert_keystore(path: Path, password: str) -> tuple[bytes, bytes]:
    """(PEM: certificate chain + private key encrypted with ``password``, the certificate
    alone) from a JKS or PKCS#12 keystore's ``imq`` entry (its only key entry when
    there is no ``imq``).  Needs the JDK's keytool; ActionError saying what failed."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    keytool = shutil.which("keytool")
    if keytool is None:
        raise ActionError("keytool (a JDK) is needed to read a Java keystore; install one")
    with tempfile.TemporaryDirectory(prefix="imq-keystore-") as tmp:
        p12 = Path(tmp) / "keystore.p12"
        base = [
            keytool,
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            str(path),
            "-srcstorepass",
            password,
            "-destkeystore",
            str(p12),
            "-deststoretype",
            "PKCS12",
            "-deststorepass",
            password,
        ]
        done = subprocess.run(
            [*base, "-srcalias", KEYSTORE_ALIAS, "-destkeypass", password],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0 and "does not exist" in done.stdout + done.stderr:
            done = subprocess.run(base, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip().splitlines()
            raise ActionError(f"keytool could not read {path}: {said[-1] if said else 'failed'}")
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(
                p12.read_bytes(), password.encode("utf-8")
            )
        except ValueError as exc:
            raise ActionError(f"cannot read the converted keystore: {exc}") from None
    if key is None or cert is None:
        raise ActionError(f"{path} holds no private key with its certificate")
    chain = cert.public_bytes(serialization.Encoding.PEM) + b"".join(
        c.public_bytes(serialization.Encoding.PEM) for c in extra or []
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode("utf-8")),
    )
    return chain + key_pem, cert.public_bytes(serialization.Encoding.PEM)


# --------------------------------------------------------------------------------------
# What stays behind
# --------------------------------------------------------------------------------------


def _report_store(stock: StockInstance, report: Report) -> None:
    for name in sorted(p.name for p in stock.directory.iterdir() if p.is_dir()):
        if name.startswith("fs") or name == "dbstore":
            report.not_taken(
                "message store",
                str(stock.directory / name),
                "the stock broker's own format, not read: take destinations and durable "
                "subscriptions from the running stock broker (imqimport destinations) and "
                "move queued messages (imqimport drain)",
            )
