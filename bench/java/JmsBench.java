// One JMS benchmark for every broker: bench/jms.py runs it with the stock OpenMQ Java
// client against our broker and the stock OpenMQ broker, and with ActiveMQ's own client
// against ActiveMQ (the same source with javax.jms for jakarta.jms; the connection
// factory is made by reflection, so neither client is needed to compile the other).
// tests/test_producer_hold.py runs it too.
//
//   java -cp CLIENT_JARS:. JmsBench key=value ...
//
// provider=openmq|activemq  url=mq://127.0.0.1:7676/jms | tcp://127.0.0.1:61616
// dest=queue|topic  name=NAME  producers=1  consumers=1  count=N (all producers together)
// size=1024  persistent=0|1  ack=auto|dups_ok|client|transacted  batch=100 (messages per
// acknowledge / commit in client and transacted mode)  rate=0 (msgs/s of all producers
// together, 0 = unpaced)  pause_us=0 (a consumer's work per message)  idle=20 (seconds
// without a delivery before the consumers give up)  user=guest  password=guest
// producers=0: drain only (the queue was filled beforehand, or the server sends, as
// bench/ack_floor.py's floor does); consumers=0: fill only (nothing is waited for or checked).
// durable=SUB clientid=ID (dest=topic): each consumer is the durable subscription SUB on a
// connection with client ID ID (ID-1, ID-2... for the second consumer on); closing it leaves
// the subscription, so consumers=1 producers=0 count=0 creates an inactive one.
// progress=1: also print "progress SENT RECEIVED" every second, "first delivery A ms after
// its consumer attached" and, when messages are missing, "missing numbers: ..." (the first
// 20), as bench/backlog.py reads them.  Without these options nothing changes.
//
// Every producer's connection and every consumer's connection is its own; the consumers
// are subscribed before the first send.  Each body carries the send time (System.nanoTime,
// one clock: producers and consumers share the JVM) and the message's number, so the
// consumers check that every message arrived (a queue: once among all consumers; a topic:
// once at every subscriber) and measure each delivery's latency.  Prints
//   sent N in S s: R msgs/s
//   received D of E (missing M, duplicates U) in S s: R deliveries/s
//   latency p50 A ms p99 B ms max C ms
//   second I: N deliveries, worst W ms            (each second of the run)
//   RESULT producer_rate=.. consumer_rate=.. received=.. expected=.. missing=..
//          duplicates=.. p50_ms=.. p99_ms=.. max_ms=.. worst_second_ms=..
// and exits 3 (after "FAILED: ...") when a message is missing, or duplicated outside
// DUPS_OK_ACKNOWLEDGE.  producers=0 only drains (the messages, numbered 0..count-1 in the
// same body layout, come from elsewhere: bench/ack_floor.py).
import jakarta.jms.*;
import java.nio.ByteBuffer;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;
import java.util.concurrent.locks.LockSupport;

public class JmsBench {
    static Map<String, String> opts = new HashMap<>();
    static final AtomicInteger clients = new AtomicInteger();

    static String opt(String k, String d) {
        return opts.getOrDefault(k, d);
    }

    static int num(String k, int d) {
        return Integer.parseInt(opt(k, Integer.toString(d)));
    }

    static ConnectionFactory factory() throws Exception {
        String provider = opt("provider", "openmq"), url = opt("url", "mq://127.0.0.1:7676/jms");
        if (provider.equals("activemq")) {
            return (ConnectionFactory) Class.forName("org.apache.activemq.ActiveMQConnectionFactory")
                    .getConstructor(String.class).newInstance(url);
        }
        Object f = Class.forName("com.sun.messaging.ConnectionFactory").getConstructor().newInstance();
        f.getClass().getMethod("setProperty", String.class, String.class).invoke(f, "imqAddressList", url);
        return (ConnectionFactory) f;
    }

    static Connection connect(ConnectionFactory f) throws JMSException {
        if (opt("provider", "openmq").equals("activemq")) return f.createConnection();
        return f.createConnection(opt("user", "guest"), opt("password", "guest"));
    }

    static int ackMode(String ack) {
        switch (ack) {
            case "auto": return Session.AUTO_ACKNOWLEDGE;
            case "dups_ok": return Session.DUPS_OK_ACKNOWLEDGE;
            case "client": return Session.CLIENT_ACKNOWLEDGE;
            case "transacted": return Session.SESSION_TRANSACTED;
            default: throw new IllegalArgumentException("ack=" + ack);
        }
    }

