"""The stock OpenMQ 6.9 imqcmd (imqadmin.jar) run against a broker, its output parsed into
tables: for tests/interop/test_imqcmd_stock.py and bench/imqcmd_compare.py.

* :func:`missing` names what running it needs and this machine lacks (java, javac, jars);
* :class:`StockImqcmd` runs one command through the real ``BrokerCmd`` entry point (one
  JVM each), or many in one JVM (:meth:`StockImqcmd.batch`: ``ImqcmdBatch`` below calls the
  same stock classes ``BrokerCmd.main`` calls -- its option parser, ``checkOptions`` and
  ``CmdRunner`` -- for each command line, so a sequence costs one JVM start);
* :func:`parse` turns what imqcmd printed into :class:`Section` s: free text, ``name
  value`` pairs (query) and tables (list, metrics), columns named by their title rows;
* :class:`Workload` (``ImqcmdWorkload.java``, the stock JMS client) leaves a broker with
  something to list: a queue with messages, a topic with an inactive durable subscription
  holding messages, an open connection with a consumer and producers, an open transaction.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from broker.stock_paths import JAVA_CLIENT as JAVA_DIR
from tests import jvmcds
from tests.jvmflags import JAVA, JAVAC

ROOT = Path(__file__).resolve().parent.parent.parent
JARS = [JAVA_DIR / n for n in ("imqadmin.jar", "imq.jar", "jakarta.jms-api-3.1.0.jar")]
BROKER_CMD = "com.sun.messaging.jmq.admin.apps.broker.BrokerCmd"
EXIT_MARK = "##imqcmd-exit "

BATCH_SOURCE = """\
import java.io.*;
import com.sun.messaging.jmq.admin.apps.broker.*;

/** Runs stock imqcmd command lines (tab-separated arguments, one command a line on stdin)
 *  in one JVM: BrokerCmd.main's own steps (parse, check, run) without its System.exit. */
public class ImqcmdBatch {
    public static void main(String[] a) throws Exception {
        System.setErr(System.out);  // one stream, in order
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        for (String line; (line = in.readLine()) != null; ) {
            int rc;
            try {
                BrokerCmdProperties p = BrokerCmdOptionParser.parseArgs(line.split("\\t"));
                BrokerCmd.checkOptions(p);
                rc = new CmdRunner(p).runCommands();
            } catch (Exception e) {
                System.out.println("imqcmd refused the command: " + e);
                rc = 1;
            }
            System.out.println("@MARK@" + rc);
            System.out.flush();
            // CmdRunner leaves a failed command's admin connection open: a fresh JVM for
            // the rest, as one imqcmd per command would have.
            if (rc != 0) break;
        }
        System.exit(0);
    }
}
""".replace("@MARK@", EXIT_MARK)

WORKLOAD_SOURCE = """\
import jakarta.jms.*;

/** Leaves a broker with something to list: queue cmp.q with 3 messages (and one more sent
 *  in an open transaction), topic cmp.t with the inactive durable subscription cmp-dur
 *  holding 2, a consumer on cmp.idle, producers.  Prints READY and holds it all until
 *  stdin closes, then rolls the transaction back and closes. */
