"""``manage.py imqimport``: a stock OpenMQ instance moved to ours, checked with the stock
Java client.

The stock broker (``../shared/realbroker``) makes its instance directory; the stock tools
change it as an OpenMQ administrator would: ``imqusermgr add`` (a user), ``imqusermgr
encode`` (the passfile holding the keystore password), ``imqcmd create dst`` (a queue with
attributes) and ``imqcmd update bkr`` (a property), the JDK's keytool (the JKS keystore of
its ssljms service), a rule and a property written by hand; a stock JMS application
leaves messages in a queue and an inactive durable subscription.  Then ``imqimport
config`` into a fresh instance of ours, our broker started on it, ``imqimport
destinations`` and ``imqimport drain`` from the running stock broker; the stock Java
client logs in to ours as the imported user (over ssljms too, with the converted key
material), gets the queue's messages with their headers and finds its durable
subscription; the imported rule refuses guest; the report lists what was not taken.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from broker.admintools.actions.destinations import query_destination
from broker.admintools.actions.durables import list_durables
from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import REALBROKER, fresh_sqlite, start_broker, start_stock_broker
from tests.jvmflags import JAVA
from tests.manage_fork import run_manage

from .imqcmd_stock import StockImqcmd, compile_java

USER, PASSWORD = "alice", "alice-secret"
KEYSTORE_PASSWORD = "keystore-secret"
STOCK_JARS = ("imqbroker.jar", "imq.jar", "jakarta.jms-api-3.1.0.jar")
# The stock instance's config.properties as an administrator leaves it: TLS on, its
# keystore and passfile in a directory of its own (the stock default is the installation's
# etc), and two settings this broker has no use for.
STOCK_CONFIG = """\
imq.service.activelist=jms,admin,ssljms
imq.passfile.enabled=true
imq.passfile.dirpath={etc}
imq.keystore.file.dirpath={etc}
imq.jms.threadpool_model=dedicated
imq.jmx.usePlatformMBeanServer=false
"""


def _run(cmd: list[str], what: str, **kw: Any) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout


def stock_tool(main: str, varhome: Path, *args: str) -> str:
    """A stock tool of imqbroker.jar (imqusermgr's UserMgr) on the stock varhome."""
    lib = REALBROKER / "mq" / "lib"
    cp = os.pathsep.join(str(lib / j) for j in STOCK_JARS)
    cmd = [
        *JAVA,
        f"-Dimq.home={REALBROKER / 'mq'}",
        f"-Dimq.varhome={varhome}",
        "-cp",
        cp,
        main,
        *args,
    ]
    return _run(cmd, f"stock {main.rsplit('.', 1)[-1]} {args[0]}")


def prepare_stock_instance(varhome: Path, name: str, etc: Path) -> Path:
    """Before the first start: the instance's config.properties; in ``etc``, the JKS
    keystore (alias imq, an EC key: quicker to make than RSA) and the passfile, encoded by the stock imqusermgr.  The broker
    makes the rest of the instance (etc/passwd, etc/accesscontrol.properties) itself."""
    inst = varhome / "instances" / name
    (inst / "props").mkdir(parents=True)
    etc.mkdir()
    (inst / "props" / "config.properties").write_text(STOCK_CONFIG.format(etc=etc))
    _run(
        [
            "keytool", "-genkeypair", "-alias", "imq", "-keyalg", "EC", "-groupname", "secp256r1",
            "-dname", "CN=localhost", "-validity", "30", "-storetype", "JKS",
            "-keystore", str(etc / "keystore"), "-storepass", KEYSTORE_PASSWORD,
            "-keypass", KEYSTORE_PASSWORD, "-noprompt",
        ],
        "keytool -genkeypair",
    )  # fmt: skip
    plain = etc / "passfile.txt"
    plain.write_text(f"imq.keystore.password={KEYSTORE_PASSWORD}\n")
    usermgr = "com.sun.messaging.jmq.jmsserver.auth.usermgr.UserMgr"
    stock_tool(
        usermgr, varhome, "encode", "-src", str(plain), "-target", str(etc / "passfile"), "-f"
    )
    plain.unlink()
    assert KEYSTORE_PASSWORD not in (etc / "passfile").read_text()
    return inst


def not_taken(lines: list[str]) -> set[tuple[str, str]]:
    """(kind, name) of the report's ``not taken`` lines (outcome, kind, then the name)."""
    return {
        (line[11:24].strip(), line[25:].partition(": ")[0])
        for line in lines
        if line.startswith("not taken")
    }


def imqimport(env: dict[str, str], *args: str) -> str:
    """``manage.py imqimport ARGS``, forked from tests/manage_fork.py's server."""
    done = run_manage(["imqimport", *args], env=env, timeout=300)
    assert done.returncode == 0, (
        f"imqimport {args[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    )
    return done.stdout


def test_stock_instance_imported(tmp_path: Path, java_programs: Any) -> None:
    stock_var = tmp_path / "stock-var"
    inst = prepare_stock_instance(stock_var, "imqbroker", tmp_path / "stock-etc")
    stock = start_stock_broker(tmp_path)
    ours = None
    try:
        # The administrator's changes, with the stock tools.
        usermgr = "com.sun.messaging.jmq.jmsserver.auth.usermgr.UserMgr"
        stock_tool(
            usermgr,
            stock_var,
            "add",
            "-u",
            USER,
            "-p",
            PASSWORD,
            "-g",
            "user",
            "-i",
            "imqbroker",
            "-f",
        )
        # Both commands in one JVM (ImqcmdBatch: the stock BrokerCmd's own steps).
        imqcmd = StockImqcmd(tmp_path / "imqcmd", compile_java(tmp_path / "imqcmd-java"))
        address = f"{stock.host}:{stock.portmapper_port}"
        for r in imqcmd.batch(
            address,
            [
                ["create", "dst", "-t", "q", "-n", "mig.orders", "-o", "maxNumMsgs=5000",
                 "-o", "limitBehavior=REMOVE_OLDEST", "-o", "maxNumActiveConsumers=3"],
                ["update", "bkr", "-o", "imq.message.max_size=20m"],
            ],
        ):  # fmt: skip
            assert r.returncode == 0, str(r)
        with (inst / "etc" / "accesscontrol.properties").open("a") as f:
            f.write("queue.mig.orders.browse.deny.user=guest\nnot.a.rule=1\n")
        filled = java_programs.run("Migrated", stock, "fill", USER, PASSWORD)
        filled.assert_ok(["fill"])

        # A fresh instance of ours: its database, then the configuration, then the broker.
        ours_dir = tmp_path / "ours"
        ours_dir.mkdir()
        fresh_sqlite(ours_dir / "db.sqlite3")
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{ours_dir / 'db.sqlite3'}",
            "IMQ_VARHOME": str(ours_dir / "var"),
        }
        config = imqimport(env, "config", str(inst), "-name", "migrated")
        lines = config.splitlines()
        for expected in (
            f"taken      user          {USER}: group user, password as is",
            "taken      property      imq.message.max_size: 20m",
            "taken      property      imq.service.activelist: jms,admin,ssljms",
            "taken      access rule   queue.mig.orders.browse.deny.user: guest",
        ):
            assert expected in lines, config
        adapted = [x for x in lines if x.startswith("adapted    keystore")]
        assert len(adapted) == 1 and "JKS converted to" in adapted[0], config
        assert {
            ("property", "imq.jms.threadpool_model"),
            ("property", "imq.jmx.usePlatformMBeanServer"),
            ("access rule", "not.a.rule"),
            ("message store", str(inst / "fs370")),
        } <= not_taken(lines), config
        own = ours_dir / "var" / "instances" / "migrated" / "props" / "config.properties"
        assert "imq.message.max_size=20m" in own.read_text()

        ours = start_broker(ours_dir, instance="migrated")
        to = ["--from", address, "-b", f"{ours.host}:{ours.portmapper_port}"]
        dests = imqimport(env, "destinations", *to)
        assert "taken      destination   queue mig.orders: created, " in dests, dests
        assert "adapted    durable       mig-dur (client ID mig-client, topic mig.prices)" in dests
        assert "not taken  messages      durable mig-dur" in dests, dests
        drained = imqimport(env, "drain", *to, "--idle", "2")
        assert "taken      messages      queue mig.orders: 5 moved" in drained, drained

        admin = BrokerAdmin(ours.host, ours.portmapper_port)
        try:
            q = query_destination(admin, "q", "mig.orders")
            durables = list_durables(admin, "mig.prices")
        finally:
            admin.close()
        assert {
            k: q["attributes"][k] for k in ("maxNumMsgs", "limitBehavior", "maxNumActiveConsumers")
        } == {
            "maxNumMsgs": 5000,
            "limitBehavior": "REMOVE_OLDEST",
            "maxNumActiveConsumers": 3,
        }
        assert [(d["client_id"], d["name"], d["selector"]) for d in durables] == [
            ("mig-client", "mig-dur", "region = 'eu'")
        ]

        checked = java_programs.run("Migrated", ours, "check", USER, PASSWORD)
        checked.assert_ok(
            [
                "login_with_stock_password",
                "other_password_refused",
                "queue_messages_moved",
                "durable_subscription_kept",
                "ssljms_login",
                "imported_rule_denies_guest_browse",
            ]
        )
    finally:
        if ours is not None:
            ours.stop()
        stock.stop()
