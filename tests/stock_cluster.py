"""Mixed clusters of stock OpenMQ brokers and ours, inside a private network namespace.

The stock broker refuses a loopback address for a cluster (B3168), so its brokers need
other addresses: :func:`run_scenario` runs ``python -m tests.stock_cluster SCENARIO TMP``
under ``unshare -n`` (a network namespace of its own: nothing it sends can leave it).
There the module brings ``lo`` up, adds 198.18.0.1, 198.18.0.2, ... (the benchmarking
range, 198.18.0.0/15) to it, starts the brokers with ``imq.hostname`` one of them, runs
the scenario's checks and prints one ``ok NAME`` / ``fail NAME: why`` line each (the
house style of tests/interop); every process it started is stopped before it exits.
Our brokers fork from a tests/manage_fork.py server of the scenario process (so they are
in its namespace) on a copy of the test process's migrated database; the stock clients
run many to a JVM (tests/stock_cluster_clients.py).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script under unshare
    sys.path.insert(0, str(ROOT))

from broker import launcher  # noqa: E402
from broker.launcher import (  # noqa: E402
    BrokerProcess,
    StockBrokerProcess,
    read_portmapper,
    start_broker,
    start_stock_broker,
)
from broker.protocol import gpacket as gp  # noqa: E402
from broker.server.clustering import cluster_client_context  # noqa: E402
from tests import manage_fork  # noqa: E402
from tests.interop.imqcmd_stock import BATCH_SOURCE, StockImqcmd  # noqa: E402
from tests.jvmflags import JAVA, STOCK_BROKER_JVM  # noqa: E402
from tests.stock_cluster_clients import (  # noqa: E402
    CLUSTER_SHELL,
    JARS,
    Client,
    ImqcmdSession,
    Shell,
    compile_java,
)

T = TypeVar("T")

# The match properties of a stock broker with default settings (ours sends the same).
STOCK_MATCH = {
    "imq.persist.file.newTxnLog.enabled": "true",
    "imq.useFileLockForLockFile.enabled": "true",
    "imq.autocreate.queue": "true",
    "imq.autocreate.topic": "true",
}


def cluster_port(b: BrokerProcess | StockBrokerProcess) -> int:
    """The broker's cluster port, from its port mapper's ``cluster tcp|ssl CLUSTER`` line."""
    for line in read_portmapper(b.host, b.portmapper_port).decode().splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[0] == "cluster" and parts[2] == "CLUSTER":
            return int(parts[3])
    raise AssertionError(f"no cluster service in the port mapper of {b.host}:{b.portmapper_port}")


# The keystore password of the mixed ssl cluster's one key pair (shared_key_pair).
KEYSTORE_PASSWORD = "mixed-cluster"


def shared_key_pair(tmp: Path) -> Path:
    """One key pair for every broker of a mixed ``imq.cluster.transport=ssl`` cluster, made
    as docs/operators/clusters.md tells the administrator: ours with ``manage.py imqkeytool
    -broker`` (``keystore.pem``, ``keystore.crt``), the stock broker's JKS ``keystore`` from
    the same pair with openssl and keytool, all in one directory (every broker's
    ``imq.keystore.file.dirpath``, see ssl_props)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'keytool.sqlite3'}",
        "IMQ_VARHOME": str(tmp / "keys"),
    }
    passfile = tmp / "keytool.pass"
    passfile.write_text(f"imq.keystore.password={KEYSTORE_PASSWORD}\n")
    pw = f"pass:{KEYSTORE_PASSWORD}"
    keys = tmp / "keys" / "instances" / "keys" / "etc"
    steps = [
        [sys.executable, "manage.py", "imqkeytool", "-broker", "-name", "keys"]
        + ["-dname", "CN=mqcluster", "-passfile", str(passfile)],
        ["openssl", "pkcs12", "-export", "-in", str(keys / "keystore.pem"), "-passin", pw]
        + ["-name", "imq", "-out", str(keys / "keystore.p12"), "-passout", pw],
        ["keytool", "-importkeystore", "-noprompt", "-srckeystore", str(keys / "keystore.p12")]
        + ["-srcstoretype", "PKCS12", "-srcstorepass", KEYSTORE_PASSWORD]
        + ["-destkeystore", str(keys / "keystore"), "-deststoretype", "JKS"]
        + ["-deststorepass", KEYSTORE_PASSWORD, "-destkeypass", KEYSTORE_PASSWORD],
    ]
    for cmd in steps:
        if cmd[1] == "manage.py":  # forked from the preloaded server (tests/manage_fork.py)
            r = manage_fork.run_manage(cmd[2:], env=env, timeout=120)
        else:
            r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{cmd[0]}: {r.stdout}{r.stderr}"
    return keys


def ssl_props(keys: Path) -> tuple[str, ...]:
    """What a broker, ours or stock, needs for the ssl cluster transport with those keys."""
    return (
        "imq.cluster.transport=ssl",
        f"imq.keystore.file.dirpath={keys}",
        f"imq.keystore.password={KEYSTORE_PASSWORD}",
    )


NETWORK = ipaddress.ip_network("198.18.0.0/15")


def address(n: int) -> str:
    """The n-th broker's address (1-based) in the benchmarking range."""
    addr = NETWORK.network_address + n
    assert addr in NETWORK
    return str(addr)


def missing_tools() -> list[str]:
    """What running a namespace scenario needs and this machine lacks."""
    import shutil

    out = [t for t in ("unshare", "ip", "java", "javac") if shutil.which(t) is None]
    out += [f"the stock Java client jar {j}" for j in JARS if not j.is_file()]
    if os.geteuid() != 0:
        out.append("root (unshare -n needs it)")
    return out


def assert_scenario(tmp: Path, scenario: str, expected: list[str]) -> None:
    """A test's whole body: run ``scenario`` and require ``ok NAME`` for each expected
    check, in order, and nothing else; fail (never skip) naming what the machine lacks."""
    import pytest

    from broker.launcher import missing_stock_broker

    lacking = missing_stock_broker() + missing_tools()
    if lacking:
        pytest.fail("the mixed-cluster test cannot run; missing: " + "; ".join(lacking))
    lines = run_scenario(tmp, scenario)
    results = [ln for ln in lines if ln.startswith(("ok ", "fail "))]
    assert results == [f"ok {name}" for name in expected], "\n".join(lines[-200:])


def run_scenario(tmp: Path, scenario: str, timeout: float = 600) -> list[str]:
    """Run a scenario in a fresh network namespace; its output lines."""
    missing = missing_tools()
    if missing:
        raise RuntimeError("cannot make a network namespace; missing: " + ", ".join(missing))
    cmd = ["unshare", "-n", sys.executable, "-m", "tests.stock_cluster", scenario, str(tmp)]
    # The migrated SQLite database this test process copies for each broker of ours (made
    # once a process: a `manage.py migrate` costs seconds of CPU), for the scenario's too.
    env = {**os.environ, MIGRATED_SQLITE: str(launcher.migrated_sqlite())}
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\nfail timeout: the scenario ran over {timeout:g} s\n"
    (tmp / f"{scenario}-output.txt").write_text(out)
    return out.splitlines()


# -- inside the namespace ------------------------------------------------------------------


def _setup_namespace(n: int) -> None:
    # /sys/class/net still shows the namespace sysfs was mounted in: ask the kernel.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True)
    nics = sorted(line.split(":")[1].strip() for line in links.stdout.splitlines())
    if nics != ["lo"]:
        raise SystemExit(f"not in a fresh network namespace (interfaces {nics}): refusing")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for i in range(1, n + 1):
        subprocess.run(["ip", "addr", "add", f"{address(i)}/32", "dev", "lo"], check=True)


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out ({timeout:g} s) waiting for {what}")