    /** One consumer on its own connection, receiving on its own thread. */
    static class Receiver implements Runnable {
        final Connection conn;
        final Session session;
        final MessageConsumer consumer;
        final AtomicIntegerArray seen;
        final int expected, batch;
        final String ack;
        final long pauseNs, t0;
        final int[] latencyUs;
        final long[] worstPerSecond = new long[7200];
        final int[] perSecond = new int[7200];
        int n;
        volatile long first, last;
        volatile boolean stop;
        final AtomicInteger total, dups;
        static final AtomicInteger stray = new AtomicInteger();
        final long attached; // System.nanoTime just before the consumer was created

        Receiver(ConnectionFactory f, String dest, String name, AtomicIntegerArray seen, int expected,
                 AtomicInteger total, AtomicInteger dups, long t0) throws JMSException {
            conn = connect(f);
            String durable = opt("durable", "");
            if (!durable.isEmpty()) {
                int i = clients.getAndIncrement();
                conn.setClientID(opt("clientid", "jmsbench") + (i == 0 ? "" : "-" + i));
            }
            ack = opt("ack", "auto");
            int mode = ackMode(ack);
            session = conn.createSession(mode == Session.SESSION_TRANSACTED, mode);
            Destination d = dest.equals("topic") ? session.createTopic(name) : session.createQueue(name);
            attached = System.nanoTime();
            // createDurableSubscriber: JMS 1.1, so ActiveMQ's javax.jms 1.1 client has it too.
            consumer = durable.isEmpty() ? session.createConsumer(d)
                    : session.createDurableSubscriber((Topic) d, durable);
            this.seen = seen;
            this.expected = expected;
            this.total = total;
            this.dups = dups;
            this.t0 = t0;
            batch = num("batch", 100);
            pauseNs = num("pause_us", 0) * 1000L;
            latencyUs = new int[expected];
        }

