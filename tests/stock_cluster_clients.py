"""The stock clients of the mixed-cluster scenarios (tests/stock_cluster.py), many to a JVM.

A JVM start costs more CPU than all a short-lived stock client does: a scenario that ran
one Java program per client (60 in the topics scenario, one imqcmd JVM per administration
command in the master scenario) spent most of its CPU starting JVMs.  Here

* :class:`Shell` is one ``ClusterShell`` JVM that runs stock Java clients on command,
  each on a thread and a connection of its own (what the one-client programs did, by the
  same calls of the stock client), its lines read as they come (:class:`Client`);
* :class:`ImqcmdSession` runs stock imqcmd commands one at a time in one JVM
  (``ImqcmdBatch`` of tests/interop/imqcmd_stock.py: the stock ``BrokerCmd`` classes);
* :func:`compile_java` compiles whatever Java a scenario runs in one javac run.
"""

from __future__ import annotations

import itertools
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from broker.stock_paths import JAVA_CLIENT
from tests.interop.imqcmd_stock import EXIT_MARK, Result, StockImqcmd, _clean
from tests.jvmflags import JAVA, JAVAC

JARS = [JAVA_CLIENT / "imq.jar", JAVA_CLIENT / "jakarta.jms-api-3.1.0.jar"]
ADMIN_JAR = JAVA_CLIENT / "imqadmin.jar"


def classpath(*extra: Path) -> str:
    return ":".join(str(p) for p in (*extra, *JARS, ADMIN_JAR))