public class ImqcmdWorkload {
    public static void main(String[] a) throws Exception {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList,
                "mq://" + a[0] + ":" + a[1] + "/jms");
        Connection c = cf.createConnection("guest", "guest");
        c.setClientID("cmp-client");
        c.start();
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("cmp.q");
        Topic t = s.createTopic("cmp.t");
        MessageProducer p = s.createProducer(null);
        String body = "x".repeat(100);
        for (int i = 0; i < 3; i++) p.send(q, s.createTextMessage(body));
        TopicSubscriber d = s.createDurableSubscriber(t, "cmp-dur");
        d.close();
        for (int i = 0; i < 2; i++) p.send(t, s.createTextMessage(body));
        MessageConsumer held = s.createConsumer(s.createQueue("cmp.idle"));
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        tx.createProducer(q).send(tx.createTextMessage(body));
        System.out.println("READY");
        System.out.flush();
        while (System.in.read() >= 0) { }
        tx.rollback();
        c.close();
    }
}
"""


Q = ["-t", "q", "-n", "cmp.q"]
T = ["-t", "t", "-n", "cmp.t"]
ONE = ["-msp", "1", "-int", "1"]

# The imqcmd sequence the test and bench/imqcmd_compare.py run, in order, while the
# Workload holds its connection (shutdown bkr comes after, on its own).
SEQUENCE: list[list[str]] = [
    ["query", "bkr"],
    ["list", "dst"],
    ["list", "dst", "-t", "q"],
    ["list", "dst", "-t", "t"],
    ["query", "dst", *Q],
    ["query", "dst", *T],
    ["list", "svc"],
    ["query", "svc", "-n", "jms"],
    ["list", "cxn"],
    ["list", "dur"],
    ["list", "dur", "-d", "cmp.t"],
    ["list", "txn"],
    ["list", "bkr"],
    ["metrics", "bkr", *ONE],
    ["metrics", "bkr", "-m", "rts", *ONE],
    ["metrics", "bkr", "-m", "cxn", *ONE],
    ["metrics", "dst", *Q, *ONE],
    ["metrics", "dst", *Q, "-m", "rts", *ONE],
    ["metrics", "dst", *T, "-m", "con", *ONE],
    ["metrics", "svc", "-n", "jms", *ONE],
    ["metrics", "svc", "-n", "jms", "-m", "rts", *ONE],
    ["metrics", "svc", "-n", "jms", "-m", "cxn", *ONE],
    ["pause", "dst", *Q],
    ["list", "dst", "-t", "q"],
    ["compact", "dst", *Q],
    ["resume", "dst", *Q],
    ["pause", "dst", *T, "-pst", "PRODUCERS"],
    ["query", "dst", *T],
    ["resume", "dst", *T],
    ["pause", "svc", "-n", "jms"],
    ["list", "svc"],
    ["resume", "svc", "-n", "jms"],
    ["pause", "bkr"],
    ["query", "svc", "-n", "jms"],
    ["resume", "bkr"],
    ["update", "dst", *Q, "-o", "maxNumMsgs=1000", "-o", "limitBehavior=FLOW_CONTROL"],
    ["query", "dst", *Q],
    ["compact", "dst", *Q],
]


def missing() -> list[str]:
    """What running the stock imqcmd and the workload needs and this machine lacks."""
    out = [f"the stock OpenMQ jar {j}" for j in JARS if not j.is_file()]
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            out.append(f"{tool} (a JDK 17: apt-get install openjdk-17-jdk-headless)")
    return out


def classpath(*extra: Path) -> str:
    return os.pathsep.join(str(p) for p in (*JARS, *extra))


def compile_java(tmp: Path) -> Path:
    """ImqcmdBatch and ImqcmdWorkload compiled once a test run for every xdist worker (in
    ``tmp`` if this run has not yet): their jar in the run's shared directory
    (tests/jvmcds.py)."""
    jar = jvmcds.SHARE / "imqcmd-programs.jar"
    with open(jvmcds.SHARE / "imqcmd-programs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jar.is_file():
            out = _javac(tmp)
            part = jar.with_suffix(".part")
            with zipfile.ZipFile(part, "w") as z:
                for f in sorted(out.rglob("*.class")):
                    z.write(f, f.relative_to(out).as_posix())
            os.replace(part, jar)
    return jar


def _javac(tmp: Path) -> Path:
    src, out = tmp / "java-src", tmp / "classes"
    src.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    (src / "ImqcmdBatch.java").write_text(BATCH_SOURCE)
    (src / "ImqcmdWorkload.java").write_text(WORKLOAD_SOURCE)
    done = subprocess.run(
        [*JAVAC, "-cp", classpath(), "-d", str(out)]
        + [str(src / "ImqcmdBatch.java"), str(src / "ImqcmdWorkload.java")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


def _make_archive(java: list[str]) -> None:
    """imqcmd's archive (tests/jvmcds.py), from ``list dst`` against a port where nothing
    listens: its option parsing, messages and client classes up to the connection attempt,
    and no broker touched."""
    passfile = jvmcds.SHARE / "imqcmd-passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    argv = [BROKER_CMD, "list", "dst", "-b", "127.0.0.1:1", "-u", "admin", "-passfile"]

    def dump(options: list[str]) -> list[str]:
        cmd = [*java, *options, *argv, str(passfile), "-f"]
        subprocess.run(cmd, capture_output=True, timeout=120, check=False)
        return java

    jvmcds.make("imqcmd", dump)


@dataclass
class Result:
    """One imqcmd command: its arguments, exit status and output (stderr folded in)."""

    args: list[str]
    returncode: int
    output: str

    @property
    def sections(self) -> list[Section]:
        return parse(self.output)

    def tables(self) -> list[Table]:
        return [s.table for s in self.sections if s.table is not None]

    def table(self, index: int = -1) -> Table:
        """A table of the output (the last by default: the first names the broker)."""
        found = self.tables()
        if not found:
            raise AssertionError(f"no table in the output of {self.args}:\n{self.output}")
        return found[index]

    def pairs(self) -> dict[str, str]:
        """Every ``name value`` line (query): indented names under their heading."""
        out: dict[str, str] = {}
        for s in self.sections:
            out.update(s.pairs)
        return out

    def text(self) -> list[str]:
        return [line for s in self.sections for line in s.text]

    def __str__(self) -> str:
        return f"$ imqcmd {' '.join(self.args)}  (exit {self.returncode})\n{self.output}"


class StockImqcmd:
    """The stock imqcmd as the admin user, against ``host:port``; files under ``tmp``."""

    def __init__(self, tmp: Path, classes: Path | None = None, password: str = "admin") -> None:
        self.home = tmp / "imqhome"
        (self.home / "var").mkdir(parents=True, exist_ok=True)
        self.passfile = tmp / "imqcmd-passfile"
        self.passfile.write_text(f"imq.imqcmd.password={password}\n")
        self.classes = classes

    def _java(self, main: str) -> list[str]:
        # The archive's class path is the jars alone: a command's may add ImqcmdBatch's.
        java = [*JAVA, f"-Dimq.home={self.home}", f"-Dimq.varhome={self.home / 'var'}"]
        if not (jvmcds.SHARE / "imqcmd.tried").exists():
            _make_archive([*java, "-cp", classpath()])
        extra = [self.classes] if self.classes else []
        return [*java, jvmcds.argfile("imqcmd"), "-cp", classpath(*extra), main]

    def common(self, broker: str, user: str = "admin") -> list[str]:
        return ["-b", broker, "-u", user, "-passfile", str(self.passfile), "-f"]

    def run(self, broker: str, *args: str, timeout: float = 120) -> Result:
        """One command through BrokerCmd.main (its own JVM)."""
        argv = [*args, *self.common(broker)]
        p = subprocess.run(
            self._java(BROKER_CMD) + argv,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(list(args), p.returncode, _clean(p.stdout + p.stderr))

    def batch(self, broker: str, commands: list[list[str]], timeout: float = 300) -> list[Result]:
        """Many commands in as few JVMs as they allow (ImqcmdBatch; needs ``classes``): one,
        and a new one after each command that fails.  In order."""
        if self.classes is None:
            raise RuntimeError("batch needs the compiled ImqcmdBatch (compile_java)")
        results: list[Result] = []
        while len(results) < len(commands):
            rest = commands[len(results) :]
            done = self._batch(broker, rest, timeout)
            if not done:
                raise RuntimeError(f"ImqcmdBatch ran none of {rest}")
            results += done
        return results

    def _batch(self, broker: str, commands: list[list[str]], timeout: float) -> list[Result]:
        lines = ["\t".join([*c, *self.common(broker)]) for c in commands]
        p = subprocess.run(
            self._java("ImqcmdBatch"),
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        # stdout: out0 MARK rc0 \n out1 MARK rc1 \n ... (a command's output, its status)
        chunks = p.stdout.split(EXIT_MARK)
        outputs, codes = [chunks[0]], []
        for chunk in chunks[1:]:
            rc, _, rest = chunk.partition("\n")
            codes.append(int(rc.strip()))
            outputs.append(rest)
        if len(codes) < len(commands) and (not codes or codes[-1] == 0):
            raise RuntimeError(
                f"ImqcmdBatch stopped after {len(codes)} of {len(commands)} commands "
                f"(exit {p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
            )
        return [
            Result(list(cmd), rc, _clean(out))
            for cmd, rc, out in zip(commands, codes, outputs, strict=False)
        ]


class Workload:
    """ImqcmdWorkload against a broker, held open until :meth:`close`."""

    def __init__(self, classes: Path, host: str, port: int) -> None:
        self.proc = subprocess.Popen(
            [*JAVA, jvmcds.argfile("imqcmd"), "-cp", classpath(classes), "ImqcmdWorkload"]
            + [host, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        seen = []
        for line in self.proc.stdout:
            seen.append(line)
            if line.strip() == "READY":
                return
        self.proc.wait(30)
        raise RuntimeError("ImqcmdWorkload failed:\n" + "".join(seen))

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


# -- parsing ------------------------------------------------------------------------------

_DASHES = re.compile(r"^\s*-{4,}\s*$")
_PAIR = re.compile(r"^(\s*)(\S(?:.*?\S)?)(?:\s{2,}(.*?))?\s*$")
# imqcmd's warning about a passfile in clear text: said on every run, never a result.
_NOISE = ("Warning [A2016]",)


def _clean(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if not any(line.startswith(n) for n in _NOISE)
    )


@dataclass
class Table:
    """A table as BrokerCmdPrinter prints it: column names (a spanning title row's text
    joined before the name under it, as "Msgs Count") and rows of cell strings."""

    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def dicts(self) -> list[dict[str, str]]:
        return [dict(zip(self.columns, r, strict=False)) for r in self.rows]

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def by(self, name: str) -> dict[str, dict[str, str]]:
        """Rows keyed by one column's value."""
        return {d[name]: d for d in self.dicts()}