        public void run() {
            try {
                Message last = null;
                int sinceAck = 0;
                while (!stop) {
                    Message m = consumer.receive(100);
                    if (m == null) continue;
                    long now = System.nanoTime();
                    BytesMessage b = (BytesMessage) m;
                    long sent = b.readLong();
                    int seq = b.readInt();
                    if (seq < 0 || seq >= seen.length()) stray.incrementAndGet();
                    else if (seen.getAndIncrement(seq) > 0) dups.incrementAndGet();
                    long lat = now - sent;
                    if (n < latencyUs.length) latencyUs[n] = (int) Math.min(lat / 1000, Integer.MAX_VALUE);
                    n++;
                    int sec = (int) Math.min((now - t0) / 1_000_000_000L, worstPerSecond.length - 1);
                    if (lat > worstPerSecond[sec]) worstPerSecond[sec] = lat;
                    perSecond[sec]++;
                    if (first == 0) first = now;
                    this.last = now;
                    total.incrementAndGet();
                    last = m;
                    if (pauseNs > 0) LockSupport.parkNanos(pauseNs);
                    if (++sinceAck >= batch) {
                        if (ack.equals("client")) m.acknowledge();
                        else if (ack.equals("transacted")) session.commit();
                        sinceAck = 0;
                    }
                }
                if (sinceAck > 0 && last != null) {
                    if (ack.equals("client")) last.acknowledge();
                    else if (ack.equals("transacted")) session.commit();
                }
            } catch (JMSException e) {
                System.out.println("consumer error: " + e);
                e.printStackTrace(System.out);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        for (String a : args) {
            int i = a.indexOf('=');
            if (i < 0) throw new IllegalArgumentException("not key=value: " + a);
            opts.put(a.substring(0, i), a.substring(i + 1));
        }
        String dest = opt("dest", "queue"), ack = opt("ack", "auto");
        String name = opt("name", "jmsbench." + Long.toHexString(System.nanoTime()));
        int producers = num("producers", 1), consumers = num("consumers", 1);
        int count = num("count", 10000), size = Math.max(num("size", 1024), 12);
        boolean persistent = num("persistent", 0) != 0;
        double rate = Double.parseDouble(opt("rate", "0"));
        int idle = num("idle", 20);
        boolean topic = dest.equals("topic");
        ConnectionFactory f = factory();

        long t0 = System.nanoTime();
        AtomicInteger total = new AtomicInteger(), dups = new AtomicInteger();
        Receiver[] rs = new Receiver[consumers];
        AtomicIntegerArray shared = topic ? null : new AtomicIntegerArray(count);
        for (int i = 0; i < consumers; i++) {
            AtomicIntegerArray seen = topic ? new AtomicIntegerArray(count) : shared;
            rs[i] = new Receiver(f, dest, name, seen, count, total, dups, t0);
        }
        Thread[] rt = new Thread[consumers];
        for (int i = 0; i < consumers; i++) {
            rs[i].conn.start();
            rt[i] = new Thread(rs[i], "consumer-" + i);
            rt[i].start();
        }
        int expected = topic ? count * consumers : count;
        boolean progress = num("progress", 0) != 0;

        // Producers: message k of producer p is number p + k * producers.
        AtomicLong sendStart = new AtomicLong(Long.MAX_VALUE), sendEnd = new AtomicLong();
        AtomicInteger sent = new AtomicInteger();
        Thread[] pt = new Thread[producers];
        Connection[] pc = new Connection[producers];
        CountDownLatch ready = new CountDownLatch(1);
        if (progress) {
            // Read by bench/backlog.py as it goes: no progress for a while is a stall.
            Thread pr = new Thread(() -> {
                while (true) {
                    System.out.printf("progress %d %d%n", sent.get(), total.get());
                    System.out.flush();
                    try {
                        Thread.sleep(1000);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "progress");
            pr.setDaemon(true);
            pr.start();
        }
        for (int p = 0; p < producers; p++) {
            final int me = p;
            pc[p] = connect(f);
            pt[p] = new Thread(() -> {
                try {
                    Session s = pc[me].createSession(false, Session.AUTO_ACKNOWLEDGE);
                    Destination d = topic ? s.createTopic(name) : s.createQueue(name);
                    MessageProducer mp = s.createProducer(d);
                    mp.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
                    byte[] pad = new byte[size - 12];
                    ready.await();
                    long start = System.nanoTime();
                    sendStart.accumulateAndGet(start, Math::min);
                    double period = rate > 0 ? 1e9 * producers / rate : 0;
                    long k = 0;
                    for (int seq = me; seq < count; seq += producers, k++) {
                        long stamp = 0;
                        if (period > 0) {
                            long due = start + (long) (k * period);
                            long wait;
                            while ((wait = due - System.nanoTime()) > 0) {
                                if (wait > 200_000) LockSupport.parkNanos(wait - 100_000);
                                else Thread.onSpinWait();
                            }
                            // Paced: latency counts from when the message was due, so a
                            // producer the broker holds back (flow control) or a send that
                            // blocks shows as latency instead of hiding in a slower rate.
                            stamp = due;
                        }
                        BytesMessage m = s.createBytesMessage();
                        m.writeLong(period > 0 ? stamp : System.nanoTime());
                        m.writeInt(seq);
                        m.writeBytes(pad);
                        mp.send(m);
                        sent.incrementAndGet();
                    }
                    sendEnd.accumulateAndGet(System.nanoTime(), Math::max);
                } catch (Exception e) {
                    System.out.println("producer error: " + e);
                    e.printStackTrace(System.out);
                }
            }, "producer-" + p);
            pt[p].start();
        }
        ready.countDown();
        for (Thread t : pt) t.join();
        int nsent = sent.get();
        double sendSecs = Math.max((sendEnd.get() - sendStart.get()) / 1e9, 1e-9);
        System.out.printf("sent %d in %.2f s: %.0f msgs/s%n", nsent, sendSecs, nsent / sendSecs);

        // Wait for every delivery, or until none came for `idle` seconds.
        int seenTotal = -1;
        long lastChange = System.nanoTime();
        while (consumers > 0 && total.get() < expected) {
            Thread.sleep(20);
            int now = total.get();
            if (now != seenTotal) {
                seenTotal = now;
                lastChange = System.nanoTime();
            } else if (System.nanoTime() - lastChange > idle * 1_000_000_000L) {
                break;
            }
        }
        // A moment for duplicates that would follow the last expected delivery.
        Thread.sleep(200);
        for (Receiver r : rs) r.stop = true;
        for (Thread t : rt) t.join();

        int received = total.get();
        int missing = 0;
        if (consumers == 0) {
            missing = 0; // fill only
        } else if (topic) {
            for (Receiver r : rs) for (int i = 0; i < count; i++) if (r.seen.get(i) == 0) missing++;
        } else {
            for (int i = 0; i < count; i++) if (shared.get(i) == 0) missing++;
        }
        long first = Long.MAX_VALUE, last = 0;
        for (Receiver r : rs) {
            if (r.first != 0) first = Math.min(first, r.first);
            last = Math.max(last, r.last);
        }
        double recvSecs = first == Long.MAX_VALUE ? 1e-9 : Math.max((last - first) / 1e9, 1e-9);
        System.out.printf("received %d of %d (missing %d, duplicates %d) in %.2f s: %.0f deliveries/s%n",
                received, expected, missing, dups.get(), recvSecs, received / recvSecs);
        if (progress) {
            long firstAfter = Long.MAX_VALUE;
            for (Receiver r : rs) if (r.first != 0) firstAfter = Math.min(firstAfter, r.first - r.attached);
            if (firstAfter != Long.MAX_VALUE)
                System.out.printf(Locale.ROOT, "first delivery %.3f ms after its consumer attached%n", firstAfter / 1e6);
            if (missing > 0) {
                StringBuilder sb = new StringBuilder("missing numbers:");
                int shown = 0;
                for (Receiver r : rs) {
                    for (int i = 0; i < count && shown < 20; i++) {
                        if (r.seen.get(i) == 0) {
                            sb.append(' ').append(i);
                            shown++;
                        }
                    }
                    if (!topic) break;
                }
                System.out.println(sb);
            }
        }

        int nl = 0;
        for (Receiver r : rs) nl += Math.min(r.n, r.latencyUs.length);
        int[] all = new int[nl];
        int o = 0;
        for (Receiver r : rs) {
            int k = Math.min(r.n, r.latencyUs.length);
            System.arraycopy(r.latencyUs, 0, all, o, k);
            o += k;
        }
        Arrays.sort(all);
        double p50 = nl > 0 ? all[(int) (nl * 0.50)] / 1000.0 : 0;
        double p99 = nl > 0 ? all[Math.min(nl - 1, (int) (nl * 0.99))] / 1000.0 : 0;
        double max = nl > 0 ? all[nl - 1] / 1000.0 : 0;
        System.out.printf("latency p50 %.3f ms p99 %.3f ms max %.3f ms%n", p50, p99, max);
        double worstSecond = 0;
        int lastSec = (int) Math.min((last - t0) / 1_000_000_000L, rs.length > 0 ? rs[0].worstPerSecond.length - 1 : 0);
        for (int sec = 0; sec <= lastSec && rs.length > 0; sec++) {
            long w = 0;
            int k = 0;
            for (Receiver r : rs) {
                w = Math.max(w, r.worstPerSecond[sec]);
                k += r.perSecond[sec];
            }
            if (k == 0) continue;
            if (rate > 0) System.out.printf("second %d: %d deliveries, worst %.3f ms%n", sec, k, w / 1e6);
            worstSecond = Math.max(worstSecond, w / 1e6);
        }
        System.out.printf(Locale.ROOT,
                "RESULT producer_rate=%.0f consumer_rate=%.0f received=%d expected=%d missing=%d duplicates=%d"
                + " p50_ms=%.3f p99_ms=%.3f max_ms=%.3f worst_second_ms=%.3f%n",
                nsent / sendSecs, received / recvSecs, received, expected, missing, dups.get(), p50, p99, max,
                worstSecond);
        for (Connection c : pc) c.close();
        for (Receiver r : rs) r.conn.close();
        boolean dupsBad = dups.get() > 0 && !ack.equals("dups_ok");
        // producers=0: the messages come from elsewhere (bench/ack_floor.py's floor server).
        int strays = Receiver.stray.get();
        if (missing > 0 || (producers > 0 && nsent < count) || dupsBad || strays > 0) {
            System.out.printf("FAILED: %d of %d messages never delivered, %d sent of %d, %d duplicates, "
                    + "%d numbered outside 0..%d%n", missing, expected, nsent, count, dups.get(), strays,
                    count - 1);
            System.exit(3);
        }
        System.exit(0);
    }
}