class Scenario:
    """Starts brokers and stock clients, records check results, stops everything at the
    end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[BrokerProcess | StockBrokerProcess] = []
        self.failed = 0
        self.classes = tmp / "java"
        self.shells: list[Shell] = []
        self.imqcmds: list[ImqcmdSession] = []
        self._pool = ThreadPoolExecutor(max_workers=8)
        self.started = time.monotonic()

    def background(self, fn: Callable[[], T]) -> Future[T]:
        """``fn`` on a thread, meanwhile (a broker's start, a javac run): its future."""
        return self._pool.submit(fn)

    def together(self, *fns: Callable[[], T]) -> list[T]:
        """``fns`` side by side (brokers whose order of start the scenario leaves open);
        their results, in order."""
        if not fns:
            return []
        with ThreadPoolExecutor(max_workers=len(fns)) as pool:  # never waits on the other's
            futures = [pool.submit(fn) for fn in fns]
            return [f.result() for f in futures]

    def java(
        self, sources: dict[str, str], files: tuple[Path, ...] = (), shell: bool = True
    ) -> Path:
        """The scenario's Java (``sources``, ``files`` and, with ``shell``, ClusterShell)
        in one javac run."""
        if shell:
            sources = {"ClusterShell": CLUSTER_SHELL, **sources}
        return compile_java(self.classes, sources, files)

    def shell(self) -> Shell:
        """A ClusterShell JVM of stock clients (stopped with the scenario)."""
        shell = Shell(self.classes)
        self.shells.append(shell)
        return shell

    def imqcmd(self) -> ImqcmdSession:
        """The stock imqcmd in one JVM (ImqcmdBatch among ``sources`` of :meth:`java`)."""
        session = ImqcmdSession(self.tmp, self.classes)
        self.imqcmds.append(session)
        return session

    def check(self, name: str, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:  # one line per check, whatever went wrong
            self.failed += 1
            why = str(exc).replace("\n", " | ")[:2000]
            print(f"fail {name}: {why}", flush=True)
            traceback.print_exc(file=sys.stdout)
        else:
            print(f"ok {name}", flush=True)
        print(f"# {self.progress()}", flush=True)

    def progress(self) -> str:
        """Seconds since the start, and CPU seconds of this process and every process
        under it, ended or running (where a scenario's time goes: a line after each
        check)."""
        tick = os.sysconf("SC_CLK_TCK")
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            parent[pid] = int(fields[1])
            # utime, stime, and the children's it waited for
            cpu[pid] = sum(int(x) for x in fields[11:15]) / tick
        me, total = os.getpid(), 0.0
        for pid, seconds in cpu.items():
            p = pid
            while p > 1 and p != me:
                p = parent.get(p, 0)
            if p == me:
                total += seconds
        return f"{time.monotonic() - self.started:.1f} s, {total:.1f} s CPU"

    def stock(self, n: int, pm: int, brokerlist: str, name: str, *props: str) -> StockBrokerProcess:
        b = start_stock_broker(
            self.tmp / name,
            f"imq.cluster.brokerlist={brokerlist}",
            *props,
            instance=name,
            portmapper_port=pm,
            host=address(n),
        )
        self.procs.append(b)
        print(f"# {name} serving: {self.progress()}", flush=True)
        return b

    def ours(self, n: int, pm: int, brokerlist: str, name: str, *props: str) -> BrokerProcess:
        (self.tmp / name).mkdir(parents=True, exist_ok=True)
        b = start_broker(
            self.tmp / name,
            f"imq.cluster.brokerlist={brokerlist}",
            *props,
            instance=name,
            portmapper_port=pm,
            host=address(n),
        )
        self.procs.append(b)
        print(f"# {name} serving: {self.progress()}", flush=True)
        return b

    def stop_all(self) -> None:
        """Stock clients first, then every broker still running, side by side."""
        for shell in self.shells:
            shell.stop()
        for session in self.imqcmds:
            session.close()

        def stop(p: BrokerProcess | StockBrokerProcess) -> None:
            try:
                p.stop()
            except Exception:  # noqa: BLE001 - the others still get stopped
                p.proc.kill()

        self.together(*(lambda p=p: stop(p) for p in self.procs if p.proc.poll() is None))
        self._pool.shutdown()


def stock_link_count(b: StockBrokerProcess, instance: str) -> int:
    """Links to ``instance`` the stock broker's console says it established, minus closed."""
    text = b.log_text()
    tag = f"instName={instance}&"
    up = sum(1 for line in text.splitlines() if "[B1071]" in line and tag in line)
    down = sum(1 for line in text.splitlines() if "[B1072]" in line and tag in line)
    return up - down


def our_link_count(b: BrokerProcess) -> int:
    text = b.log_text()
    return (
        text.count(" up (dialled)")
        + text.count(" up (accepted)")
        - text.count(" lost: ")
        - text.count("left the cluster")
    )


def many_hops(dest: str, src_host: str, src_pm: int, dst_host: str, dst_pm: int, n: int) -> None:
    """``n`` messages produced on one broker, consumed on the other (our Python client on
    both sides, fast enough to fill a window): each arrives once."""
    import asyncio

    from openmq_client import Queue, TextMessage, connect

    async def go() -> None:
        cconn = await connect(dst_host, dst_pm)
        pconn = await connect(src_host, src_pm)
        try:
            # The producer first: a stock broker that auto-creates the queue for a local
            # producer while a remote interest in it arrives drops the interest ("B4063 the
            # destination already exists (NEW_INTEREST)", its own race; two stock brokers
            # meet it too), and the consumer would never get a message.
            producer = await (await pconn.create_session()).create_producer(Queue(dest))
            consumer = await (await cconn.create_session()).create_consumer(Queue(dest))
            await cconn.start()
            await producer.send(TextMessage("first"))
            first = await consumer.receive(30)  # the interest has reached the producer's broker
            assert first is not None and first.text == "first", first
            for i in range(n):
                await producer.send(TextMessage(str(i)))
            got = []
            while len(got) < n:
                m = await consumer.receive(30)
                assert m is not None, f"{len(got)} of {n} arrived, then nothing for 30 s"
                got.append(int(m.text or ""))
            assert sorted(got) == list(range(n)), "lost or doubled messages"
        finally:
            await pconn.close()
            await cconn.close()

    asyncio.run(go())


def _no_refused_acks(b: StockBrokerProcess) -> None:
    log = (b.varhome / "instances" / b.instance / "log" / "log.txt").read_text(errors="replace")
    assert "B2136" not in log, log[log.index("B2136") - 200 :][:3000]


def scenario_handshake(sc: Scenario) -> None:
    """One stock broker and one of ours: the link comes up with either started first,
    stays up across pings, a queue message crosses it both ways, each side's GOODBYE is
    understood by the other, and bad handshakes close only their own link.  The second
    round runs with ``imq.cluster.transport=ssl`` on both, one key pair (shared_key_pair):
    a message crosses the TLS link both ways, and a peer speaking plain TCP is refused."""
    s_pm, o_pm = 27676, 27677
    brokerlist = f"{address(1)}:{s_pm},{address(2)}:{o_pm}"
    ping = "imq.cluster.ping.interval=2"
    # Made meanwhile: the Java of both rounds, the key pair of the TLS round.
    java = sc.background(lambda: sc.java({"TxnTool": TXN_TOOL}))
    keys_made = sc.background(lambda: shared_key_pair(sc.tmp))

    # Round 1: the stock broker first.
    stock = sc.stock(1, s_pm, brokerlist, "stock1")
    ours = sc.ours(2, o_pm, brokerlist, "ours", ping)
    sc.check(
        "stock_first_link_up_on_ours",
        lambda: wait_for(lambda: our_link_count(ours) == 1, 60, "our link up"),
    )
    sc.check(
        "stock_first_link_up_on_stock",
        lambda: wait_for(lambda: stock_link_count(stock, "ours") == 1, 60, "stock B1071"),
    )
    linked_at = time.monotonic()

    def stays_up() -> None:
        # Four of our ping intervals since the link came up, pings and their replies
        # crossing among the messages of the checks before (which take longer: only on a
        # fast machine is the rest waited for).
        time.sleep(max(0.0, linked_at + 8 - time.monotonic()))
        assert our_link_count(ours) == 1, ours.log_text()[-3000:]
        assert stock_link_count(stock, "ours") == 1, stock.log_text()[-3000:]

    # A queue message produced on one broker, consumed on the other, both ways (the
    # consumer waits first, so the message crosses the link to it).
    java.result()
    shell = sc.shell()

    def hop(dest: str, src_host: str, src_pm: int, dst_host: str, dst_pm: int) -> None:
        recv = shell.start("qrecv", dst_host, dst_pm, dest, "30000")
        # The consumer's interest reaches the other broker (ours or the stock one: the
        # current round's, whichever listens at src_host).
        src = ours if src_host == ours.host else stock
        on_queue = lambda b: consumer_count(b, dest, queue=True)  # noqa: E731
        wait_counts(f"the consumer of {dest}", on_queue, 1, src)
        assert shell.run("qsend", src_host, src_pm, dest, f"via {dest}") == ["sent"]
        out = recv.wait_line(("got", "none"))
        assert out == f"got via {dest}", out

    sc.check(
        "queue_message_stock_to_ours",
        lambda: hop("mixed.q1", address(1), s_pm, address(2), o_pm),
    )
    sc.check(
        "queue_message_ours_to_stock",
        lambda: hop("mixed.q2", address(2), o_pm, address(1), s_pm),
    )

    # More messages than a consumer's window, both ways: the home broker goes on only
    # when the other acknowledges each message as it expects (OpenMQ: one message a
    # G_MESSAGE_ACK, naming its session; ACK_DELIVERED for a D=true message).
    sc.check(
        "queue_beyond_the_window_stock_to_ours",
        lambda: many_hops("mixed.w1", address(1), s_pm, address(2), o_pm, 2500),
    )
    sc.check(
        "queue_beyond_the_window_ours_to_stock",
        lambda: many_hops("mixed.w2", address(2), o_pm, address(1), s_pm, 2500),
    )
    transactions_across(sc, stock, ours)
    sc.check("link_stays_up", stays_up)
    sc.check(
        "stock_refused_no_acknowledgement",
        lambda: _no_refused_acks(stock),
    )

    def list_bkr() -> None:
        r = StockImqcmd(sc.tmp).run(f"{address(1)}:{s_pm}", "list", "bkr")
        assert r.returncode == 0, str(r)
        assert f"{address(2)}:{o_pm}" in r.output, str(r)
        assert f"{address(1)}:{s_pm}" in r.output, str(r)

    sc.check("stock_imqcmd_list_bkr_lists_ours", list_bkr)

    def ours_leaves() -> None:
        ours.stop()
        wait_for(lambda: stock_link_count(stock, "ours") == 0, 30, "stock B1072 after GOODBYE")
        assert "dropped" not in ours.log_text(), ours.log_text()[-3000:]

    sc.check("our_goodbye_closes_the_stock_link", ours_leaves)
    stock.stop()

    # Round 2, over TLS (imq.cluster.transport=ssl): ours first, then the stock broker,
    # which dials (a stock broker dials every peer; ours only those of a higher port).
    keys = keys_made.result()
    tls = ssl_props(keys)
    ours = sc.ours(2, o_pm, brokerlist, "ours2", ping, *tls)
    stock = sc.stock(1, s_pm, brokerlist, "stock2", *tls)
    sc.check(
        "ours_first_link_up_on_ours",
        lambda: wait_for(lambda: our_link_count(ours) == 1, 60, "our link up"),
    )
    sc.check(
        "ours_first_link_up_on_stock",
        lambda: wait_for(lambda: stock_link_count(stock, "ours2") == 1, 60, "stock B1071"),
    )
    _over_tls(sc, stock, ours, keys, hop)

    def stock_leaves() -> None:
        stock.stop()
        wait_for(lambda: "left the cluster (GOODBYE)" in ours.log_text(), 30, "GOODBYE heard")
        assert "dropped" not in ours.log_text(), ours.log_text()[-3000:]

    sc.check("stock_goodbye_heard_by_ours", stock_leaves)

    # Bad handshakes from a peer claiming the stock broker's place: each link is closed
    # with its reason logged once, and the real stock broker links again afterwards.
    init = gp.LinkInit(
        gp.CLUSTER_VERSION, address(1), "stock3", s_pm, match=dict(STOCK_MATCH), session_uid=7
    ).encode()
    bad = {
        "truncated_link_init": (
            gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init[:12])),
            "bad LINK_INIT: ",
        ),
        "broker_info_not_deserialisable": (
            gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init))
            + gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, b"\xac\xed\x00\x05junk")),
            "BROKER_INFO body does not deserialise",
        ),
    }
    for name, (payload, reason) in bad.items():

        def refused(payload: bytes = payload, reason: str = reason) -> None:
            port = cluster_port(ours)
            context = cluster_client_context(keys / "keystore.crt")
            with socket.create_connection((ours.host, port), timeout=10) as raw:
                with context.wrap_socket(raw) as s:
                    s.sendall(payload)
                    s.settimeout(10)
                    while s.recv(65536):  # its own LINK_INIT and BROKER_INFO, then EOF
                        pass
            wait_for(lambda: reason in ours.log_text(), 10, reason)
            time.sleep(0.5)
            assert ours.log_text().count(reason) == 1, ours.log_text()[-3000:]
            assert ours.proc.poll() is None

        sc.check(f"bad_handshake_{name}_closes_the_link", refused)

    stock = sc.stock(1, s_pm, brokerlist, "stock3", *tls)
    sc.check(
        "stock_links_again_after_bad_input",
        lambda: wait_for(lambda: stock_link_count(stock, "ours2") == 1, 60, "stock B1071"),
    )


