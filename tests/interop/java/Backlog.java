import jakarta.jms.*;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Enumeration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntPredicate;
import java.util.function.IntUnaryOperator;

/**
 * A backlog many times the broker's memory budget, sent with no consumer and drained after,
 * with the stock client (tests/interop/test_java_backlog.py starts the brokers).
 *
 * <pre>  Backlog HOST PORT queue SUFFIX N
 *  Backlog HOST PORT durable SUFFIX N
 *  Backlog HOST PORT nonpersistent SUFFIX N
 *  Backlog HOST PORT restarted SUFFIX N
 *  Backlog HOST PORT held SUFFIX N</pre>
 *
 * Every message is a BytesMessage of {@link #BODY} bytes (a pattern of its sequence number,
 * checked whole on receipt) with int properties n (the sequence number, from 0) and r (n % 3);
 * a selector consumer takes "r = 0". A receiver checks that it gets exactly the messages it
 * should, each once, in the order the broker must deliver them: priority descending, FIFO
 * within a priority.
 *
 * "queue", "durable" and "nonpersistent" fill, print "info pause filled" and wait for a line on
 * stdin (the test reads the broker's memory meanwhile), then drain:
 * <ul>
 * <li>queue: queue jbk_q_SUFFIX takes N persistent messages of priority 4, queue jbk_p_SUFFIX
 * N/4 of mixed priorities (0-9); a selector consumer then drains jbk_p's "r = 0", a plain one the
 * rest of it, and a plain one all of jbk_q.</li>
 * <li>durable: two inactive durable subscriptions of topic jbk_t_SUFFIX (client ID
 * jbk_SUFFIX), "all" and "sel" (selector "r = 0"), take N persistent messages, the first 3/4 of
 * priority 4 and the rest mixed; each is reattached and drained, then unsubscribed.</li>
 * <li>nonpersistent: queue jbk_n_SUFFIX takes N non-persistent messages, drained after the
 * pause; then queue jbk_m_SUFFIX takes N/4, persistent (even n) and non-persistent (odd n)
 * in turn, and the program ends (the test restarts the broker).</li>
 * </ul>
 * "restarted": after the restart, jbk_m_SUFFIX holds its N/4 persistent messages, once each, in
 * order, and no non-persistent one.
 *
 * "held SUFFIX N" (a broker that holds producers, short of disk): a producer sends N persistent
 * messages to jbk_h_SUFFIX from a thread of its own on a connection with imqReconnectEnabled;
 * its send waits in the client for the broker's RESUME_FLOW ("info waiting_in FRAMES", "info sent
 * K": the sends that returned), and the program prints "info pause held" and waits for a line
 * on stdin (the test restarts the broker without the hold meanwhile); then, reconnected, every
 * send returns and jbk_h_SUFFIX holds the N messages, once each, in order.
 */
