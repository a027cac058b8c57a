"""imqbridgemgr and the STOMP bridge: the stock OpenMQ 6.9 ``BridgeMgr`` (imqbroker.jar) and
our ``imqbridgemgr`` against our broker and against the stock broker, each with its STOMP
bridge listening.

* The stock tool runs the same command sequence against both brokers: what it prints
  (stdout, stderr, exit status) must be the same, and so must what a STOMP client finds
  while the bridge is stopped (its open connection closed, a new one refused) and after
  it is started again (a new connection accepted).
* Our tool runs that sequence against both brokers too: what it prints must be what the
  stock tool printed against the same broker.
* BridgeProbe (tests/interop/java/BridgeProbe.java) sends the raw requests, the ones the
  tool never sends too (a missing type, an empty name, a type out of range, DEBUG): every
  reply's properties and body must be the stock broker's.

* With -secure (both brokers with their ssladmin service and key material: ours from our
  imqkeytool, the stock one's a JKS from the JDK's keytool) both tools run a shorter
  sequence over TLS, compared the same ways; a JVM that does not trust the certificate and
  a broker without ssladmin refuse the stock tool alike.
* The stock imqcmd's ``list svc`` and ``query svc -n stomp`` while the bridge is stopped
  and after it is started: the stock broker never lists its bridge, ours its listener
  (docs/reference/stomp.md says both).

The tests fail, never skip, naming what is missing when java or the jars are not there.
"""

from __future__ import annotations

import io
import re
import socket
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.admintools import bridgemgr
from broker.security.tls import client_trust_context
from broker.stock_paths import REALBROKER
from tests.stompkit import stock_stomp_broker, stomp_broker
from tests.test_tls import make_keystore

from .imqcmd_stock import StockImqcmd
from .imqcmd_stock import missing as imqcmd_missing
from .jvm import require_java
from .test_java_tls import keytool, stock_key_material

pytestmark = pytest.mark.timeout(900)

LIB = REALBROKER / "mq" / "lib"
BROKER_JAR = LIB / "imqbroker.jar"
JARS = [BROKER_JAR, LIB / "imq.jar", LIB / "imqadmin.jar", LIB / "jakarta.jms-api-3.1.0.jar"]
BRIDGE_MGR = "com.sun.messaging.bridge.admin.bridgemgr.BridgeMgr"


@dataclass(frozen=True)
class Step:
    args: tuple[str, ...]
    stdin: str = ""  # the answer to the confirmation question (no -f)
    hold: bool = False  # open a STOMP connection first
    after: str = ""  # "stopped": check the held connection and a new one; "started": a new one


SEQUENCE = [
    Step(("list", "bridge")),
    Step(("list", "bridge", "-t", "STOMP")),
    Step(("list", "bridge", "-t", "jms")),
    Step(("list", "bridge", "-t", "FOO")),
    Step(("list", "bridge", "-bn", "stomp")),
    Step(("list", "bridge", "-bn", "nosuch")),
    Step(("list", "link", "-bn", "stomp")),
    Step(("pause", "bridge", "-bn", "stomp", "-f")),
    Step(("pause", "bridge", "-f")),
    Step(("resume", "bridge", "-bn", "stomp", "-f")),
    Step(("resume", "bridge", "-t", "STOMP", "-f")),
    Step(("pause", "link", "-bn", "stomp", "-ln", "l1", "-f")),
    Step(("resume", "link", "-bn", "stomp", "-ln", "l1", "-f")),
    Step(("stop", "link", "-bn", "stomp", "-ln", "l1", "-f")),
    Step(("start", "link", "-bn", "stomp", "-ln", "l1", "-f")),
    Step(("stop", "bridge", "-bn", "stomp", "-t", "JMS", "-f")),
    Step(("stop", "bridge", "-bn", "stomp"), stdin="n\n"),
    Step(("stop", "bridge", "-bn", "stomp"), stdin="maybe\n"),
    Step(("stop", "bridge", "-bn", "stomp"), stdin="y\n", hold=True, after="stopped"),
    Step(("list", "bridge")),
    Step(("stop", "bridge", "-f")),
    Step(("resume", "bridge", "-bn", "stomp", "-f")),
    Step(("start", "bridge", "-bn", "stomp", "-f"), after="started"),
    Step(("list", "bridge")),
    Step(("stop", "bridge", "-t", "STOMP", "-f"), after="stopped"),
    Step(("start", "bridge", "-f"), after="started"),
    Step(("list", "bridge", "-t", "STOMP")),
]