@dataclass
class Section:
    """A run of imqcmd's output: free text lines, ``name value`` pairs, or one table."""

    text: list[str] = field(default_factory=list)
    pairs: dict[str, str] = field(default_factory=dict)
    table: Table | None = None


def parse(output: str) -> list[Section]:
    """Split imqcmd's output into sections of text, pairs and tables."""
    lines = output.splitlines()
    out: list[Section] = []
    i = 0
    heading = ""
    while i < len(lines):
        line = lines[i]
        if _DASHES.match(line):
            # dashes, title rows, dashes, rows until a blank line
            j = i + 1
            titles = []
            while j < len(lines) and not _DASHES.match(lines[j]):
                titles.append(lines[j])
                j += 1
            j += 1
            rows = []
            while j < len(lines) and lines[j].strip():
                rows.append(lines[j])
                j += 1
            out.append(Section(table=_table(titles, rows)))
            i = j
            continue
        i += 1
        if not line.strip():
            continue
        m = _PAIR.match(line)
        if m and (m.group(3) is not None or line.rstrip() != line):
            indent, name, value = m.group(1), m.group(2), m.group(3) or ""
            if indent:
                name = f"{heading} / {name}"
            else:
                heading = name
            if not out or out[-1].table is not None or out[-1].text:
                out.append(Section())
            out[-1].pairs[name] = value
        else:
            if not out or out[-1].table is not None or out[-1].pairs:
                out.append(Section())
            out[-1].text.append(line.strip())
    return out