def _over_tls(
    sc: Scenario,
    stock: StockBrokerProcess,
    ours: BrokerProcess,
    keys: Path,
    hop: Callable[[str, str, int, str, int], None],
) -> None:
    """The checks of the handshake scenario's TLS round, the link up."""

    def stock_presents_the_pair() -> None:
        # What our dialling side would check (ours dials a stock broker of higher port):
        # the stock broker's listener shows the certificate of our key pair.
        context = cluster_client_context(keys / "keystore.crt")
        with socket.create_connection((stock.host, cluster_port(stock)), timeout=10) as raw:
            with context.wrap_socket(raw) as s:
                der = s.getpeercert(binary_form=True)
        assert der == ssl.PEM_cert_to_DER_cert((keys / "keystore.crt").read_text())

    sc.check("ssl_stock_presents_the_shared_certificate", stock_presents_the_pair)
    s_pm, o_pm = stock.portmapper_port, ours.portmapper_port
    sc.check(
        "ssl_queue_message_stock_to_ours",
        lambda: hop("mixed.tls1", stock.host, s_pm, ours.host, o_pm),
    )
    sc.check(
        "ssl_queue_message_ours_to_stock",
        lambda: hop("mixed.tls2", ours.host, o_pm, stock.host, s_pm),
    )

    def plain_tcp_refused() -> None:
        # From ours' own address: the stock broker dials from its own.
        said = f"service cluster: TLS handshake with {ours.host}:"
        init = gp.LinkInit(
            gp.CLUSTER_VERSION, stock.host, "plain", s_pm, match=dict(STOCK_MATCH), session_uid=9
        )
        with socket.create_connection((ours.host, cluster_port(ours)), timeout=10) as s:
            s.sendall(gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode())))
            s.settimeout(10)
            try:
                while s.recv(65536):  # a TLS alert at most, then EOF
                    pass
            except ConnectionResetError:
                pass
        wait_for(lambda: said in ours.log_text(), 10, said)
        time.sleep(0.5)
        lines = [ln for ln in ours.log_text().splitlines() if said in ln]
        assert len(lines) == 1, lines
        assert our_link_count(ours) == 1, ours.log_text()[-3000:]

    sc.check("ssl_plain_tcp_peer_refused_and_logged", plain_tcp_refused)


# -- transactions across the link (scenario "handshake", while both brokers are up) --------

TXN_TOOL = r"""
import jakarta.jms.*;
import java.io.*;
import java.util.*;

/** TxnTool HOST_A PORT_A NAME_A HOST_B PORT_B NAME_B QPREFIX, with the stock client
 *  (once its consumers are made it says "consumers ready" and reads a line: the caller
 *  sees their interests reach the home brokers first): queue messages homed on one
 *  broker consumed on the other, both ways, by a
 *  transacted session (commit; rollback then commit), a CLIENT_ACKNOWLEDGE session
 *  (recover then acknowledge) and an XASession (XA start/end/prepare/commit; start/end/
 *  rollback, then again to a commit); prints one "ok NAME" / "fail NAME: why" line each,
 *  then "ok txn_none_again" unless a message came again after its commit or
 *  acknowledgement (on the consumer's session, or on either broker once the consumers
 *  closed). */
public class TxnTool {
    static final int N = 2;
    static final String[] MODES = {"commit", "rollback", "recover", "xacommit", "xarollback"};

    /** A transaction branch's name, as a transaction manager would make it. */
    static class TestXid implements javax.transaction.xa.Xid {
        final byte[] gtrid;
        final byte[] bqual = {1};

        TestXid(String name) {
            gtrid = (name + "-" + System.nanoTime()).getBytes();
        }

        public int getFormatId() { return 0x4d51; }
        public byte[] getGlobalTransactionId() { return gtrid; }
        public byte[] getBranchQualifier() { return bqual; }
    }

    static XAConnection connectXA(String host, String port) throws JMSException {
        com.sun.messaging.XAConnectionFactory cf = new com.sun.messaging.XAConnectionFactory();
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList,
                "mq://" + host + ":" + port + "/jms");
        XAConnection c = cf.createXAConnection("guest", "guest");
        c.start();
        return c;
    }

    /** One XA transaction branch around receiving queue q's N messages: committed in two
     *  phases, or rolled back (then the caller takes them again). */
    static boolean xaTake(javax.transaction.xa.XAResource xa, MessageConsumer mc, String q,
            boolean redelivered, boolean commit, List<String> why) throws Exception {
        javax.transaction.xa.Xid xid = new TestXid(q);
        xa.start(xid, javax.transaction.xa.XAResource.TMNOFLAGS);
        Message last = take(mc, q, redelivered, why);
        xa.end(xid, last != null ? javax.transaction.xa.XAResource.TMSUCCESS
                : javax.transaction.xa.XAResource.TMFAIL);
        if (last == null || !commit) {
            xa.rollback(xid);
            return last != null;
        }
        int vote = xa.prepare(xid);
        if (vote != javax.transaction.xa.XAResource.XA_OK) {
            why.add("prepare voted " + vote);
            return false;
        }
        xa.commit(xid, false);
        return true;
    }

    static Connection connect(String host, String port) throws JMSException {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList,
                "mq://" + host + ":" + port + "/jms");
        Connection c = cf.createConnection("guest", "guest");
        c.start();
        return c;
    }

    /** The N messages of queue q, each with JMSRedelivered as given; null if not. */
    static Message take(MessageConsumer mc, String q, boolean redelivered, List<String> why)
            throws JMSException {
        Message last = null;
        for (int i = 0; i < N; i++) {
            Message m = mc.receive(30000);
            if (m == null) {
                why.add("message " + i + " of " + N + " did not come in 30 s");
                return null;
            }
            String t = ((TextMessage) m).getText();
            if (!t.equals(q + "-" + i) || m.getJMSRedelivered() != redelivered) {
                why.add("got " + t + " JMSRedelivered=" + m.getJMSRedelivered()
                        + ", not " + q + "-" + i + " JMSRedelivered=" + redelivered);
                return null;
            }
            last = m;
        }
        return last;
    }

    public static void main(String[] a) throws Exception {
        String[][] brokers = {{a[0], a[1], a[2]}, {a[3], a[4], a[5]}};
        String prefix = a[6];
        Connection[] cons = {connect(a[0], a[1]), connect(a[3], a[4])};
        XAConnection[] xcons = {connectXA(a[0], a[1]), connectXA(a[3], a[4])};
        Map<String, javax.transaction.xa.XAResource> xas = new LinkedHashMap<>();
        // Direction d: messages produced (homed) on broker d, consumed on broker 1-d.
        Map<String, Session> sessions = new LinkedHashMap<>();
        Map<String, MessageConsumer> consumers = new LinkedHashMap<>();
        Map<String, String> names = new LinkedHashMap<>();
        for (int d = 0; d < 2; d++) {
            for (String mode : MODES) {
                String q = prefix + "." + brokers[d][2] + "." + mode;
                Session s;
                if (mode.startsWith("xa")) {
                    XASession xs = xcons[1 - d].createXASession();
                    xas.put(q, xs.getXAResource());
                    s = xs.getSession();
                } else {
                    s = mode.equals("recover")
                            ? cons[1 - d].createSession(false, Session.CLIENT_ACKNOWLEDGE)
                            : cons[1 - d].createSession(true, Session.SESSION_TRANSACTED);
                }
                sessions.put(q, s);
                consumers.put(q, s.createConsumer(s.createQueue(q)));
                String kind = mode.startsWith("xa") ? "xa_" + mode.substring(2) : "txn_" + mode;
                names.put(q, kind + "_" + brokers[d][2] + "_to_" + brokers[1 - d][2]);
            }
        }
        System.out.println("consumers ready");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        for (int d = 0; d < 2; d++) {
            Session ps = cons[d].createSession(false, Session.AUTO_ACKNOWLEDGE);
            for (String mode : MODES) {
                String q = prefix + "." + brokers[d][2] + "." + mode;
                MessageProducer p = ps.createProducer(ps.createQueue(q));
                for (int i = 0; i < N; i++) p.send(ps.createTextMessage(q + "-" + i));
            }
            ps.close();
        }
        for (String q : consumers.keySet()) {
            Session s = sessions.get(q);
            MessageConsumer mc = consumers.get(q);
            List<String> why = new ArrayList<>();
            try {
                javax.transaction.xa.XAResource xa = xas.get(q);
                if (xa != null) {
                    // xacommit: one branch, committed; xarollback: one rolled back, then
                    // the same messages, redelivered, in one committed.
                    boolean commit = q.endsWith(".xacommit");
                    if (xaTake(xa, mc, q, false, commit, why) && !commit) {
                        xaTake(xa, mc, q, true, true, why);
                    }
                    System.out.println(why.isEmpty() ? "ok " + names.get(q)
                            : "fail " + names.get(q) + ": " + String.join("; ", why));
                    continue;
                }
                Message last = take(mc, q, false, why);
                if (last != null && q.endsWith(".commit")) {
                    s.commit();
                } else if (last != null && q.endsWith(".rollback")) {
                    s.rollback();
                    if (take(mc, q, true, why) != null) s.commit();
                } else if (last != null) {
                    s.recover();
                    last = take(mc, q, true, why);
                    if (last != null) last.acknowledge();
                }
            } catch (Exception e) {
                why.add(e.toString());
            }
            System.out.println(why.isEmpty() ? "ok " + names.get(q)
                    : "fail " + names.get(q) + ": " + String.join("; ", why));
        }
        // Nothing committed or acknowledged comes again: not to the consumers that had
        // it, nor, once they are closed, to a consumer on either broker.
        List<String> again = new ArrayList<>();
        Thread.sleep(1500);
        for (String q : consumers.keySet()) {
            Message m = consumers.get(q).receiveNoWait();
            if (m != null) again.add(((TextMessage) m).getText() + " to its consumer");
        }
        for (Connection c : cons) c.close();
        for (Connection c : xcons) c.close();
        List<Connection> checks = new ArrayList<>();
        for (String[] b : brokers) {
            Connection c = connect(b[0], b[1]);
            checks.add(c);
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            for (String q : consumers.keySet()) {
                s.createConsumer(s.createQueue(q)).setMessageListener(m -> {
                    try {
                        synchronized (again) {
                            again.add(((TextMessage) m).getText() + " on " + b[2]);
                        }
                    } catch (JMSException e) {
                        synchronized (again) { again.add(e.toString()); }
                    }
                });
            }
        }
        Thread.sleep(2500);
        for (Connection c : checks) c.close();
        synchronized (again) {
            System.out.println(again.isEmpty() ? "ok txn_none_again"
                    : "fail txn_none_again: " + again);
        }
    }
}
"""