CLUSTER_SHELL = r"""
import jakarta.jms.*;
import java.io.*;
import java.util.*;
import java.util.concurrent.*;

/** The stock client's side of the mixed-cluster scenarios, many clients in one JVM.  Each
 *  stdin line "ID<TAB>MODE<TAB>ARG..." starts a command on a thread and a connection of its
 *  own (HOST PORT: a broker's port mapper; user guest); every line it prints goes out as
 *  "ID LINE", then "ID end".  A long-lived mode prints "ready", one "got TEXT" a message,
 *  and "closed" once "ID<TAB>close" (or the end of stdin) closed it; "cid" holds its client
 *  ID until then.  A failure prints "error WHY".
 *    pub HOST PORT TOPIC np|p PREFIX N        sends PREFIX-1..N, prints "sent"
 *    sub HOST PORT TOPIC [FLOWLIMIT]          a non-durable subscriber
 *    dsub HOST PORT CID TOPIC NAME            makes a durable subscription, closes it
 *    drecv HOST PORT CID TOPIC NAME           a durable subscriber
 *    unsub HOST PORT CID NAME                 prints "unsubscribed"
 *    shared HOST PORT TOPIC SUB durable|nondurable   a JMS 2.0 shared consumer
 *    cid HOST PORT CID                        "held" or "refused CLASS: WHY"
 *    qpub HOST PORT QUEUE PREFIX N            persistent queue messages, prints "sent"
 *    qsend HOST PORT QUEUE TEXT               one queue message, prints "sent"
 *    qrecv HOST PORT QUEUE MILLIS             "got TEXT", or "none" after MILLIS
 *    qsub HOST PORT QUEUE ack|noack           a queue consumer (noack: never acknowledges)
 *    mqshare HOST PORT CID TOPIC NAME|-       OpenMQ's JMQShare subscriber: durable NAME
 *                                             (factory with imqEnableSharedClientID), or "-"
 *                                             a non-durable one (imqEnableSharedSubscriptions,
 *                                             which the 6.9 client takes only with a
 *                                             namespace, as its resource adapter sets: one
 *                                             of its own per command) */
public class ClusterShell {
    static final Map<String, CountDownLatch> closing = new ConcurrentHashMap<>();

    static void say(String id, String line) {
        synchronized (System.out) {
            System.out.println(id + " " + line);
            System.out.flush();
        }
    }

    public static void main(String[] a) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t");
            CountDownLatch close = closing.computeIfAbsent(f[0], k -> new CountDownLatch(1));
            if (f[1].equals("close")) {
                close.countDown();
                continue;
            }
            new Command(f[0], Arrays.copyOfRange(f, 1, f.length), close).start();
        }
        for (CountDownLatch close : closing.values()) close.countDown();
    }

    static class Command extends Thread {
        final String id;
        final String[] a;
        final CountDownLatch close;
        boolean mqShare = false;
        String namespace = null;

        Command(String id, String[] a, CountDownLatch close) {
            super("command-" + id);
            this.id = id;
            this.a = a;
            this.close = close;
        }

        void say(String line) {
            ClusterShell.say(id, line);
        }

        Connection connect(String host, String port, String cid, String flow) throws JMSException {
            com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
            cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList,
                    "mq://" + host + ":" + port + "/jms");
            if (flow != null) {
                cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqConsumerFlowLimit, flow);
            }
            if (mqShare) cf.setProperty("imqEnableSharedClientID", "true");
            Connection c = cf.createConnection("guest", "guest");
            try {
                if (namespace != null) {
                    ((com.sun.messaging.jmq.jmsclient.ConnectionImpl) c).setRANamespaceUID(namespace);
                }
                if (cid != null) c.setClientID(cid);
            } catch (JMSException e) {
                c.close();
                throw e;
            }
            return c;
        }

        void receiveLoop(Connection c, MessageConsumer mc) throws Exception {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        Message m = mc.receive();
                        if (m == null) return;
                        say("got " + ((TextMessage) m).getText());
                    }
                } catch (JMSException e) {
                    // the connection closed under receive()
                }
            });
            t.setDaemon(true);
            c.start();
            say("ready");
            t.start();
            close.await();
            c.close();
            say("closed");
        }

        @Override
        public void run() {
            try {
                go();
            } finally {
                say("end");
            }
        }

        void go() {
            String mode = a[0], host = a[1], port = a[2];
            Connection c = null;
            try {
                switch (mode) {
                    case "pub": {
                        c = connect(host, port, null, null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        MessageProducer p = s.createProducer(s.createTopic(a[3]));
                        p.setDeliveryMode(a[4].equals("p") ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
                        int n = Integer.parseInt(a[6]);
                        for (int i = 1; i <= n; i++) p.send(s.createTextMessage(a[5] + "-" + i));
                        say("sent");
                        break;
                    }
                    case "sub": {
                        c = connect(host, port, null, a.length > 4 ? a[4] : null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        receiveLoop(c, s.createConsumer(s.createTopic(a[3])));
                        break;
                    }
                    case "dsub": {
                        c = connect(host, port, a[3], null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        s.createDurableSubscriber(s.createTopic(a[4]), a[5]).close();
                        say("subscribed");
                        break;
                    }
                    case "drecv": {
                        c = connect(host, port, a[3], null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        receiveLoop(c, s.createDurableSubscriber(s.createTopic(a[4]), a[5]));
                        break;
                    }
                    case "unsub": {
                        c = connect(host, port, a[3], null);
                        c.createSession(false, Session.AUTO_ACKNOWLEDGE).unsubscribe(a[4]);
                        say("unsubscribed");
                        break;
                    }
                    case "shared": {
                        c = connect(host, port, null, null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        Topic t = s.createTopic(a[3]);
                        receiveLoop(c, a[5].equals("durable")
                                ? s.createSharedDurableConsumer(t, a[4])
                                : s.createSharedConsumer(t, a[4]));
                        break;
                    }
                    case "qpub": {
                        c = connect(host, port, null, null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        MessageProducer p = s.createProducer(s.createQueue(a[3]));
                        int n = Integer.parseInt(a[5]);
                        for (int i = 1; i <= n; i++) p.send(s.createTextMessage(a[4] + "-" + i));
                        say("sent");
                        break;
                    }
                    case "qsend": {
                        c = connect(host, port, null, null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        s.createProducer(s.createQueue(a[3])).send(s.createTextMessage(a[4]));
                        say("sent");
                        break;
                    }
                    case "qrecv": {
                        c = connect(host, port, null, null);
                        c.start();
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        Message m = s.createConsumer(s.createQueue(a[3])).receive(Long.parseLong(a[4]));
                        say(m == null ? "none" : "got " + ((TextMessage) m).getText());
                        break;
                    }
                    case "qsub": {
                        c = connect(host, port, null, null);
                        Session s = c.createSession(false,
                                a[4].equals("ack") ? Session.AUTO_ACKNOWLEDGE : Session.CLIENT_ACKNOWLEDGE);
                        receiveLoop(c, s.createConsumer(s.createQueue(a[3])));
                        break;
                    }
                    case "mqshare": {
                        mqShare = true;
                        if (a[5].equals("-")) namespace = "ns-" + ProcessHandle.current().pid() + "-" + id;
                        c = connect(host, port, a[3], null);
                        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        Topic t = s.createTopic(a[4]);
                        receiveLoop(c, a[5].equals("-")
                                ? s.createConsumer(t)
                                : s.createDurableSubscriber(t, a[5]));
                        break;
                    }
                    case "cid": {
                        try {
                            c = connect(host, port, a[3], null);
                        } catch (JMSException e) {
                            say("refused " + e.getClass().getSimpleName() + ": " + e.getMessage());
                            break;
                        }
                        say("held");
                        close.await();
                        break;
                    }
                    default:
                        throw new IllegalArgumentException(mode);
                }
            } catch (Exception e) {
                say("error " + e);
            } finally {
                if (c != null) {
                    try {
                        c.close();
                    } catch (JMSException e) {
                        say("error closing: " + e);
                    }
                }
            }
        }
    }
}
"""