# Raw requests (JMQMessageType[:properties]) for BridgeProbe; the state is STARTED.
PROBE = [
    "18",
    "18:JMQBridgeType=stomp",
    "18:JMQBridgeName=",
    "18:JMQLinkName=l1",
    "18:JMQBridgeName=stomp,JMQLinkName=",
    "18:JMQBridgeName=stomp,JMQLinkName=l1",
    "20",
    "22",
    "20:JMQBridgeType=STOMP",
    "22:JMQBridgeType=STOMP",
    "24:JMQBridgeType=FOO",
    "26:JMQBridgeName=",
    "26:JMQBridgeName=nosuch",
    "24:JMQBridgeName=stomp,JMQBridgeType=JMS",
    "16",
    "16:JMQCommandArg=frob",
    "16:JMQCommandArg=fault",
    "28",
    "29",
    "5",
    "99",
    "26:JMQBridgeName=stomp",
    "18",
    "22:JMQBridgeName=stomp",
    "26:JMQBridgeName=stomp,JMQLinkName=l1",
    "24:JMQBridgeName=stomp,JMQLinkName=l1",
    "18",
]


@dataclass
class Out:
    rc: int
    stdout: str
    stderr: str


def _normalise(text: str, port: int) -> str:
    # The stock tool's warning about a passfile in clear text (ours reads it silently).
    text = re.sub(r"Warning \[A2016\][^\n]*\n\n", "", text)
    return re.sub(rf"\b{port}\b", "PORT", text)


class Brokers:
    """Both brokers, each with its STOMP bridge, and a passfile for the tools."""

    def __init__(self, ours: Any, ours_stomp: int, stock: Any, stock_stomp: int, tmp: Path):
        self.ours, self.ours_stomp = ours, ours_stomp
        self.stock, self.stock_stomp = stock, stock_stomp
        self.passfile = tmp / "passfile"
        self.passfile.write_text("imq.imqbridgemgr.password=admin\n")
        self.stock_tool: dict[str, list[Out]] = {}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    require_java()
    missing = [str(j) for j in JARS if not j.is_file()]
    if missing:
        pytest.fail(f"the stock OpenMQ jars are missing: {missing}", pytrace=False)
    with stomp_broker() as (ours, ours_port), stock_stomp_broker() as (stock, stock_port):
        yield Brokers(ours, ours_port, stock, stock_port, tmp_path_factory.mktemp("bridgemgr"))


def _stomp_connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"CONNECT\nlogin:guest\npasscode:guest\n\n\x00")
    return s


def _stomp_state(port: int) -> str:
    """What a new STOMP client finds: the first line of the answer, or refused."""
    try:
        s = _stomp_connect(port)
    except ConnectionRefusedError:
        return "new connection refused"
    with s:
        return "new connection: " + s.recv(4096).split(b"\n", 1)[0].decode()


def _held_state(s: socket.socket) -> str:
    """What the connection held over a stop got: closed (EOF, no frame) or frames."""
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except ConnectionResetError:
        return "held connection reset"
    return "held connection closed" + (f" after {data!r}" if data else "")