# TxnTool's checks, in the order it prints them (for a stock broker "stock" and ours).
TXN_CHECKS = [
    f"{mode}_{home}_to_{other}"
    for home, other in (("stock", "ours"), ("ours", "stock"))
    for mode in ("txn_commit", "txn_rollback", "txn_recover", "xa_commit", "xa_rollback")
] + ["txn_none_again"]


def transactions_across(sc: Scenario, stock: StockBrokerProcess, ours: BrokerProcess) -> None:
    """Queue messages homed on one broker, consumed on the other in a transacted session
    (commit; rollback, then commit), a CLIENT_ACKNOWLEDGE one (recover, then acknowledge)
    and an XASession (XA prepare and commit; rollback, then prepare and commit), both
    ways, with the stock client: each message is received once, again only after the
    rollback or recover and then with JMSRedelivered, and never after its commit or
    acknowledgement (TXN_CHECKS, one line each)."""
    cp = ":".join(str(j) for j in (sc.classes, *JARS))
    started = time.monotonic()
    args = [stock.host, stock.portmapper_port, "stock", ours.host, ours.portmapper_port, "ours"]
    tool = subprocess.Popen(
        [*JAVA, "-cp", cp, "TxnTool", *map(str, args), "txn"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tool.stdin is not None and tool.stdout is not None
    lines: list[str] = []
    try:
        # Its consumers made: each queue's consumer counted on the queue's home broker.
        while (line := tool.stdout.readline()) and line.strip() != "consumers ready":
            lines.append(line.rstrip("\n"))
        if line:
            for home, name in ((stock, "stock"), (ours, "ours")):
                for mode in ("commit", "rollback", "recover", "xacommit", "xarollback"):
                    queue = f"txn.{name}.{mode}"
                    on_queue = lambda b, q=queue: consumer_count(b, q, queue=True)  # noqa: E731
                    wait_counts(f"the consumer of {queue}", on_queue, 1, home)
            tool.stdin.write("go\n")
        rest, err = tool.communicate(timeout=240)  # flushes and closes its stdin
        lines += rest.splitlines()
        trouble = ("\n".join(lines) + err)[-3000:]
    except Exception as exc:  # each check below says it, with what the tool printed
        tool.kill()
        tool.communicate()
        trouble = f"TxnTool: {exc}; {lines!r}"
        lines = []
    print(f"TxnTool took {time.monotonic() - started:.1f} s", flush=True)
    for name in TXN_CHECKS:

        def check(name: str = name) -> None:
            mine = [ln for ln in lines if ln.split(":")[0].split(" ")[-1] == name]
            assert mine == [f"ok {name}"], mine or trouble

        sc.check(name, check)


# -- the master broker and administered configuration (scenario "master") ------------------


class Admin:
    """The stock imqcmd (its commands in one JVM) and durable subscriptions made with the
    stock client (a ClusterShell), against the brokers of a scenario whose Java
    (:meth:`Scenario.java`) includes ImqcmdBatch."""

    def __init__(self, sc: Scenario) -> None:
        self.imqcmd = sc.imqcmd()
        self.shell = sc.shell()

    def run(self, b: BrokerProcess | StockBrokerProcess, *args: str) -> str:
        r = self.imqcmd.run(f"{b.host}:{b.portmapper_port}", *args)
        assert r.returncode == 0, str(r)
        return r.output

    def destinations(self, b: BrokerProcess | StockBrokerProcess) -> set[str]:
        """The destination names ``imqcmd list dst`` shows on ``b``."""
        out = self.run(b, "list", "dst")
        names = set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[1] in ("Queue", "Topic"):
                names.add(parts[0])
        return names

    def durables(self, b: BrokerProcess | StockBrokerProcess, topic: str) -> str:
        return self.run(b, "list", "dur", "-d", topic)

    def subscribe(
        self, b: BrokerProcess | StockBrokerProcess, topic: str, cid: str, name: str
    ) -> str:
        """A durable subscription made (and left inactive) through ``b``: "subscribed", or
        what went wrong."""
        lines = self.shell.run("dsub", b.host, b.portmapper_port, cid, topic, name, timeout=120)
        return "\n".join(lines)


def our_imqcmd_list_bkr(b: BrokerProcess) -> str:
    """Our own ``manage.py imqcmd list bkr`` against ``b``."""
    cmd = [sys.executable, "manage.py", "imqcmd", "list", "bkr"]
    cmd += ["-b", f"{b.host}:{b.portmapper_port}", "-u", "admin", "-f"]
    passfile = b.varhome.parent / "imqcmd-passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    cmd += ["-passfile", str(passfile)]
    p = manage_fork.run_manage(cmd[2:], env=b.extra["env"], timeout=90, input="")
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def bkr_rows(output: str) -> dict[str, str]:
    """address -> state, from a ``list bkr`` table (either imqcmd's)."""
    rows = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].count(".") == 3 and ":" in parts[0]:
            rows[parts[0]] = parts[1]
    return rows


def our_record(b: BrokerProcess) -> list[gp.GPacket]:
    """The entries of our master broker's change record file."""
    files = list(b.varhome.glob("**/cluster/changerecord"))
    assert files, f"no change record under {b.varhome}"
    return gp.split_concatenated(files[0].read_bytes())


def fake_peer(b: BrokerProcess, n: int, pm: int, instance: str, then: bytes) -> None:
    """Link to ``b`` as the broker at address ``n`` (a full handshake), send ``then``, and
    read until ``b`` closes the link."""
    from broker.protocol.brokerinfo import BrokerInfo

    init = gp.LinkInit(
        gp.CLUSTER_VERSION, address(n), instance, pm, match=dict(STOCK_MATCH), session_uid=77
    )
    info = BrokerInfo(address(n), instance, pm, 77, int(time.time() * 1000)).encode()
    port = cluster_port(b)
    up = " up (accepted)"
    before = b.log_text().count(up)
    with socket.create_connection((b.host, port), timeout=10, source_address=(address(n), 0)) as s:
        s.sendall(
            gp.encode_link(gp.LinkPacket(gp.LINK_INIT, init.encode()))
            + gp.encode_link(gp.LinkPacket(gp.LINK_BROKER_INFO, info))
            + gp.encode(gp.GPacket(gp.G_BROKER_INFO_REPLY, {"S": 0}, info))
        )
        # Once the link is up, what follows is a GPacket of an up link.
        wait_for(lambda: b.log_text().count(up) > before, 10, f"{instance}'s link up")
        s.sendall(then)
        s.settimeout(10)
        while s.recv(65536):
            pass


def scenario_master(sc: Scenario) -> None:
    """Administered configuration across a stock broker and ours: destinations made and
    destroyed with the stock imqcmd on either broker are on both; the master broker's
    change record with either broker as master (each first to start); ``imqcmd list bkr``
    on both; bad change-record input closes only its own link."""
    s_pm, o_pm = 27676, 27677
    s_addr, o_addr = f"{address(1)}:{s_pm}", f"{address(2)}:{o_pm}"
    brokerlist = f"{s_addr},{o_addr}"
    java = sc.background(lambda: sc.java({"ImqcmdBatch": BATCH_SOURCE}))
    # Fixed cluster ports, so STOCK_CLUSTER_CAPTURE can record the links (start_capture).
    s_cp, o_cp = f"imq.cluster.port={CAPTURE_PORTS[0]}", f"imq.cluster.port={CAPTURE_PORTS[1]}"

    def linked(stock: StockBrokerProcess, ours: BrokerProcess) -> None:
        wait_for(lambda: our_link_count(ours) == 1, 60, "our link up")
        wait_for(lambda: stock_link_count(stock, ours.instance) == 1, 60, "stock B1071")

    def seen(b: BrokerProcess | StockBrokerProcess, name: str, present: bool = True) -> None:
        def ok() -> bool:
            return (name in adm.destinations(b)) is present

        def listed() -> bool:
            return (name in destination_names(b)) is present

        what = f"{name} {'on' if present else 'gone from'} {b.instance}"
        # Our admin client first (milliseconds a question), then the stock imqcmd the
        # check is made with, once the change is there to be listed.
        wait_for(listed, 20, what)
        wait_for(ok, 20, what)

    def list_bkr_both(stock: StockBrokerProcess, ours: BrokerProcess) -> None:
        for b in (stock, ours):
            rows = bkr_rows(adm.run(b, "list", "bkr"))
            assert rows == {s_addr: "OPERATING", o_addr: "OPERATING"}, (b.instance, rows)
        rows = bkr_rows(our_imqcmd_list_bkr(ours))
        assert set(rows) == {s_addr, o_addr}, rows

    # Round 1: the stock broker is the master and starts first, with a record already.
    master = f"imq.cluster.masterbroker={s_addr}"
    stock = sc.stock(1, s_pm, brokerlist, "smaster", master, s_cp)
    java.result()
    adm = Admin(sc)
    adm.run(stock, "create", "dst", "-t", "q", "-n", "pre.q", "-f")
    sub = adm.subscribe(stock, "pre.t", "cid0", "pre-dur")
    assert sub == "subscribed", sub
    ours = sc.ours(2, o_pm, brokerlist, "ours", master, "imq.cluster.ping.interval=5", o_cp)
    sc.check("stock_master_link_up", lambda: linked(stock, ours))

    def reads_stock_record() -> None:
        wait_for(lambda: "synchronised with master broker" in ours.log_text(), 30, "record read")
        seen(ours, "pre.q")
        assert "pre-dur" in adm.durables(ours, "pre.t")

    sc.check("ours_reads_the_stock_masters_record", reads_stock_record)
    sc.check(
        "dst_created_on_stock_seen_on_ours",
        lambda: (
            adm.run(stock, "create", "dst", "-t", "q", "-n", "s1.q", "-f"),
            seen(ours, "s1.q"),
        ),
    )
    sc.check(
        "dst_created_on_ours_seen_on_stock",
        lambda: (
            adm.run(ours, "create", "dst", "-t", "t", "-n", "o1.t", "-f"),
            seen(stock, "o1.t"),
        ),
    )

    def durable_through_ours() -> None:
        out = adm.subscribe(ours, "o1.t", "cid1", "o1-dur")
        assert out == "subscribed", out
        wait_for(lambda: "o1-dur" in adm.durables(stock, "o1.t"), 20, "o1-dur on stock")
        assert "did not record" not in ours.log_text(), ours.log_text()[-3000:]

    sc.check("durable_made_through_ours_recorded_by_stock_master", durable_through_ours)
    sc.check(
        "dst_destroyed_on_ours_gone_from_stock",
        lambda: (
            adm.run(ours, "destroy", "dst", "-t", "q", "-n", "s1.q", "-f"),
            seen(stock, "s1.q", False),
        ),
    )
    adm.run(stock, "create", "dst", "-t", "q", "-n", "s2.q", "-f")
    seen(ours, "s2.q")
    sc.check(
        "dst_destroyed_on_stock_gone_from_ours",
        lambda: (
            adm.run(stock, "destroy", "dst", "-t", "q", "-n", "s2.q", "-f"),
            seen(ours, "s2.q", False),
        ),
    )
    sc.check("list_bkr_stock_master", lambda: list_bkr_both(stock, ours))

    def fresh_member_gets_ours_changes() -> None:
        # A broker that never saw ours' changes gets them from the stock master's record.
        ours.stop()
        fresh = sc.ours(2, o_pm, brokerlist, "fresh", master, o_cp)
        linked(stock, fresh)
        seen(fresh, "o1.t")
        assert "s1.q" not in adm.destinations(fresh)
        assert "o1-dur" in adm.durables(fresh, "o1.t")
        fresh.stop()

    sc.check("stock_master_recorded_ours_changes", fresh_member_gets_ours_changes)
    stock.stop()

    # Round 2: ours is the master and starts first, with a record already.
    master = f"imq.cluster.masterbroker={o_addr}"
    ours = sc.ours(2, o_pm, brokerlist, "omaster", master, o_cp)
    adm.run(ours, "create", "dst", "-t", "q", "-n", "pre2.q", "-f")
    sub = adm.subscribe(ours, "pre2.t", "cid2", "pre2-dur")
    assert sub == "subscribed", sub
    stock = sc.stock(1, s_pm, brokerlist, "smember", master, s_cp)
    sc.check("ours_master_link_up", lambda: linked(stock, ours))

    def stock_reads_our_record() -> None:
        seen(stock, "pre2.q")
        assert "pre2-dur" in adm.durables(stock, "pre2.t")

    sc.check("stock_reads_our_masters_record", stock_reads_our_record)

    def stock_changes_recorded_with_us() -> None:
        adm.run(stock, "create", "dst", "-t", "q", "-n", "s3.q", "-f")
        seen(ours, "s3.q")
        out = adm.subscribe(stock, "s3.t", "cid3", "s3-dur")
        assert out == "subscribed", out
        names = [(r.name, r.props.get("N")) for r in our_record(ours)]
        assert ("G_UPDATE_DESTINATION", "s3.q") in names, names
        assert ("G_NEW_INTEREST", "s3-dur") in names, names
        assert "s3-dur" in adm.durables(ours, "s3.t")

    sc.check("stock_member_changes_recorded_by_our_master", stock_changes_recorded_with_us)
    sc.check("list_bkr_our_master", lambda: list_bkr_both(stock, ours))
    stock.stop()
    wait_for(lambda: our_link_count(ours) == 0, 30, "stock gone")

    # Bad input in the change-record exchange, from a peer claiming the stock's place.
    bad = {
        "unknown_gpacket_type": (
            gp.encode(gp.GPacket(99, {"X": 1})),
            "unknown GPacket type 99",
        ),
        "change_event_not_deserialisable": (
            gp.encode(gp.GPacket(gp.G_CONFIG_CHANGE_EVENT, {"X": 1}, b"\x01\x5e\x00\x0djunk")),
            "G_CONFIG_CHANGE_EVENT body does not deserialise",
        ),
    }
    for name, (payload, reason) in bad.items():

        def refused(payload: bytes = payload, reason: str = reason) -> None:
            fake_peer(ours, 1, s_pm, "fake", payload)
            wait_for(lambda: reason in ours.log_text(), 10, reason)
            time.sleep(0.5)
            assert ours.log_text().count(reason) == 1, ours.log_text()[-3000:]
            assert ours.proc.poll() is None

        sc.check(f"bad_{name}_closes_the_link", refused)

    stock = sc.stock(1, s_pm, brokerlist, "smember2", master, s_cp)

    def cluster_goes_on() -> None:
        linked(stock, ours)
        seen(stock, "s3.q")

    sc.check("stock_links_again_after_bad_input", cluster_goes_on)


def received_once(cons: list[Client], want: list[str]) -> None:
    """Every one of ``want`` received by exactly one of ``cons`` (a shared subscription's
    consumers), nothing else."""
    receive_all(cons, len(want))
    got = [g for c in cons for g in c.got()]
    split = f"first {sorted(cons[0].got())}, second {sorted(cons[1].got())}"
    assert sorted(got) == sorted(want), split


def receive_all(procs: list[Client], total: int, timeout: float = 60) -> None:
    """Wait until ``procs`` got ``total`` messages between them, then a little longer
    (a duplicate would show), and close them."""
    try:
        wait_for(lambda: sum(len(p.got()) for p in procs) >= total, timeout, f"{total} messages")
        # A duplicate comes in the same delivery pass as the original (milliseconds on
        # the link), so a second more shows it.
        time.sleep(1)
    finally:
        for p in procs:
            p.close()


def start_capture(ports: list[int]) -> subprocess.Popen | None:
    """With STOCK_CLUSTER_CAPTURE=FILE, record the links' packets (tests/vectors_cluster)."""
    out = os.environ.get("STOCK_CLUSTER_CAPTURE")
    if not out:
        return None
    script = ROOT / "tests" / "vectors_cluster" / "capture.py"
    ports_arg = ",".join(str(p) for p in ports)
    return subprocess.Popen([sys.executable, str(script), out, ports_arg, "3600"])


def stop_capture(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


# -- what a broker knows of the consumers, asked over the admin protocol ---------------------
#
# Our admin client speaks to either broker (a stock broker's admin service is the same
# protocol), in a few milliseconds: a check that needs a consumer's interest on the other
# broker before it publishes waits for that broker to count it, instead of a fixed pause.


def admin_ask(b: BrokerProcess | StockBrokerProcess, ask: Callable[[Any], Any]) -> Any:
    """``await ask(admin)`` on a fresh admin connection to ``b`` (user admin)."""
    import asyncio

    from broker.admintools.client import AdminClient

    async def run() -> Any:
        async with await AdminClient.open(b.host, b.portmapper_port, connect_timeout=10) as a:
            return await ask(a)

    return asyncio.run(run())


def consumer_count(b: BrokerProcess | StockBrokerProcess, dest: str, queue: bool = False) -> int:
    """The destination's consumers as ``b`` counts them (imqcmd's "Consumers"), its remote
    ones included: a topic's subscriptions (a durable one also while nobody is on it, a
    shared one once), a queue's consumers; 0 while ``b`` has no such destination."""
    from broker.admintools.client import AdminError
    from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

    async def ask(a: Any) -> int:
        try:
            rows = await a.destinations(dest, DEST_QUEUE if queue else DEST_TOPIC)
        except AdminError:
            return 0
        return sum(int(r.get("nConsumers") or 0) for r in rows if r.get("name") == dest)

    return int(admin_ask(b, ask))


def destination_names(b: BrokerProcess | StockBrokerProcess) -> set[str]:
    """The names of the destinations ``b`` has (GET_DESTINATIONS)."""

    async def ask(a: Any) -> set[str]:
        return {str(r.get("name")) for r in await a.destinations()}

    return set(admin_ask(b, ask))


def subscription_consumers(b: BrokerProcess | StockBrokerProcess, key: str) -> int:
    """Consumers on the shared or durable subscription named (or, unnamed, of client ID)
    ``key`` as ``b`` counts them (GET_DURABLES' activeCount); 0 when ``b`` lists none."""

    async def ask(a: Any) -> int:
        rows = await a.durables()
        return sum(
            int(r.get("activeCount") or 0)
            for r in rows
            if key in (r.get("name"), r.get("clientID"))
        )

    return int(admin_ask(b, ask))


def wait_counts(
    what: str,
    count: Callable[[BrokerProcess | StockBrokerProcess], int],
    want: int,
    *brokers: BrokerProcess | StockBrokerProcess,
    timeout: float = 60,
) -> None:
    """Wait until ``count(b) == want`` on each of ``brokers``; the last counts if not."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [count(b) for b in brokers]
        if all(n == want for n in seen):
            return
        if time.monotonic() > deadline:
            where = ", ".join(f"{b.host} {n}" for b, n in zip(brokers, seen, strict=True))
            raise AssertionError(f"{what}: want {want} on each broker, still {where}")
        time.sleep(0.2)


def scenario_topics(sc: Scenario) -> None:
    """One stock broker and one of ours: topics, durable and shared subscriptions and
    client IDs across the link, with stock Java clients on both brokers."""
    s_pm, o_pm = 27676, 27677
    s_cl, o_cl = CAPTURE_PORTS
    brokerlist = f"{address(1)}:{s_pm},{address(2)}:{o_pm}"
    _topics(sc, s_pm, o_pm, s_cl, o_cl, brokerlist)


def _topics(sc: Scenario, s_pm: int, o_pm: int, s_cl: int, o_cl: int, brokerlist: str) -> None:
    java = sc.background(lambda: sc.java({}))
    # Ours first (forked: about a second), so the stock broker's first dial finds it: one
    # that fails is tried again only 5 s later (BrokerLink.RECONNECT_INTERVAL).
    ours = sc.ours(
        2,
        o_pm,
        brokerlist,
        "ours",
        "imq.cluster.ping.interval=5",
        f"imq.cluster.port={o_cl}",
        *STOMP_ON_OURS,
    )
    stock = sc.stock(1, s_pm, brokerlist, "stock1", f"imq.cluster.port={s_cl}")
    java.result()
    shell = sc.shell()
    wait_for(lambda: our_link_count(ours) == 1, 60, "our link up")
    wait_for(lambda: stock_link_count(stock, "ours") == 1, 60, "stock B1071")
    on_stock = (address(1), s_pm)
    on_ours = (address(2), o_pm)
    both = (stock, ours)
    broker_at = {on_stock: stock, on_ours: ours}

    # 1. A topic with a subscriber on each broker; messages published on each.
    fan: dict[str, list[str]] = {}

    def fanout() -> None:
        subs = {
            "stock": shell.start("sub", *on_stock, "mixed.t1"),
            "ours": shell.start("sub", *on_ours, "mixed.t1"),
        }
        for p in subs.values():
            assert p.wait_line(("ready",)) == "ready", p.lines
        topic_consumers = lambda b: consumer_count(b, "mixed.t1")  # noqa: E731
        wait_counts("subscribers of mixed.t1", topic_consumers, 2, *both)
        for where, (host, pm) in (("s", on_stock), ("o", on_ours)):
            for mode in ("np", "p"):
                sent = shell.run("pub", host, pm, "mixed.t1", mode, f"{where}-{mode}", 2)
                assert sent == ["sent"], sent
        receive_all(list(subs.values()), 16)
        for name, p in subs.items():
            fan[name] = sorted(p.got())

    def reaches_both(where: str) -> Callable[[], None]:
        def check() -> None:
            if not fan:
                fanout()
            want = sorted(f"{where}-{m}-{i}" for m in ("np", "p") for i in (1, 2))
            for name, got in fan.items():
                mine = [g for g in got if g.startswith(f"{where}-")]
                assert mine == want, f"subscriber on {name} got {got}"

        return check

    sc.check("topic_published_on_stock_reaches_subscribers_on_both", reaches_both("s"))
    sc.check("topic_published_on_ours_reaches_subscribers_on_both", reaches_both("o"))

    # 2. Durable subscriptions: made on one broker, fed on the other while away.
    def durable(tag: str, sub: tuple[str, int], pub: tuple[str, int]) -> Callable[[], None]:
        cid, name, topic = f"cid-{tag}", f"dur-{tag}", f"mixed.dt.{tag}"

        def check() -> None:
            assert shell.run("dsub", *sub, cid, topic, name) == ["subscribed"]
            wait_counts(f"the durable on {topic}", lambda b: consumer_count(b, topic), 1, *both)
            assert shell.run("pub", *pub, topic, "p", f"{tag}-p", 3) == ["sent"]
            assert shell.run("pub", *pub, topic, "np", f"{tag}-np", 2) == ["sent"]
            r = shell.start("drecv", *sub, cid, topic, name)
            assert r.wait_line(("ready",)) == "ready", r.lines
            receive_all([r], 5)
            want = sorted([f"{tag}-p-{i}" for i in (1, 2, 3)] + [f"{tag}-np-{i}" for i in (1, 2)])
            assert sorted(r.got()) == want, r.lines
            again = shell.start("drecv", *sub, cid, topic, name)
            assert again.wait_line(("ready",)) == "ready", again.lines
            # What would be delivered again comes with the attach, before "ready" or just
            # after: this covers it with margin.
            time.sleep(1.5)
            again.close()
            assert again.got() == [], f"delivered again: {again.lines}"

        return check

    def unsubscribe(tag: str, sub: tuple[str, int], pub: tuple[str, int]) -> Callable[[], None]:
        cid, name, topic = f"cid-{tag}", f"dur-{tag}", f"mixed.dt.{tag}"

        def check() -> None:
            assert shell.run("unsub", *sub, cid, name) == ["unsubscribed"]
            subscriptions = lambda b: consumer_count(b, topic)  # noqa: E731
            wait_counts(f"no durable on {topic}", subscriptions, 0, *both)
            # Published while no subscription exists: nobody gets it.
            assert shell.run("pub", *pub, topic, "p", f"{tag}-gone", 1) == ["sent"]
            assert shell.run("dsub", *sub, cid, topic, name) == ["subscribed"]
            wait_counts(f"the durable on {topic}", subscriptions, 1, *both)
            assert shell.run("pub", *pub, topic, "p", f"{tag}-fresh", 1) == ["sent"]
            r = shell.start("drecv", *sub, cid, topic, name)
            assert r.wait_line(("ready",)) == "ready", r.lines
            receive_all([r], 1)
            assert r.got() == [f"{tag}-fresh-1"], r.lines
            assert shell.run("unsub", *sub, cid, name) == ["unsubscribed"]

        return check

    sc.check("durable_on_stock_published_on_ours_exactly_once", durable("ds", on_stock, on_ours))
    sc.check("durable_on_ours_published_on_stock_exactly_once", durable("do", on_ours, on_stock))
    sc.check("durable_unsubscribed_on_stock_gone_on_ours", unsubscribe("ds", on_stock, on_ours))
    sc.check("durable_unsubscribed_on_ours_gone_on_stock", unsubscribe("do", on_ours, on_stock))

    # 3. JMS 2.0 shared subscriptions with a consumer on each broker.
    def shared(kind: str) -> Callable[[], None]:
        topic, subname = f"mixed.sh.{kind}", f"share-{kind}"
        mode = "p" if kind == "durable" else "np"

        def check() -> None:
            cons = [
                shell.start("shared", *on_stock, topic, subname, kind),
                shell.start("shared", *on_ours, topic, subname, kind),
            ]
            for c in cons:
                assert c.wait_line(("ready",)) == "ready", c.lines
            on_sub = lambda b: subscription_consumers(b, subname)  # noqa: E731
            wait_counts(f"the consumers of {subname}", on_sub, 2, *both)
            assert shell.run("pub", *on_stock, topic, mode, "s", 10) == ["sent"]
            assert shell.run("pub", *on_ours, topic, mode, "o", 10) == ["sent"]
            received_once(cons, [f"{w}-{i}" for w in "so" for i in range(1, 11)])

        return check

    sc.check("shared_nondurable_each_message_consumed_once", shared("nondurable"))
    sc.check("shared_durable_each_message_consumed_once", shared("durable"))

    # 4. Client IDs are unique across the cluster.
    def client_id(
        tag: str, holder: tuple[str, int], other: tuple[str, int]
    ) -> tuple[Callable[[], None], Callable[[], None]]:
        cid = f"unique-{tag}"
        held: list[Client] = []

        def refused() -> None:
            h = shell.start("cid", *holder, cid)
            held.append(h)
            assert h.wait_line(("held", "refused")) == "held", h.lines
            line = shell.run("cid", *other, cid)
            assert line and line[0].startswith("refused InvalidClientIDException"), line

        def freed() -> None:
            for h in held:
                h.close()
            deadline = time.monotonic() + 20
            while True:
                line = shell.run("cid", *other, cid)
                if line == ["held"] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)  # the release crosses the link
            assert line == ["held"], line

        return refused, freed

    r1, f1 = client_id("s", on_stock, on_ours)
    sc.check("client_id_in_use_on_stock_refused_on_ours", r1)
    sc.check("client_id_freed_on_stock_taken_on_ours", f1)
    r2, f2 = client_id("o", on_ours, on_stock)
    sc.check("client_id_in_use_on_ours_refused_on_stock", r2)
    sc.check("client_id_freed_on_ours_taken_on_stock", f2)

    # 5. A subscriber on ours with a small prefetch: the stock broker waits for the
    # "delivered" acknowledgement of every window's last message (D=true) to send more.
    def flow_limited() -> None:
        sub = shell.start("sub", *on_ours, "mixed.flow", 5)
        assert sub.wait_line(("ready",)) == "ready", sub.lines
        wait_counts(
            "the subscriber of mixed.flow", lambda b: consumer_count(b, "mixed.flow"), 1, stock
        )
        assert shell.run("pub", *on_stock, "mixed.flow", "np", "f", 40) == ["sent"]
        receive_all([sub], 40)
        assert sorted(sub.got()) == sorted(f"f-{i}" for i in range(1, 41)), sub.lines

    sc.check("flow_limited_subscriber_on_ours_gets_all_from_stock", flow_limited)

    # 6. A client killed with messages it never acknowledged: its broker tells the
    # other (G_INTEREST_UPDATE, G_CLIENT_CLOSED), which delivers them again elsewhere.
    def killed(tag: str, cons: tuple[str, int], home: tuple[str, int]) -> Callable[[], None]:
        queue = f"mixed.kq.{tag}"

        def check() -> None:
            doomed = sc.shell()  # a JVM of its own, to be killed
            c = doomed.start("qsub", *cons, queue, "noack")
            assert c.wait_line(("ready",)) == "ready", c.lines
            on_queue = lambda b: consumer_count(b, queue, queue=True)  # noqa: E731
            wait_counts(f"the consumer of {queue}", on_queue, 1, broker_at[home])
            assert shell.run("qpub", *home, queue, tag, 3) == ["sent"]
            wait_for(lambda: len(c.got()) == 3, 60, "3 messages to the doomed consumer")
            doomed.kill()
            r = shell.start("qsub", *home, queue, "ack")
            assert r.wait_line(("ready",)) == "ready", r.lines
            receive_all([r], 3)
            assert sorted(r.got()) == [f"{tag}-{i}" for i in (1, 2, 3)], r.lines

        return check

    sc.check("client_killed_on_ours_stock_delivers_again", killed("ko", on_ours, on_stock))
    sc.check("client_killed_on_stock_ours_delivers_again", killed("ks", on_stock, on_ours))

    # 7. OpenMQ's own shared subscriptions (JMQShare), a subscriber on each broker.
    jmq_shared(sc, shell, (on_stock, stock), (on_ours, ours))

    # 8. STOMP on ours (stomp.py) and stock Java clients on the stock broker.
    stomp_across(sc, shell, (on_stock, stock), address(2))

    sc.check(
        "link_still_up",
        lambda: (
            wait_for(lambda: our_link_count(ours) == 1, 1, "our link"),
            wait_for(lambda: stock_link_count(stock, "ours") == 1, 1, "stock link"),
        ),
    )


# Our broker's STOMP listener in scenario "topics" (a port of the namespace's own).
STOMP_PORT = 27690
STOMP_ON_OURS = (
    "imq.bridge.enabled=true",
    "imq.bridge.activelist=stomp",
    f"imq.bridge.stomp.tcp.port={STOMP_PORT}",
)
# STOMP checks (scenario "topics"), in the order stomp_across makes them.
STOMP_CHECKS = [
    "stomp_sends_on_ours_reach_a_stock_queue_consumer_on_stock",
    "stock_publishes_on_stock_reach_a_stomp_subscriber_on_ours",
]


def stomp_across(
    sc: Scenario, shell: Shell, stock: tuple[tuple[str, int], StockBrokerProcess], host: str
) -> None:
    """stomp.py on our broker and stock Java clients on the stock broker, both ways: a
    STOMP SEND's message is a JMQ message the stock broker takes from the link."""
    import stomp  # stomp.py: only this scenario needs it

    on_stock, stock_b = stock

    def connect(listener: stomp.ConnectionListener | None = None) -> Any:
        # No content-length on a SEND: a TextMessage, as the stock Java consumer reads it.
        conn = stomp.Connection12([(host, STOMP_PORT)], auto_content_length=False)
        if listener is not None:
            conn.set_listener("l", listener)
        conn.connect("guest", "guest", wait=True)
        return conn

    def sends() -> None:
        queue = "mixed.stomp.q"
        c = shell.start("qsub", *on_stock, queue, "ack")
        assert c.wait_line(("ready",)) == "ready", c.lines
        conn = connect()
        try:
            for i, persistent in enumerate(("true", "false", "true"), 1):
                conn.send(f"/queue/{queue}", f"st-{i}", headers={"persistent": persistent})
            receive_all([c], 3)
            assert sorted(c.got()) == ["st-1", "st-2", "st-3"], c.lines
        finally:
            conn.disconnect()

    class Got(stomp.ConnectionListener):
        def __init__(self) -> None:
            self.bodies: list[str] = []

        def on_message(self, frame: Any) -> None:
            self.bodies.append(frame.body)

    def subscribes() -> None:
        topic = "mixed.stomp.t"
        got = Got()
        conn = connect(got)
        try:
            conn.subscribe(f"/topic/{topic}", id="s", ack="auto")
            subscribers = lambda b: consumer_count(b, topic)  # noqa: E731
            wait_counts(f"the STOMP subscriber of {topic}", subscribers, 1, stock_b)
            for mode in ("np", "p"):
                assert shell.run("pub", *on_stock, topic, mode, mode, 2) == ["sent"]
            wait_for(lambda: len(got.bodies) >= 4, 60, "4 messages to the STOMP subscriber")
            time.sleep(1)  # a duplicate would come in the same delivery pass
            assert sorted(got.bodies) == ["np-1", "np-2", "p-1", "p-2"], got.bodies
        finally:
            conn.disconnect()

    sc.check(STOMP_CHECKS[0], sends)
    sc.check(STOMP_CHECKS[1], subscribes)


# JMQShare checks (scenario "topics"), in the order jmq_shared makes them.
JMQSHARE_CHECKS = [
    "jmqshare_nondurable_each_message_consumed_once",
    "jmqshare_durable_each_message_consumed_once",
    "jmqshare_durable_published_while_away_received_once_swapped",
]


def jmq_shared(
    sc: Scenario,
    shell: Shell,
    first: tuple[tuple[str, int], BrokerProcess | StockBrokerProcess],
    second: tuple[tuple[str, int], BrokerProcess | StockBrokerProcess],
) -> None:
    """OpenMQ's JMQShare subscriptions (connection factories with imqEnableSharedClientID
    and imqEnableSharedSubscriptions), one subscriber on each broker under the same client
    ID: a message published on either broker is received once between the two, for a
    shared non-durable and a shared durable subscription; and what is published while both
    durable subscribers are away is received once when they come back, each on the broker
    the other was on (JMQSHARE_CHECKS)."""
    (one, b1), (two, b2) = first, second

    def shared(kind: str) -> Callable[[], None]:
        topic, cid = f"mixed.mqs.{kind}", f"mqs-{kind}"
        name = "mqs-dur" if kind == "durable" else "-"
        mode = "p" if kind == "durable" else "np"

        def check() -> None:
            cons = [
                shell.start("mqshare", *one, cid, topic, name),
                shell.start("mqshare", *two, cid, topic, name),
            ]
            for c in cons:
                assert c.wait_line(("ready",)) == "ready", c.lines
            key = name if kind == "durable" else cid
            on_sub = lambda b: subscription_consumers(b, key)  # noqa: E731
            wait_counts(f"the subscribers of {key}", on_sub, 2, b1, b2)
            assert shell.run("pub", *one, topic, mode, "a", 10) == ["sent"]
            assert shell.run("pub", *two, topic, mode, "b", 10) == ["sent"]
            received_once(cons, [f"{w}-{i}" for w in "ab" for i in range(1, 11)])

        return check

    def away() -> None:
        topic, cid = "mixed.mqs.durable", "mqs-durable"
        # The consumers' departure reaches the other broker.
        on_sub = lambda b: subscription_consumers(b, "mqs-dur")  # noqa: E731
        wait_counts("no subscriber of mqs-dur", on_sub, 0, b1, b2)
        assert shell.run("pub", *one, topic, "p", "c", 5) == ["sent"]
        assert shell.run("pub", *two, topic, "p", "d", 5) == ["sent"]
        cons = [
            shell.start("mqshare", *two, cid, topic, "mqs-dur"),
            shell.start("mqshare", *one, cid, topic, "mqs-dur"),
        ]
        for c in cons:
            assert c.wait_line(("ready",)) == "ready", c.lines
        received_once(cons, [f"{w}-{i}" for w in "cd" for i in range(1, 6)])

    started = time.monotonic()
    sc.check(JMQSHARE_CHECKS[0], shared("nondurable"))
    sc.check(JMQSHARE_CHECKS[1], shared("durable"))
    sc.check(JMQSHARE_CHECKS[2], away)
    print(f"# JMQShare checks took {time.monotonic() - started:.1f} s", flush=True)


# -- rolling replacement of stock brokers under load (scenario "rolling") ----------------------

ROLLING_CLIENT = """\
import jakarta.jms.*;
import java.io.*;

/** prod QUEUE RATE LIST | cons QUEUE LIST, with the stock client, reconnect enabled and
 *  LIST (mq://a:p/jms,mq://b:q/jms) as imqAddressList; runs until stdin closes.
 *  prod: prints "sent N" once send(N) returned (persistent), "retry N: WHY" when a send
 *  failed (the same N goes again, its property "attempt" one higher); cons
 *  (CLIENT_ACKNOWLEDGE): "got N R A" per message, R its JMSRedelivered, A its attempt. Both: "event CODE" per connection event, "exception WHY" from the
 *  ExceptionListener, "done" at a clean end, "error WHY" when the program gives up. */
public class Rolling {
    static volatile boolean stop = false;

    public static void main(String[] a) throws Exception {
        Thread t = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (IOException e) { }
            stop = true;
        });
        t.setDaemon(true);
        t.start();
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        String list = a[0].equals("prod") ? a[3] : a[2];
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList, list);
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressListBehavior, "PRIORITY");
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqReconnectEnabled, "true");
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqReconnectAttempts, "3");
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqReconnectInterval, "1000");
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressListIterations, "-1");
        Connection c = null;
        try {
            c = cf.createConnection("guest", "guest");
            c.setExceptionListener(e -> System.out.println("exception " + e));
            ((com.sun.messaging.jms.Connection) c).setEventListener(
                ev -> System.out.println("event " + ev.getEventCode()));
            if (a[0].equals("prod")) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer p = s.createProducer(s.createQueue(a[1]));
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                long gap = 1000 / Long.parseLong(a[2]);
                int n = 1;
                int attempt = 1;
                while (!stop) {
                    try {
                        TextMessage m = s.createTextMessage(Integer.toString(n));
                        m.setIntProperty("n", n);
                        m.setIntProperty("attempt", attempt);
                        p.send(m);
                        System.out.println("sent " + n);
                        n++;
                        attempt = 1;
                    } catch (JMSException e) {
                        // In doubt: the broker may have stored it before the failure.
                        System.out.println("retry " + n + ": " + e);
                        attempt++;
                        Thread.sleep(500);
                    }
                    Thread.sleep(gap);
                }
            } else {
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                MessageConsumer mc = s.createConsumer(s.createQueue(a[1]));
                c.start();
                System.out.println("ready");
                while (!stop) {
                    try {
                        Message m = mc.receive(500);
                        if (m == null) continue;
                        System.out.println("got " + m.getIntProperty("n") + " " + m.getJMSRedelivered()
                                + " " + m.getIntProperty("attempt"));
                        m.acknowledge();
                    } catch (JMSException e) {
                        // C4106 after a failover: the session must be recovered, and
                        // what it had not acknowledged comes again, redelivered.
                        System.out.println("recover " + e);
                        while (!stop) {
                            try {
                                s.recover();
                                break;
                            } catch (JMSException e2) {  // still failing over
                                System.out.println("recover again " + e2);
                                Thread.sleep(500);
                            }
                        }
                    }
                }
            }
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            e.printStackTrace(System.out);
        } finally {
            System.out.flush();
            if (c != null) c.close();
        }
    }
}
"""


class RollingClient:
    """One run of the Rolling program (the stock Java client): its lines as they come."""

    def __init__(self, classes: Path, out: Path, *args: str) -> None:
        cp = ":".join([str(classes), *(str(j) for j in JARS)])
        self.out = out
        self.proc = subprocess.Popen(
            [*JAVA, "-cp", cp, "Rolling", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.out, "w") as f:
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                f.write(line)
                f.flush()

    def numbers(self, prefix: str) -> list[str]:
        return [ln[len(prefix) :] for ln in list(self.lines) if ln.startswith(prefix)]

    def close(self) -> None:
        """Close its stdin (it ends cleanly) and wait for it."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._reader.join(5)


def scenario_rolling(sc: Scenario) -> None:
    """Two stock brokers under a steady persistent load from stock Java clients (address
    list naming both, reconnect on); each stock broker in turn is stopped and one of ours
    started in its place: every message the producer was told was sent is received once,
    or again only with JMSRedelivered, and neither client stops."""
    _rolling(sc, ours=True)


def scenario_rolling_stock(sc: Scenario) -> None:
    """The same with stock brokers in place of ours: the reference (run by hand,
    ``python -m tests.stock_cluster rolling-stock DIR`` under ``unshare -n``)."""
    _rolling(sc, ours=False)


def _rolling(sc: Scenario, ours: bool) -> None:
    pm1, pm2 = 27676, 27677
    cl1, cl2 = CAPTURE_PORTS
    brokerlist = f"{address(1)}:{pm1},{address(2)}:{pm2}"
    ping = "imq.cluster.ping.interval=5"
    started = time.monotonic()

    def at(what: str) -> None:
        print(f"# {time.monotonic() - started:6.1f} s {what}", flush=True)

    java = sc.background(lambda: sc.java({"Rolling": ROLLING_CLIENT}, shell=False))
    stock1, stock2 = sc.together(
        lambda: sc.stock(1, pm1, brokerlist, "stock1", f"imq.cluster.port={cl1}"),
        lambda: sc.stock(2, pm2, brokerlist, "stock2", f"imq.cluster.port={cl2}"),
    )
    wait_for(lambda: stock_link_count(stock1, "stock2") >= 1, 60, "stock1 B1071 to stock2")
    wait_for(lambda: stock_link_count(stock2, "stock1") >= 1, 60, "stock2 B1071 to stock1")
    at("two stock brokers linked")

    classes = java.result()
    addresses = f"mq://{address(1)}:{pm1}/jms,mq://{address(2)}:{pm2}/jms"
    queue = "rolling.q"
    cons = RollingClient(classes, sc.tmp / "consumer.txt", "cons", queue, addresses)
    wait_for(lambda: "ready" in cons.lines or cons.proc.poll() is not None, 60, "consumer ready")
    prod = RollingClient(classes, sc.tmp / "producer.txt", "prod", queue, "20", addresses)
    try:
        wait_for(lambda: len(prod.numbers("sent ")) >= 60, 60, "60 messages sent")
        at(f"load running: {len(prod.numbers('sent '))} sent")

        def replace(old: StockBrokerProcess, n: int, pm: int, cl: int, name: str) -> Any:
            old.stop()
            at(f"{old.instance} stopped")
            props = (f"imq.cluster.port={cl}",)
            if ours:
                new: Any = sc.ours(n, pm, brokerlist, name, ping, *props)
            else:
                new = sc.stock(n, pm, brokerlist, name, *props)
            at(f"{name} serving")
            return new

        def load_crosses(where: str) -> None:
            # Two seconds of the load (40 messages at 20 a second), sent and received
            # after the link came up, instead of a fixed 5 s; a stall shows in the
            # checks that follow.
            n0 = len(prod.numbers("sent "))

            def crossed() -> bool:
                got = {int(g.split()[0]) for g in cons.numbers("got ")}
                return len(prod.numbers("sent ")) >= n0 + 40 and sum(n > n0 for n in got) >= 40

            try:
                wait_for(crossed, 30, f"40 messages across {where}")
            except AssertionError as e:
                at(str(e))

        def linked(b: Any, other: Any) -> bool:
            if isinstance(b, StockBrokerProcess):
                return stock_link_count(b, other.instance) == 1
            return our_link_count(b) == 1

        new1 = replace(stock1, 1, pm1, cl1, "ours1" if ours else "stock3")
        sc.check(
            "ours_in_place_of_stock1_links_with_stock2",
            lambda: wait_for(
                lambda: linked(new1, stock2) and linked(stock2, new1), 60, "new1 and stock2 linked"
            ),
        )
        at(f"{new1.instance} linked: {len(prod.numbers('sent '))} sent")
        load_crosses("the mixed cluster")
        new2 = replace(stock2, 2, pm2, cl2, "ours2" if ours else "stock4")
        sc.check(
            "ours_in_place_of_stock2_links_with_ours1",
            lambda: wait_for(
                lambda: linked(new1, new2) and linked(new2, new1), 60, "new1 and new2 linked"
            ),
        )
        at(f"{new2.instance} linked: {len(prod.numbers('sent '))} sent")
        load_crosses("our two brokers")
    finally:
        prod.close()
        at(f"producer stopped: {len(prod.numbers('sent '))} sent")
    sent = [int(x) for x in prod.numbers("sent ")]

    def drained() -> bool:
        got = {int(g.split()[0]) for g in cons.numbers("got ")}
        return set(sent) <= got

    try:
        wait_for(drained, 60, "the consumer to get every sent message")
    except AssertionError:
        pass
    time.sleep(2)  # a late duplicate would show
    cons.close()
    at("consumer stopped")

    got = [g.split() for g in cons.numbers("got ")]
    # number -> the attempts received; a repeat is fine when JMSRedelivered says so, or
    # when it is another send of the producer (a send in doubt, sent again).
    seen: dict[int, set[str]] = {}
    bad_repeats = []
    redelivered = resent = 0
    for num, flag, attempt in got:
        n = int(num)
        if flag == "true":
            redelivered += 1
        elif n in seen:
            if attempt in seen[n]:
                bad_repeats.append(n)
            else:
                resent += 1
        seen.setdefault(n, set()).add(attempt)
    missing = sorted(set(sent) - set(seen))
    print(
        f"# figures: sent {len(sent)}, received {len(got)} ({len(seen)} distinct), "
        f"redelivered {redelivered}, sends retried {len(prod.numbers('retry '))}, "
        f"received twice as sent twice {resent}, missing {len(missing)}",
        flush=True,
    )

    def none_lost() -> None:
        assert not missing, f"{len(missing)} sent but never received: {missing[:50]}"

    def no_silent_duplicates() -> None:
        assert not bad_repeats, f"received again without JMSRedelivered: {bad_repeats[:50]}"

    def clients_went_on(c: RollingClient) -> Callable[[], None]:
        def check() -> None:
            bad = [ln for ln in c.lines if ln.startswith(("error", "exception"))]
            assert not bad and c.lines[-1:] == ["done"], c.lines[-40:]

        return check

    sc.check("every_sent_message_received", none_lost)
    sc.check("repeats_only_with_jmsredelivered", no_silent_duplicates)
    sc.check("producer_went_on", clients_went_on(prod))
    sc.check("consumer_went_on", clients_went_on(cons))


# -- exclusive queue consumers (issue 35: the G_LOCK race) --------------------------------

EXCLUSIVE_PROPS = (
    "imq.autocreate.queue.maxNumActiveConsumers=1",
    "imq.autocreate.queue.maxNumBackupConsumers=0",
)
EXCLUSIVE_ROUNDS = 6


def _race(sc: Scenario, label: str, a: Any, b: Any) -> None:
    """ExclusiveRace.java (tests/interop/java, compiled by scenario_exclusive) between
    ``a`` and ``b``: each round's line."""
    from tests.interop.jvm import JavaPrograms

    r = JavaPrograms(sc.classes).run(
        "ExclusiveRace",
        a,
        b.host,
        str(b.portmapper_port),
        str(EXCLUSIVE_ROUNDS),
        f"{label}_",
        "own",
    )
    for line in r.lines:
        if line.startswith("ok race_"):
            print(f"ok {label}_{line[3:]}", flush=True)
        elif line.startswith("fail race_"):
            sc.failed += 1
            print(f"fail {label}_{line[5:]}", flush=True)
        elif line.startswith("info "):
            print(f"# {label} {line[5:]}", flush=True)
    if r.returncode not in (0, 1):
        raise AssertionError(f"ExclusiveRace ended with {r.returncode}: {r.stderr[-2000:]}")
    print(f"# {label} raced: {sc.progress()}", flush=True)


def scenario_exclusive(sc: Scenario) -> None:
    """A stock Java consumer attaches on each of two brokers at the same moment (queues
    with one active consumer, no backup): one is active, the other refused, between two
    stock brokers and between a stock broker and ours.  ("own": a stock broker whose
    consumer lost the race may keep its own messages from the winner -- measured in 6 of
    6 rounds between two stock brokers, for 20 s at least -- so the winner is sure of its
    own broker's messages only, and a round ends once it has them.)"""
    from tests.interop.jvm import JAVA_SOURCES

    pm1, pm2, pm3, pm4 = 27676, 27677, 27678, 27679
    # Only the program the races run (and what it uses), not every one of tests/interop/java.
    race = (JAVA_SOURCES / "ExclusiveRace.java", JAVA_SOURCES / "Checks.java")
    java = sc.background(lambda: sc.java({}, race, shell=False))
    stock_list = f"{address(1)}:{pm1},{address(2)}:{pm2}"
    mixed = f"{address(3)}:{pm3},{address(4)}:{pm4}"

    # The two clusters (on addresses of their own) start side by side, in the mixed one
    # ours first, so the stock broker's first dial finds it (one that fails is tried again
    # only 5 s later).  No race runs while brokers start or stop: the stock brokers'
    # locking, starved of CPU, once held a round up for 20 s.
    def mixed_cluster() -> tuple[StockBrokerProcess, BrokerProcess]:
        o4 = sc.ours(4, pm4, mixed, "oursD", "imq.cluster.ping.interval=5", *EXCLUSIVE_PROPS)
        return sc.stock(3, pm3, mixed, "stockC", *EXCLUSIVE_PROPS), o4

    second = sc.background(mixed_cluster)
    s1, s2 = sc.together(
        lambda: sc.stock(1, pm1, stock_list, "stockA", *EXCLUSIVE_PROPS),
        lambda: sc.stock(2, pm2, stock_list, "stockB", *EXCLUSIVE_PROPS),
    )
    wait_for(lambda: stock_link_count(s1, "stockB") == 1, 90, "the stock brokers linked")
    s3, o4 = second.result()
    java.result()
    _race(sc, "stock_stock", s1, s2)
    wait_for(lambda: our_link_count(o4) == 1, 60, "our link up")
    wait_for(lambda: stock_link_count(s3, "oursD") == 1, 60, "the stock broker linked to ours")
    _race(sc, "stock_ours", s3, o4)
    _race(sc, "ours_stock", o4, s3)


SCENARIOS = {
    "handshake": (2, scenario_handshake),
    "master": (2, scenario_master),
    "topics": (2, scenario_topics),
    "rolling": (2, scenario_rolling),
    "rolling-stock": (2, scenario_rolling_stock),
    "exclusive": (4, scenario_exclusive),
}


# The cluster ports of the scenarios, fixed so STOCK_CLUSTER_CAPTURE=FILE can record their
# traffic (tests/vectors_cluster/capture.py, run inside the namespace: start_capture).
CAPTURE_PORTS = (27701, 27702)


# The environment variable run_scenario names its migrated SQLite database in.
MIGRATED_SQLITE = "STOCK_CLUSTER_MIGRATED_SQLITE"


def main(argv: list[str]) -> int:
    name, tmp = argv[0], Path(argv[1])
    n, fn = SCENARIOS[name]
    os.environ.setdefault("IMQ_JVM_ARGS", STOCK_BROKER_JVM)
    if template := os.environ.pop(MIGRATED_SQLITE, None):
        launcher.adopt_migrated_sqlite(Path(template))
    # Our brokers (and manage.py commands) fork from a server with the libraries imported,
    # itself started in here: what it forks is in this namespace.
    launcher.spawn = manage_fork.popen
    _setup_namespace(n)
    sc = Scenario(tmp)
    sc.background(manage_fork._server_path)  # ready by the time the first is asked for
    capture = start_capture(list(CAPTURE_PORTS))
    try:
        fn(sc)
    except Exception as exc:  # a broker that does not start ends the scenario
        print(f"fail {name}: {exc}".replace("\n", " | ")[:3000], flush=True)
        traceback.print_exc(file=sys.stdout)
        sc.failed += 1
    finally:
        sc.stop_all()
        print(f"# stopped: {sc.progress()}", flush=True)
        stop_capture(capture)
    return 1 if sc.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