def compile_java(out: Path, sources: dict[str, str], files: Iterable[Path] = ()) -> Path:
    """javac ``sources`` (class name -> source text) and ``files`` into ``out`` in one run,
    against the stock client and imqcmd jars; ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [str(f) for f in files]
    for name, text in sources.items():
        (out / f"{name}.java").write_text(text)
        paths.append(str(out / f"{name}.java"))
    cmd = [*JAVAC, "-encoding", "UTF-8", "-cp", classpath(), "-d", str(out), *paths]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out ({timeout:g} s) waiting for {what}")
        time.sleep(0.05)


class Client:
    """One command of a :class:`Shell`: its lines as they come."""

    def __init__(self, shell: Shell, ident: str, args: list[str]) -> None:
        self.shell = shell
        self.ident = ident
        self.args = args
        self.lines: list[str] = []
        self.ended = False

    def got(self) -> list[str]:
        return [ln[4:] for ln in list(self.lines) if ln.startswith("got ")]

    def wait_line(self, prefixes: tuple[str, ...], timeout: float = 60) -> str:
        """The first line starting with one of ``prefixes`` (or "error": it failed)."""

        def first() -> str | None:
            return next(
                (ln for ln in list(self.lines) if ln.startswith((*prefixes, "error"))), None
            )

        wait_until(lambda: first() is not None or self.ended, timeout, f"{prefixes} {self.args}")
        line = first()
        if line is None:
            raise AssertionError(f"{self.args} ended without {prefixes}: {self.lines}")
        return line

    def close(self, timeout: float = 30) -> list[str]:
        """End it (a long-lived mode closes its connection) and wait for its end; its
        lines."""
        self.shell.send(self.ident, "close")
        try:
            wait_until(lambda: self.ended, timeout, f"the end of {self.args}")
        except AssertionError:
            self.lines.append(f"error: no end within {timeout:g} s")
        return self.lines


class Shell:
    """One ``ClusterShell`` JVM (compiled by :func:`compile_java` from CLUSTER_SHELL)."""

    def __init__(self, classes: Path) -> None:
        self.proc = subprocess.Popen(
            [*JAVA, "-cp", classpath(classes), "ClusterShell"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.clients: dict[str, Client] = {}
        self.stray: list[str] = []  # what the JVM said apart from a command
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            ident, _, line = raw.rstrip("\n").partition(" ")
            client = self.clients.get(ident)
            if client is None:
                self.stray.append(raw.rstrip("\n"))
            elif line == "end":
                client.ended = True
            else:
                client.lines.append(line)
        for client in list(self.clients.values()):  # the JVM is gone, and they with it
            if not client.ended:
                client.lines.append(f"error: the JVM ended {self.stray[-20:]}")
                client.ended = True

    def send(self, *fields: str) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            try:
                self.proc.stdin.write("\t".join(fields) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the JVM is gone: its clients say so

    def start(self, *args: object) -> Client:
        """A command (a mode and its arguments) started."""
        client = Client(self, str(next(self._ids)), [str(a) for a in args])
        self.clients[client.ident] = client
        self.send(client.ident, *client.args)
        return client

    def run(self, *args: object, timeout: float = 60) -> list[str]:
        """A one-shot command to its end (a "cid" let go at once): its lines."""
        return self.start(*args).close(timeout)

    def stop(self) -> None:
        """Close stdin: every command ends, then the JVM."""
        if self.proc.poll() is None:
            with self._lock:
                try:
                    assert self.proc.stdin is not None
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)

    def kill(self) -> None:
        """SIGKILL: its connections drop without a goodbye, as a crashed client's do."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._reader.join(5)


class ImqcmdSession:
    """The stock imqcmd's commands, one at a time, in one ``ImqcmdBatch`` JVM (a new one
    after a command that failed: ImqcmdBatch ends there, as a failed imqcmd would)."""

    def __init__(self, tmp: Path, classes: Path) -> None:
        self.imqcmd = StockImqcmd(tmp, classes)
        self.classes = classes
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen:
        home = self.imqcmd.home
        proc = subprocess.Popen(
            [*JAVA, f"-Dimq.home={home}", f"-Dimq.varhome={home / 'var'}"]
            + ["-cp", classpath(self.classes), "ImqcmdBatch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.lines = lines
        return proc

    def run(self, broker: str, *args: str, timeout: float = 120) -> Result:
        """``imqcmd ARGS -b BROKER -u admin``, as one imqcmd run would answer it."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        assert self.proc.stdin is not None
        self.proc.stdin.write("\t".join([*args, *self.imqcmd.common(broker)]) + "\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                return Result(list(args), -1, "".join(out) + f"\n(no answer in {timeout:g} s)")
            if line is None:
                self.proc = None
                return Result(list(args), -1, _clean("".join(out)) + "\n(ImqcmdBatch ended)")
            if EXIT_MARK in line:
                before, _, rc = line.partition(EXIT_MARK)
                out.append(before)
                code = int(rc.strip())
                if code != 0:  # ImqcmdBatch ends after a failed command
                    self.close()
                return Result(list(args), code, _clean("".join(out)))
            out.append(line)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                try:
                    self.proc.stdin.close()
                    self.proc.wait(30)
                except (BrokenPipeError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait(5)
            self.proc = None