def _port_mapper_stomp(b: Any, stomp_port: int) -> str:
    """The port mapper's line for the STOMP bridge's listener."""
    with socket.create_connection((b.host, b.portmapper_port), timeout=60) as s:
        s.sendall(b"101\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    lines = [ln for ln in data.decode().splitlines() if ln.startswith("stomp[bridge]")]
    return "port mapper: " + " | ".join(lines).replace(str(stomp_port), "STOMP_PORT")


def _run_sequence(b: Any, stomp_port: int, tool, sequence: list[Step] = SEQUENCE) -> list[Out]:
    port = b.portmapper_port
    outs: list[Out] = []
    held: socket.socket | None = None
    for step in sequence:
        if step.hold:
            held = _stomp_connect(stomp_port)
            assert held.recv(4096).startswith(b"CONNECTED")
        out = tool(step)
        out.stdout, out.stderr = _normalise(out.stdout, port), _normalise(out.stderr, port)
        if step.after == "stopped":
            notes = [_stomp_state(stomp_port)]
            if held is not None:
                notes.append(_held_state(held))
                held.close()
                held = None
            notes.append(_port_mapper_stomp(b, stomp_port))
            out.stdout += "#stomp " + "; ".join(notes) + "\n"
        elif step.after == "started":
            notes = [_stomp_state(stomp_port), _port_mapper_stomp(b, stomp_port)]
            out.stdout += "#stomp " + "; ".join(notes) + "\n"
        outs.append(out)
    return outs


def _stock_tool(b: Any, passfile: Path, jvm_args: tuple[str, ...] = ()):
    def run(step: Step) -> Out:
        cmd = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *jvm_args, "-cp"]
        cmd += [":".join(str(j) for j in JARS), BRIDGE_MGR, *step.args]
        cmd += ["-b", f"{b.host}:{b.portmapper_port}", "-u", "admin", "-passfile", str(passfile)]
        p = subprocess.run(cmd, input=step.stdin, capture_output=True, text=True, timeout=240)
        return Out(p.returncode, p.stdout, p.stderr)

    return run


def _our_tool(b: Any, password: str, secure: ssl.SSLContext | None = None):
    """Our tool; ``secure`` is what its -secure option makes of its -truststore."""

    def run(step: Step) -> Out:
        args = list(step.args)
        opts = bridgemgr.Options(args[0], args[1], host=b.host, port=b.portmapper_port)
        opts.password = password
        flags = {"-bn": "bridge_name", "-t": "bridge_type", "-ln": "link_name"}
        i = 2
        while i < len(args):
            if args[i] == "-f":
                opts.force = True
                i += 1
            elif args[i] == "-secure":
                assert secure is not None, "-secure needs the trust context"
                opts.ssl = secure
                i += 1
            else:
                setattr(opts, flags[args[i]], args[i + 1])
                i += 2
        out, err = io.StringIO(), io.StringIO()
        answers = io.StringIO(step.stdin)

        def ask(question: str) -> str:
            out.write(question)
            return answers.readline()

        rc = bridgemgr.run(opts, out, err, ask)
        return Out(rc, out.getvalue(), err.getvalue())

    return run


def _stock_outputs(brokers: Brokers, which: str) -> list[Out]:
    if which not in brokers.stock_tool:
        b, stomp = (
            (brokers.ours, brokers.ours_stomp)
            if which == "ours"
            else (brokers.stock, brokers.stock_stomp)
        )
        tool = _stock_tool(b, brokers.passfile)
        brokers.stock_tool[which] = _run_sequence(b, stomp, tool)
    return brokers.stock_tool[which]


def _differences(left: list[Out], right: list[Out], sequence: list[Step] = SEQUENCE) -> list[str]:
    return [
        f"{' '.join(step.args)}:\n  {a}\n  {b}"
        for step, a, b in zip(sequence, left, right, strict=True)
        if a != b
    ]