public class Backlog {
    static final int BODY = 10 * 1024;
    /** How long one send may take before the producer counts as stalled. */
    static final long SEND_LIMIT_MS = 30_000;
    /** How long a receive may wait for the next message (read back from disk first). */
    static final long RECEIVE_MS = 30_000;

    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], mode = a[2], sfx = a[3];
        int n = a.length > 4 ? Integer.parseInt(a[4]) : 0;
        switch (mode) {
            case "queue" -> queue(host, port, sfx, n);
            case "durable" -> durable(host, port, sfx, n);
            case "nonpersistent" -> nonPersistent(host, port, sfx, n);
            case "restarted" -> restarted(host, port, sfx, n);
            case "held" -> held(host, port, sfx, n);
            default -> throw new IllegalArgumentException(mode);
        }
        Checks.done();
    }

    // -- what is sent and what must come back ------------------------------------------

    /** One message sent: its sequence number and priority. */
    record Sent(int n, int priority) {}

    /** Mixed priorities 0-9, interleaved: 0, 7, 4, 1, 8, 5, 2, 9, 6, 3, 0, ... */
    static int mixed(int n) {
        return (n * 7) % 10;
    }

    static byte[] body(int n) {
        byte[] b = new byte[BODY];
        for (int i = 0; i < BODY; i++) {
            b[i] = (byte) (n * 31 + i);
        }
        return b;
    }

    /** The order a consumer must get ``sent`` in: priority descending, FIFO within one. */
    static List<Sent> deliveryOrder(List<Sent> sent) {
        List<Sent> out = new ArrayList<>(sent);
        out.sort(Comparator.comparingInt((Sent s) -> -s.priority()));  // stable: FIFO kept
        return out;
    }

    static List<Sent> selected(List<Sent> sent) {
        List<Sent> out = new ArrayList<>();
        for (Sent s : sent) {
            if (s.n() % 3 == 0) {
                out.add(s);
            }
        }
        return out;
    }

    static List<Sent> notSelected(List<Sent> sent) {
        List<Sent> out = new ArrayList<>(sent);
        out.removeAll(selected(sent));
        return out;
    }

    // -- sending --------------------------------------------------------------------------

    /**
     * Sends one message per element of ``plan`` on a thread of its own, each within
     * {@link #SEND_LIMIT_MS} and all within ``totalMs``; prints the slowest send and the total
     * time ("info NAME_slowest_ms", "info NAME_total_ms").
     */
    static void fill(String name, Session s, Destination d, List<Sent> plan, IntPredicate persistent, long totalMs)
            throws Exception {
        MessageProducer p = s.createProducer(d);
        AtomicInteger done = new AtomicInteger();
        AtomicLong slowest = new AtomicLong();
        AtomicLong sendStarted = new AtomicLong();
        Throwable[] failed = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                for (Sent x : plan) {
                    BytesMessage m = s.createBytesMessage();
                    m.writeBytes(body(x.n()));
                    m.setIntProperty("n", x.n());
                    m.setIntProperty("r", x.n() % 3);
                    long t0 = System.nanoTime();
                    sendStarted.set(t0);
                    int mode = persistent.test(x.n()) ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT;
                    p.send(m, mode, x.priority(), 0);
                    long took = (System.nanoTime() - t0) / 1_000_000;
                    slowest.accumulateAndGet(took, Math::max);
                    done.incrementAndGet();
                }
            } catch (Throwable e) {
                failed[0] = e;
            }
        }, "producer-" + name);
        t.setDaemon(true);
        long start = System.nanoTime();
        t.start();
        while (t.isAlive()) {
            t.join(200);
            long now = System.nanoTime();
            long inSend = (now - sendStarted.get()) / 1_000_000;
            if (sendStarted.get() != 0 && t.isAlive() && inSend > SEND_LIMIT_MS) {
                throw new AssertionError("the producer stalled: send " + done.get() + " of " + plan.size()
                        + " has not returned after " + inSend + " ms");
            }
            if ((now - start) / 1_000_000 > totalMs) {
                throw new AssertionError("the producer is too slow: " + done.get() + " of " + plan.size()
                        + " sent in " + totalMs + " ms");
            }
        }
        if (failed[0] != null) {
            throw new AssertionError("send " + done.get() + " of " + plan.size() + " failed: " + failed[0], failed[0]);
        }
        Checks.expectEquals(plan.size(), done.get(), "sends that returned");
        p.close();
        Checks.info(name + "_slowest_ms", slowest.get());
        Checks.info(name + "_total_ms", (System.nanoTime() - start) / 1_000_000);
    }

    // -- receiving ------------------------------------------------------------------------

    /**
     * Receives from ``k`` exactly ``want``, in that order, each with its body intact, then
     * nothing more; acknowledges as it goes (CLIENT_ACKNOWLEDGE, every 100).
     */
    static void drain(String name, MessageConsumer k, List<Sent> want) throws JMSException {
        long start = System.nanoTime();
        int i = 0;
        Message last = null;
        try {
            for (Sent x : want) {
                Message m = k.receive(RECEIVE_MS);
                if (m == null) {
                    throw new AssertionError("got " + i + " of " + want.size() + " messages, then none for "
                            + RECEIVE_MS + " ms (next expected n=" + x.n() + ")");
                }
                last = m;
                int got = m.getIntProperty("n");
                if (got != x.n()) {
                    throw new AssertionError("message " + i + ": want n=" + x.n() + " (priority " + x.priority()
                            + "), got n=" + got + " (priority " + m.getJMSPriority() + ")"
                            + (m.getJMSRedelivered() ? " redelivered" : ""));
                }
                Checks.expectEquals(x.priority(), m.getJMSPriority(), "priority of n=" + got);
                Checks.expect(!m.getJMSRedelivered(), "n=" + got + " came redelivered");
                Checks.expect(m instanceof BytesMessage, "n=" + got + " is " + m.getClass().getName());
                BytesMessage bm = (BytesMessage) m;
                Checks.expectEquals((long) BODY, bm.getBodyLength(), "body length of n=" + got);
                byte[] b = new byte[BODY];
                bm.readBytes(b);
                Checks.expect(Arrays.equals(body(got), b), "the body of n=" + got + " differs from what was sent");
                i++;
                if (i % 100 == 0) {
                    m.acknowledge();
                }
            }
            if (last != null) {
                last.acknowledge();
            }
            Message extra = k.receive(500);
            if (extra != null) {
                throw new AssertionError("after the " + want.size() + " expected, one more: n="
                        + extra.getIntProperty("n") + (extra.getJMSRedelivered() ? " redelivered" : ""));
            }
        } finally {
            Checks.info(name + "_received", i);
            Checks.info(name + "_drain_ms", (System.nanoTime() - start) / 1_000_000);
        }
    }

    /**
     * Runs the fill ``body`` as the check ``name``; when it passed, pauses for the test
     * (a memory reading, a restart) and starts ``c``'s delivery.  False when it failed.
     */
    static boolean filledThenPaused(String name, Connection c, Checks.Body body) throws Exception {
        boolean[] filled = {false};
        Checks.check(name, () -> {
            body.run();
            filled[0] = true;
        });
        if (filled[0]) {
            pause("filled");
            c.start();
        }
        return filled[0];
    }

    static void pause(String what) throws Exception {
        Checks.info("pause", what);
        new BufferedReader(new InputStreamReader(System.in)).readLine();
    }

    static List<Sent> plan(int count, IntUnaryOperator priority) {
        List<Sent> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            out.add(new Sent(i, priority.applyAsInt(i)));
        }
        return out;
    }

    /** Generous: the fill may take this long (ms) per message. */
    static long allowance(int count) {
        return 60_000 + 20L * count;
    }

    // -- the scenarios ----------------------------------------------------------------------

    static void queue(String host, String port, String sfx, int n) throws Exception {
        List<Sent> fifo = plan(n, i -> 4);
        List<Sent> prio = plan(n / 4, Backlog::mixed);
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = s.createQueue("jbk_q_" + sfx);
            Queue pq = s.createQueue("jbk_p_" + sfx);
            if (!filledThenPaused("queue_fill", c, () -> {
                fill("queue_fifo", s, q, fifo, i -> true, allowance(n));
                fill("queue_prio", s, pq, prio, i -> true, allowance(n / 4));
            })) {
                return;
            }
            // A browser sees the paged-out backlog whole, bodies intact, the paged FIFO
            // queue's head in order (the mixed one only as a set: browse order is the
            // broker's own).
            Checks.check("queue_browse", () -> {
                Set<Integer> seen = new HashSet<>();
                try (QueueBrowser br = s.createBrowser(pq)) {
                    Enumeration<?> e = br.getEnumeration();
                    while (e.hasMoreElements()) {
                        BytesMessage m = (BytesMessage) e.nextElement();
                        int got = m.getIntProperty("n");
                        byte[] b = new byte[BODY];
                        Checks.expectEquals((long) BODY, m.getBodyLength(), "browsed body length of n=" + got);
                        m.readBytes(b);
                        Checks.expect(Arrays.equals(body(got), b), "the browsed body of n=" + got + " differs");
                        Checks.expect(seen.add(got), "n=" + got + " browsed twice");
                    }
                }
                Checks.expectEquals(prio.size(), seen.size(), "messages browsed in " + pq.getQueueName());
                try (QueueBrowser br = s.createBrowser(q)) {
                    Enumeration<?> e = br.getEnumeration();
                    for (int i = 0; i < 300; i++) {
                        Checks.expect(e.hasMoreElements(), "only " + i + " browsed in " + q.getQueueName());
                        Checks.expectEquals(i, ((Message) e.nextElement()).getIntProperty("n"), "browsed n");
                    }
                }
            });
            Checks.check("queue_selector", () -> {
                try (MessageConsumer k = s.createConsumer(pq, "r = 0")) {
                    drain("queue_selector", k, deliveryOrder(selected(prio)));
                }
            });
            Checks.check("queue_priority_order", () -> {
                try (MessageConsumer k = s.createConsumer(pq)) {
                    drain("queue_prio", k, deliveryOrder(notSelected(prio)));
                }
            });
            Checks.check("queue_fifo_order", () -> {
                try (MessageConsumer k = s.createConsumer(q)) {
                    drain("queue_fifo", k, fifo);
                }
            });
        }
    }

    static void durable(String host, String port, String sfx, int n) throws Exception {
        // The first 3/4 of priority 4, the rest mixed: the higher ones overtake the bulk.
        List<Sent> sent = plan(n, i -> i < n * 3 / 4 ? 4 : mixed(i));
        try (Connection c = Checks.connect(host, port)) {
            c.setClientID("jbk_" + sfx);
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Topic t = s.createTopic("jbk_t_" + sfx);
            s.createDurableSubscriber(t, "all").close();
            s.createDurableSubscriber(t, "sel", "r = 0", false).close();
            if (!filledThenPaused("durable_fill", c, () -> {
                fill("durable", s, t, sent, i -> true, allowance(n));
            })) {
                return;
            }
            Checks.check("durable_order", () -> {
                try (MessageConsumer k = s.createDurableSubscriber(t, "all")) {
                    drain("durable_all", k, deliveryOrder(sent));
                }
            });
            Checks.check("durable_selector", () -> {
                try (MessageConsumer k = s.createDurableSubscriber(t, "sel", "r = 0", false)) {
                    drain("durable_sel", k, deliveryOrder(selected(sent)));
                }
            });
            s.unsubscribe("all");
            s.unsubscribe("sel");
        }
    }

    static List<Sent> evens(List<Sent> sent) {
        List<Sent> out = new ArrayList<>();
        for (Sent x : sent) {
            if (x.n() % 2 == 0) {
                out.add(x);
            }
        }
        return out;
    }

    static void nonPersistent(String host, String port, String sfx, int n) throws Exception {
        List<Sent> sent = plan(n, i -> 4);
        List<Sent> mixedPlan = plan(n / 4, i -> 4);
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue q = s.createQueue("jbk_n_" + sfx);
            if (!filledThenPaused("nonpersistent_fill", c, () -> {
                fill("nonpersistent", s, q, sent, i -> false, allowance(n));
            })) {
                return;
            }
            Checks.check("nonpersistent_order", () -> {
                try (MessageConsumer k = s.createConsumer(q)) {
                    drain("nonpersistent", k, sent);
                }
            });
            Queue m = s.createQueue("jbk_m_" + sfx);
            Checks.check("mixed_fill", () -> {
                fill("mixed", s, m, mixedPlan, i -> i % 2 == 0, allowance(n / 4));
            });
        }
    }

    static void restarted(String host, String port, String sfx, int n) throws Exception {
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            c.start();
            Checks.check("restart_keeps_persistent_only", () -> {
                try (MessageConsumer k = s.createConsumer(s.createQueue("jbk_m_" + sfx))) {
                    drain("restarted", k, evens(plan(n / 4, i -> 4)));
                }
            });
        }
    }

    /**
     * The broker holds producers from the start (HELLO_REPLY's JMQSize 0): a send waits in the
     * client for RESUME_FLOW. The connection reconnects (imqReconnectEnabled) to the broker
     * restarted without the hold, and the waiting send goes on.
     */
    static void held(String host, String port, String sfx, int count) throws Exception {
        Connection c = Checks.factory(host, port, "imqReconnectEnabled", "true", "imqReconnectInterval", "500",
                "imqReconnectAttempts", "240", "imqAddressListIterations", "1").createConnection("guest", "guest");
        List<String> events = Collections.synchronizedList(new ArrayList<>());
        List<String> exceptions = Collections.synchronizedList(new ArrayList<>());
        ((com.sun.messaging.jms.Connection) c).setEventListener(e -> events.add(e.getEventCode()));
        c.setExceptionListener(e -> exceptions.add(String.valueOf(e)));
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("jbk_h_" + sfx);
        MessageProducer p = s.createProducer(q);
        List<Sent> plan = plan(count, i -> 4);
        AtomicInteger sent = new AtomicInteger();
        Throwable[] failed = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                for (Sent x : plan) {
                    BytesMessage m = s.createBytesMessage();
                    m.writeBytes(body(x.n()));
                    m.setIntProperty("n", x.n());
                    m.setIntProperty("r", x.n() % 3);
                    p.send(m, DeliveryMode.PERSISTENT, x.priority(), 0);
                    sent.incrementAndGet();
                }
            } catch (Throwable e) {
                failed[0] = e;
            }
        }, "held-producer");
        t.setDaemon(true);
        t.start();
        Checks.check("producer_held", () -> {
            // Sends stop returning: the count stays still for 1.5 s (a send the broker
            // lets through returns in milliseconds).
            int seen = -1;
            for (int tries = 0; tries < 20 && sent.get() != seen; tries++) {
                seen = sent.get();
                Thread.sleep(1500);
            }
            Checks.expect(failed[0] == null, "a send failed: " + failed[0]);
            Checks.expect(t.isAlive(), "every send returned: " + sent.get());
            Checks.expectEquals(seen, sent.get(), "sends that returned, still moving");
            StringBuilder where = new StringBuilder();
            for (StackTraceElement e : t.getStackTrace()) {
                if (e.getClassName().startsWith("com.sun.messaging")) {
                    String cls = e.getClassName();
                    where.append(cls.substring(cls.lastIndexOf('.') + 1)).append('.').append(e.getMethodName()).append(' ');
                }
            }
            Checks.info("waiting_in", where.toString().trim());
            // The stock client's wait for the broker's RESUME_FLOW (not for a reply).
            Checks.expect(where.toString().startsWith("WriteChannel.pause WriteChannel.sendWithFlowControl"),
                    "the producer waits in " + where + "(" + t.getState() + ")");
        });
        Checks.info("sent", sent.get());
        pause("held");
        for (int i = 0; i < 600 && !events.contains("E301"); i++) {
            Thread.sleep(100);
        }
        Checks.check("producer_resumed", () -> {
            t.join(60_000);
            Checks.expect(failed[0] == null, "a send failed: " + failed[0]);
            Checks.expect(!t.isAlive(), "still waiting after " + sent.get() + " sends; events " + events);
            Checks.expectEquals(count, sent.get(), "sends that returned");
        });
        Checks.check("held_messages_kept", () -> {
            // A session made after the failover (a CLIENT_ACKNOWLEDGE session made before it
            // must be recovered first: C4106).
            Session r = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            c.start();
            try (MessageConsumer k = r.createConsumer(q)) {
                drain("held", k, plan);
            }
        });
        Checks.check("reconnected", () -> {
            Checks.expect(events.contains("E301"), "events: " + events);
            Checks.expect(exceptions.isEmpty(), "ExceptionListener: " + exceptions);
        });
        Checks.info("events", events);
        c.close();
    }
}
