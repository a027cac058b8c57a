"""A real OpenLDAP server (slapd) for tests, with a small directory.

``ldap_server`` (session fixture) writes a ``slapd.conf`` (mdb backend, suffix
``dc=example,dc=com``; OpenLDAP's java.schema, for JNDI object stores under
``ou=jndi``) in a temporary directory, loads :data:`LDIF` with ``slapadd`` and
runs Debian's ``/usr/sbin/slapd`` (installed by ``make install-dev``) on 127.0.0.1 and a
free port.  The package's own daemon is never used.  It is stopped and deleted at the end
of the session.

Use it with ``from tests.ldap import ldap_server  # noqa: F401``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.launcher import free_port

SLAPD = "/usr/sbin/slapd"
SLAPADD = "/usr/sbin/slapadd"
SUFFIX = "dc=example,dc=com"
ROOTDN = f"cn=admin,{SUFFIX}"
ROOTPW = "secret"

# uid -> (password, groups)
USERS = {
    "alice": ("alicepw", ("admin", "user")),
    "bob": ("bobpw", ("user",)),
    "carol": ("carolpw", ()),
}

LDIF = (
    f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups

dn: ou=jndi,{SUFFIX}
objectClass: organizationalUnit
ou: jndi

"""
    + "".join(
        f"""dn: uid={uid},ou=people,{SUFFIX}
objectClass: inetOrgPerson
uid: {uid}
cn: {uid.title()}
sn: {uid.title()}
userPassword: {pw}

"""
        for uid, (pw, _) in USERS.items()
    )
    + "".join(
        f"dn: cn={group},ou=groups,{SUFFIX}\nobjectClass: groupOfUniqueNames\ncn: {group}\n"
        + "".join(
            f"uniqueMember: uid={uid},ou=people,{SUFFIX}\n"
            for uid, (_, groups) in USERS.items()
            if group in groups
        )
        + "\n"
        for group in ("admin", "user")
    )
)

CONF = """include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/java.schema
pidfile {tmp}/slapd.pid
argsfile {tmp}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
access to attrs=userPassword by self read by anonymous auth by * none
access to * by * read
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{rootdn}"
rootpw {rootpw}
directory {tmp}/data
"""


@dataclass
class LdapServer:
    host: str
    port: int
    suffix: str
    rootdn: str
    rootpw: str
    users: dict

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"

    def broker_props(self, *extra: str) -> list[str]:
        """``imq.user_repository.ldap.*`` for this directory (users by uid, groups by cn)."""
        p = "imq.user_repository.ldap."
        return [
            "imq.authentication.type=basic",
            "imq.authentication.basic.user_repository=ldap",
            f"{p}server={self.server}",
            f"{p}principal={self.rootdn}",
            f"{p}password={self.rootpw}",
            f"{p}base=ou=people,{self.suffix}",
            f"{p}uidattr=uid",
            f"{p}grpsearch=true",
            f"{p}grpbase=ou=groups,{self.suffix}",
            f"{p}gidattr=cn",
            f"{p}memattr=uniqueMember",
            f"{p}timeout=10",
            *extra,
        ]


def _wait_port(host: str, port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"slapd exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"slapd did not listen on {host}:{port}:\n{log.read_text()}")


@pytest.fixture(scope="session")
def ldap_server() -> Iterator[LdapServer]:
    if not os.path.exists(SLAPD):
        pytest.fail(
            f"slapd is not installed ({SLAPD}): run `make install-dev` (it installs Debian's "
            "slapd and ldap-utils) or `apt-get install slapd ldap-utils`",
            pytrace=False,
        )
    tmp = Path(tempfile.mkdtemp(prefix="imq-ldap-"))
    (tmp / "data").mkdir()
    conf = tmp / "slapd.conf"
    conf.write_text(CONF.format(tmp=tmp, suffix=SUFFIX, rootdn=ROOTDN, rootpw=ROOTPW))
    (tmp / "data.ldif").write_text(LDIF)
    done = subprocess.run(
        [SLAPADD, "-f", str(conf), "-l", str(tmp / "data.ldif")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise RuntimeError(f"slapadd failed:\n{done.stdout}\n{done.stderr}")
    port = free_port()
    log = tmp / "slapd.log"
    with open(log, "wb") as out:
        # -d 0: stay in the foreground (so the fixture owns the process), no debug output.
        proc = subprocess.Popen(
            [SLAPD, "-h", f"ldap://127.0.0.1:{port}/", "-f", str(conf), "-d", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_port("127.0.0.1", port, proc, log)
        yield LdapServer("127.0.0.1", port, SUFFIX, ROOTDN, ROOTPW, USERS)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