def test_stock_bridgemgr_sees_our_stomp_bridge_as_the_stock_one(brokers: Brokers) -> None:
    ours = _stock_outputs(brokers, "ours")
    stock = _stock_outputs(brokers, "stock")
    assert _differences(ours, stock) == []

    # What the comparison covered, said outright (the same holds for the stock broker).
    def out(*args: str, stdin: str = "", nth: int = 0) -> Out:
        found = [
            o for s, o in zip(SEQUENCE, ours, strict=True) if (s.args, s.stdin) == (args, stdin)
        ]
        return found[nth]

    listing = out("list", "bridge")
    assert listing.rc == 0 and "stomp          STOMP          STARTED" in listing.stdout
    pause = out("pause", "bridge", "-bn", "stomp", "-f")
    assert pause.rc == 1
    assert "[BSS4000]: Operation pause is not supported by STOMP type bridge" in pause.stderr
    # Resuming a running bridge does nothing; a stopped one cannot be resumed.
    assert out("resume", "bridge", "-bn", "stomp", "-f").rc == 0
    resume_stopped = out("resume", "bridge", "-bn", "stomp", "-f", nth=1)
    assert resume_stopped.rc == 1 and "Operation resume is not supported" in resume_stopped.stderr
    stop = out("stop", "bridge", "-bn", "stomp", stdin="y\n")
    assert stop.rc == 0 and "The operation [stop] on the bridge was successful." in stop.stdout
    assert "#stomp new connection refused; held connection closed; port mapper: " in stop.stdout
    # The port mapper still lists the listener (with its port) while the bridge is stopped.
    assert "stomp[bridge] stomp[TCP] stomp[bridge] STOMP_PORT" in stop.stdout
    assert "stomp          STOMP          STOPPED" in out("list", "bridge", nth=1).stdout
    start = out("start", "bridge", "-bn", "stomp", "-f")
    assert start.rc == 0 and "#stomp new connection: CONNECTED; port mapper: " in start.stdout
    not_done = out("stop", "bridge", "-bn", "stomp", stdin="n\n")
    assert "The operation [stop] was not performed on the bridge." in not_done.stdout


def test_our_imqbridgemgr_prints_what_the_stock_tool_prints(brokers: Brokers) -> None:
    for which, b, stomp in (
        ("ours", brokers.ours, brokers.ours_stomp),
        ("stock", brokers.stock, brokers.stock_stomp),
    ):
        expected = _stock_outputs(brokers, which)
        got = _run_sequence(b, stomp, _our_tool(b, "admin"))
        assert _differences(got, expected) == [], which