def _spans(line: str) -> list[tuple[int, int, str]]:
    """The runs of text of a line separated by two or more spaces: (start, end, text)."""
    return [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]


def _groups(line: str, cols: list[list[int]]) -> list[tuple[int, int, str]]:
    """The columns each text of a spanning title row stands over: BrokerCmdPrinter
    centres it over its group of columns, so of the column ranges around the text
    (between the groups before and after) the one centred nearest to the text's centre."""
    spans = _spans(line)
    hits = [[i for i, (a, b) in enumerate(cols) if s < b and e > a] for s, e, _ in spans]
    out = []
    prev_end = -1
    for k, (s, e, text) in enumerate(spans):
        if not hits[k]:
            continue
        nxt = next((h[0] for h in hits[k + 1 :] if h), len(cols))
        centre = (s + e) / 2
        best: tuple[float, int, int] | None = None
        for i in range(prev_end + 1, hits[k][0] + 1):
            for j in range(hits[k][-1], nxt):
                off = abs((cols[i][0] + cols[j][1]) / 2 - centre)
                cand = (off - (j - i) * 1e-3, i, j)  # a tie goes to the wider group
                if best is None or cand < best:
                    best = cand
        assert best is not None
        out.append((best[1], best[2], text))
        prev_end = best[2]
    return out


def _table(titles: list[str], rows: list[str]) -> Table:
    base = titles[-1:] + rows
    width = max((len(x) for x in base), default=0)
    padded = [x.ljust(width) for x in base]
    blank = [all(p[c] == " " for p in padded) for c in range(width)]
    # Columns: runs of non-blank positions; one blank inside ("Avg Size", "39197
    # (static)") does not split them, two or more do.
    cols: list[list[int]] = []
    for c in range(width):
        if blank[c]:
            continue
        if cols and c - cols[-1][1] <= 1:
            cols[-1][1] = c + 1
        else:
            cols.append([c, c + 1])
    parts: list[list[str]] = [[] for _ in cols]
    for t in titles[:-1]:
        for first, last, text in _groups(t, cols):
            for i in range(first, last + 1):
                parts[i].append(text)
    for i, (a, b) in enumerate(cols):
        parts[i] += [text for s, e, text in _spans(titles[-1]) if s < b and e > a][:1]
    names = [" ".join(p) for p in parts]
    table = Table(names)
    for r in rows:
        table.rows.append([r[a:b].strip() if a < len(r) else "" for a, b in cols])
    return table


__all__ = [
    "JARS",
    "SEQUENCE",
    "Result",
    "Section",
    "StockImqcmd",
    "Table",
    "Workload",
    "compile_java",
    "missing",
    "parse",
]