def test_our_imqbridgemgr_command_line(brokers: Brokers) -> None:
    """manage.py imqbridgemgr: the passfile, the exit status, the streams."""
    b = brokers.ours
    base = [".venv/bin/python", "manage.py", "imqbridgemgr"]
    where = ["-b", f"{b.host}:{b.portmapper_port}", "-passfile", str(brokers.passfile)]
    root = Path(__file__).resolve().parent.parent.parent
    ok = subprocess.run(
        [*base, "list", "bridge", *where], capture_output=True, text=True, cwd=root, timeout=120
    )
    assert ok.returncode == 0, ok.stderr
    assert _normalise(ok.stdout, b.portmapper_port) == _stock_outputs(brokers, "ours")[0].stdout
    bad = subprocess.run(
        [*base, "pause", "bridge", "-bn", "stomp", "-f", *where],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert bad.returncode == 1
    assert "[BSS4000]: Operation pause is not supported by STOMP type bridge" in bad.stderr


def test_bridge_admin_replies_are_the_stock_brokers(brokers: Brokers, java_programs: Any) -> None:
    runs = {}
    for which, b in (("ours", brokers.ours), ("stock", brokers.stock)):
        r = java_programs.run(
            "BridgeProbe", b, "admin", "admin", *PROBE, extra_classpath=(BROKER_JAR,)
        )
        assert r.returncode == 0, r.explain()
        runs[which] = r.stdout.split("== ")
    assert len(runs["ours"]) == len(PROBE) + 2  # HELLO and every request answered
    for ours, stock in zip(runs["ours"], runs["stock"], strict=True):
        assert ours == stock
    replies = dict(zip(["HELLO", *PROBE], runs["ours"][1:], strict=False))
    assert "JMQStatus=Integer:200" in replies["HELLO"]
    assert "TemporaryQueueImpl" in replies["HELLO"]
    assert "INVALID_TYPE(99)" in replies["99"] and "JMQMessageType" not in replies["99"]
    assert "[BB3011]: Bridge name is not specified" in replies["18:JMQLinkName=l1"]
    assert (
        "[BB4007]: Bridge stomp has type STOMP, not type JMS"
        in replies["24:JMQBridgeName=stomp,JMQBridgeType=JMS"]
    )
    # Both end with the bridge started again (STOP then START with a link name).
    assert "53544152544544" in runs["ours"][-1]  # "STARTED" in the LIST body


def test_bridge_admin_queue_refuses_normal_services(brokers: Brokers) -> None:
    """A JMS client (the jms service) cannot send to __JMQBridgeAdmin: refused, not kept."""
    import asyncio

    from openmq_client import ObjectMessage, Queue, connect
    from openmq_client.errors import JMSException

    b = brokers.ours

    async def attempt() -> str:
        conn = await connect(b.host, b.portmapper_port, user="admin", password="admin")
        try:
            session = await conn.create_session()
            producer = await session.create_producer(Queue("__JMQBridgeAdmin"))
            await producer.send(ObjectMessage(None, properties={"JMQMessageType": 28}))
        except JMSException as exc:
            return str(exc)
        finally:
            await conn.close()
        return "sent"

    refusal = asyncio.run(attempt())
    # Refused where __JMQAdmin is: the producer (the access rules), 403.
    assert "__JMQBridgeAdmin" in refusal and "403" in refusal


def test_without_the_bridge_service_both_brokers_say_so(brokers: Brokers, tmp_path: Path) -> None:
    """imq.bridge.enabled=false (the default): HELLO answered 503, "[B2214]: Bridge service
    is not enabled", which both tools print as the stock tool does against the stock broker."""
    from broker.launcher import start_broker, start_stock_broker

    (tmp_path / "ours").mkdir()
    (tmp_path / "stock").mkdir()
    ours = start_broker(tmp_path / "ours")
    try:
        stock = start_stock_broker(tmp_path / "stock")
        try:
            step = Step(("list", "bridge"))
            seen = []
            for b in (ours, stock):
                for tool in (_stock_tool(b, brokers.passfile), _our_tool(b, "admin")):
                    out = tool(step)
                    p = b.portmapper_port
                    seen.append(Out(out.rc, _normalise(out.stdout, p), _normalise(out.stderr, p)))
        finally:
            stock.stop()
    finally:
        ours.stop()
    assert all(o == seen[0] for o in seen), seen
    assert seen[0].rc == 1
    assert "[B2214]: Bridge service is not enabled" in seen[0].stderr


# -- -secure: the tools over the ssladmin service (TLS) ------------------------------------

SSLADMIN = "imq.service.activelist=jms,admin,ssladmin"
KEY_PASSWORD = "s3cret-keystore"
STORE_PASSWORD = "changeit"

# The sequence the tools run with -secure: what an administrator does most (list, stop
# answering y, start), and pause/resume while the bridge is stopped and while it runs.
SECURE_SEQUENCE = [
    Step(("list", "bridge", "-secure")),
    Step(("stop", "bridge", "-bn", "stomp", "-secure"), stdin="y\n", hold=True, after="stopped"),
    Step(("list", "bridge", "-secure")),
    Step(("pause", "bridge", "-bn", "stomp", "-secure", "-f")),
    Step(("resume", "bridge", "-bn", "stomp", "-secure", "-f")),
    Step(("start", "bridge", "-bn", "stomp", "-secure", "-f"), after="started"),
    Step(("pause", "bridge", "-bn", "stomp", "-secure", "-f")),
    Step(("resume", "bridge", "-bn", "stomp", "-secure", "-f")),
    Step(("stop", "bridge", "-t", "STOMP", "-secure", "-f"), after="stopped"),
    Step(("start", "bridge", "-secure", "-f"), after="started"),
    Step(("list", "bridge", "-t", "STOMP", "-secure")),
]


@dataclass
class Secure:
    """A broker with its ssladmin service and STOMP bridge, and the tools' trust in its
    certificate: the stock tool's (a JVM trust store) and ours (its -truststore, PEM)."""

    broker: Any
    stomp: int
    jvm_trust: tuple[str, ...]
    crt: Path  # its certificate (PEM): our tool's -truststore
    trust: ssl.SSLContext
    stock_tool: list[Out] | None = None  # what the stock tool printed (SECURE_SEQUENCE)
    refusals: tuple[Out, Out] | None = None  # _secure_refusals


def _jvm_trusting(crt: Path) -> tuple[str, ...]:
    """The stock tool's JVM options trusting ``crt`` (a PKCS12 trust store holding it), as
    the stock admin guide has the trust store given to imqcmd -secure."""
    store = crt.with_name("trust.p12")
    keytool(
        "-importcert", "-noprompt", "-alias", "broker", "-file", str(crt),
        "-keystore", str(store), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    return (
        f"-Djavax.net.ssl.trustStore={store}",
        f"-Djavax.net.ssl.trustStorePassword={STORE_PASSWORD}",
        "-Djavax.net.ssl.trustStoreType=PKCS12",
    )


@pytest.fixture(scope="module")
def secure_brokers(
    brokers: Brokers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Secure]]:
    """Both brokers with ssladmin: ours with key material from our imqkeytool -broker,
    the stock one with a keystore from the JDK's keytool."""
    ours_crt = make_keystore(tmp_path_factory.mktemp("ours-keys"))
    # 127.0.0.1 among its names, so that our tool's host name check passes too.
    stock_crt, _ = stock_key_material(
        tmp_path_factory.mktemp("stock-keys"), KEY_PASSWORD, san="dns:localhost,ip:127.0.0.1"
    )
    with ExitStack() as stack:
        found: dict[str, Secure] = {}
        for which, crt, start in (
            ("ours", ours_crt, stomp_broker),
            ("stock", stock_crt, stock_stomp_broker),
        ):
            keys = (
                f"imq.keystore.file.dirpath={crt.parent}",
                f"imq.keystore.password={KEY_PASSWORD}",
            )
            b, stomp = stack.enter_context(start(SSLADMIN, *keys))
            found[which] = Secure(b, stomp, _jvm_trusting(crt), crt, client_trust_context(crt))
        yield found


def _secure_stock_outputs(secure: dict[str, Secure], which: str, passfile: Path) -> list[Out]:
    s = secure[which]
    if s.stock_tool is None:
        tool = _stock_tool(s.broker, passfile, s.jvm_trust)
        s.stock_tool = _run_sequence(s.broker, s.stomp, tool, SECURE_SEQUENCE)
    return s.stock_tool


def _plain(brokers: Brokers, which: str) -> Any:
    """The broker of ``brokers`` (no ssladmin service) of the same kind."""
    return brokers.ours if which == "ours" else brokers.stock


def _secure_refusals(brokers: Brokers, secure: dict[str, Secure], which: str) -> tuple[Out, Out]:
    """The stock tool's list bridge -secure from a JVM that trusts no certificate of the
    broker, and against the plain broker (no ssladmin)."""
    s = secure[which]
    if s.refusals is None:
        step = Step(("list", "bridge", "-secure"))
        untrusted = _stock_tool(s.broker, brokers.passfile)(step)
        no_tls = _stock_tool(_plain(brokers, which), brokers.passfile, s.jvm_trust)(step)
        s.refusals = (untrusted, no_tls)
    return s.refusals


def _refusal_text(brokers: Brokers, secure: dict[str, Secure], which: str) -> list[Out]:
    """:func:`_secure_refusals` without ports and the JDK client's warnings."""
    out = []
    for b, o in zip(
        (secure[which].broker, _plain(brokers, which)),
        _secure_refusals(brokers, secure, which),
        strict=True,
    ):
        p = b.portmapper_port
        out.append(Out(o.rc, _normalise(o.stdout, p), _JUL.sub("", _normalise(o.stderr, p))))
    return out


# The JDK client's warnings (java.util.logging, two lines each), printed from more than
# one thread in no fixed order: what the tool itself prints comes after them.
_JUL = re.compile(r"^(\w{3} \d+, \d{4} .* \w+|WARNING: .*)\n", re.M)


@pytest.mark.parametrize("which", ["ours", "stock"])
def test_stock_bridgemgr_secure(which: str, brokers: Brokers, secure_brokers: dict) -> None:
    """The stock imqbridgemgr -secure (over ssladmin): the same output from both brokers,
    and what a STOMP client finds meanwhile; refused as the stock broker refuses it by a
    JVM that does not trust the certificate and by a broker without ssladmin."""
    other = "stock" if which == "ours" else "ours"
    outs = _secure_stock_outputs(secure_brokers, which, brokers.passfile)
    expected = _secure_stock_outputs(secure_brokers, other, brokers.passfile)
    assert _differences(outs, expected, SECURE_SEQUENCE) == []

    listing, stop, stopped, pause, resume_stopped, start = outs[:6]
    pause2, resume, stop_t, start_all, last = outs[6:]
    assert listing.rc == 0 and "stomp          STOMP          STARTED" in listing.stdout
    assert (
        "Are you sure you want to perform operation [stop] on this bridge ? (y/n)[n]" in stop.stdout
    )
    assert stop.rc == 0 and "The operation [stop] on the bridge was successful." in stop.stdout
    assert "#stomp new connection refused; held connection closed; port mapper: " in stop.stdout
    assert "stomp          STOMP          STOPPED" in stopped.stdout
    for refused, op in ((pause, "pause"), (resume_stopped, "resume"), (pause2, "pause")):
        assert refused.rc == 1, refused
        assert f"[BSS4000]: Operation {op} is not supported by STOMP type bridge" in refused.stderr
        assert f"The operation [{op}] on the bridge failed." in refused.stderr
    assert start.rc == 0 and "The operation [start] on the bridge was successful." in start.stdout
    assert "#stomp new connection: CONNECTED; port mapper: " in start.stdout
    assert (
        resume.rc == 0 and "The operation [resume] on the bridge was successful." in resume.stdout
    )
    assert stop_t.rc == 0 and "#stomp new connection refused" in stop_t.stdout
    assert start_all.rc == 0 and "on the bridge(s) was successful." in start_all.stdout
    assert "#stomp new connection: CONNECTED" in start_all.stdout
    assert last.rc == 0 and "stomp          STOMP          STARTED" in last.stdout

    # It went over TLS: a JVM that does not trust the certificate fails the handshake;
    # without ssladmin (the plain brokers) the tool says so; alike from either broker.
    untrusted, no_tls = _secure_refusals(brokers, secure_brokers, which)
    assert untrusted.rc == 1 and "PKIX path building failed" in untrusted.stderr
    assert "Error while connecting to the broker on host '127.0.0.1'" in untrusted.stderr
    assert no_tls.rc == 1 and "[C4098]: Unknown broker service: ssladmin" in no_tls.stderr
    assert _refusal_text(brokers, secure_brokers, which) == _refusal_text(
        brokers, secure_brokers, other
    )


@pytest.mark.parametrize("which", ["ours", "stock"])
def test_our_imqbridgemgr_secure(which: str, brokers: Brokers, secure_brokers: dict) -> None:
    """Our imqbridgemgr -secure -truststore keystore.crt prints what the stock tool printed
    against the same broker."""
    s = secure_brokers[which]
    expected = _secure_stock_outputs(secure_brokers, which, brokers.passfile)
    got = _run_sequence(s.broker, s.stomp, _our_tool(s.broker, "admin", s.trust), SECURE_SEQUENCE)
    assert _differences(got, expected, SECURE_SEQUENCE) == []

    # Refused where the stock tool is refused (a certificate not trusted: the system's CAs
    # alone; no ssladmin), with the stock tool's lines around the reason, which ours
    # words itself (the stock one names the JDK client's failure: C4001, C4098).
    step = Step(("list", "bridge", "-secure"))
    stock = _refusal_text(brokers, secure_brokers, which)
    reasons = []
    for b, trust, theirs in (
        (s.broker, client_trust_context(), stock[0]),
        (_plain(brokers, which), s.trust, stock[1]),
    ):
        out = _our_tool(b, "admin", trust)(step)
        p = b.portmapper_port
        mine = Out(out.rc, _normalise(out.stdout, p), _normalise(out.stderr, p))
        assert (mine.rc, mine.stdout) == (theirs.rc, theirs.stdout)
        head, reason, *tail = mine.stderr.split("\n")
        assert [head, *tail] == [theirs.stderr.split("\n")[0], *theirs.stderr.split("\n")[2:]]
        reasons.append(reason)
    assert "certificate verify failed: self-signed certificate" in reasons[0]
    assert reasons[1] == "port mapper at 127.0.0.1:PORT lists no tls ADMIN service"


@pytest.mark.parametrize("which", ["ours", "stock"])
def test_stock_imqcmd_services_while_the_bridge_is_stopped(
    which: str, brokers: Brokers, secure_brokers: dict, tmp_path: Path
) -> None:
    """The stock imqcmd's list svc and query svc -n stomp with the STOMP bridge stopped
    (imqbridgemgr stop bridge -bn stomp) and started again.  The stock broker's bridge is
    not one of its services: never listed, "No such service".  Ours lists its listener as
    the service stomp, STOPPED while the bridge is (the port it listens on again after
    start), RUNNING after (docs/reference/stomp.md)."""
    lacking = imqcmd_missing()
    if lacking:
        pytest.fail(f"the stock imqcmd cannot run: {lacking}", pytrace=False)
    s = secure_brokers[which]
    where = f"{s.broker.host}:{s.broker.portmapper_port}"
    imqcmd = StockImqcmd(tmp_path)
    bridge = _stock_tool(s.broker, brokers.passfile, s.jvm_trust)
    seen = {}
    for state, command in (("stopped", "stop"), ("started", "start")):
        done = bridge(Step((command, "bridge", "-bn", "stomp", "-secure", "-f")))
        assert done.rc == 0, done
        listing = imqcmd.run(where, "list", "svc")
        assert listing.returncode == 0, listing
        rows = listing.table().by("Service Name")
        assert rows["admin"]["Service State"] == "RUNNING", listing
        assert rows["ssladmin"]["Service State"] == "RUNNING", listing
        seen[state] = (rows.get("stomp"), imqcmd.run(where, "query", "svc", "-n", "stomp"))
    if which == "stock":
        for row, query in seen.values():
            assert row is None
            assert query.returncode == 1, query
            assert "No such service: stomp" in query.output, query
            assert "Querying the service failed." in query.output, query
        return
    port = f"{s.stomp} (static)"
    for state, shown in (("stopped", "STOPPED"), ("started", "RUNNING")):
        row, query = seen[state]
        assert row == {"Service Name": "stomp", "Port Number": port, "Service State": shown}
        assert query.returncode == 0, query
        pairs = query.pairs()
        assert (pairs["Service State"], pairs["Port Number"]) == (shown, port), query
        assert pairs["Current Number of Connections"] == "0", query


def test_our_imqbridgemgr_command_line_secure(brokers: Brokers, secure_brokers: dict) -> None:
    """manage.py imqbridgemgr -secure -truststore keystore.crt: over ssladmin, the stock
    tool's output; refused (exit status 1) without ssladmin."""
    s = secure_brokers["ours"]
    root = Path(__file__).resolve().parent.parent.parent

    def run(b: Any, *args: str) -> subprocess.CompletedProcess:
        cmd = [".venv/bin/python", "manage.py", "imqbridgemgr", *args, "-secure"]
        cmd += ["-truststore", str(s.crt), "-b", f"{b.host}:{b.portmapper_port}"]
        cmd += ["-passfile", str(brokers.passfile)]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=120)

    ok = run(s.broker, "list", "bridge")
    assert ok.returncode == 0, ok.stderr
    stock = _secure_stock_outputs(secure_brokers, "ours", brokers.passfile)[0]
    assert _normalise(ok.stdout, s.broker.portmapper_port) == stock.stdout
    refused = run(brokers.ours, "list", "bridge")
    assert refused.returncode == 1
    assert "lists no tls ADMIN service" in refused.stderr
    assert "The operation [list] on the bridge(s) failed." in refused.stderr
