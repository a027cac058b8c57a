import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.*;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The stock client through the HTTP tunnel (httpjms / httpsjms).
 *
 * Usage: TunnelClient HOST PORTMAPPER MODE URL [QUEUE].
 * MODE "full": both ways of naming the tunnel, send and receive, transactions, a 1 MB
 * message, many clients at once, a tunnelled consumer of a TCP producer.
 * MODE "short": connect both ways, send and receive, 1 MB (the HTTPS run, whose clients
 * poll).
 * MODE "vanish": a CLIENT_ACKNOWLEDGE consumer on QUEUE receives the message a TCP
 * producer sent, prints "ready", and waits without acknowledging (the test SIGKILLs it).
 * MODE "after": the message on QUEUE comes again, flagged redelivered.
 */
public class TunnelClient {
    static String host, port, url;

    public static void main(String[] a) throws Exception {
        host = a[0];
        port = a[1];
        String mode = a[2];
        url = a[3];
        switch (mode) {
            case "full":
                full();
                break;
            case "short":
                connectBothWays();
                Checks.check("one_megabyte", () -> oneMegabyte(byList()));
                break;
            case "vanish":
                vanish(a[4]);
                return;
            case "after":
                after(a[4]);
                break;
            default:
                throw new IllegalArgumentException(mode);
        }
        Checks.done();
    }

    /** imqAddressList=http://host:port/imq/tunnel (or https://). */
    static com.sun.messaging.ConnectionFactory byList() throws JMSException {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(ConnectionConfiguration.imqAddressList, url);
        return cf;
    }

    /** imqConnectionType=HTTP with imqConnectionURL (http:// or https://), the older way. */
    static com.sun.messaging.ConnectionFactory byType() throws JMSException {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        // 6.9 knows no HTTPS type (InvalidPropertyValueException): HTTP with an https URL.
        cf.setProperty(ConnectionConfiguration.imqConnectionType, "HTTP");
        cf.setProperty(ConnectionConfiguration.imqConnectionURL, url);
        return cf;
    }

    static String unique(String what) {
        return "interop.tunnel." + what + "." + System.nanoTime();
    }

    static void sendReceive(com.sun.messaging.ConnectionFactory cf, String tag) throws Exception {
        try (Connection c = cf.createConnection("guest", "guest")) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue(unique(tag));
            MessageProducer p = s.createProducer(q);
            MessageConsumer r = s.createConsumer(q);
            c.start();
            TextMessage t = s.createTextMessage("through the tunnel \u00e9\u20ac");
            t.setStringProperty("tag", tag);
            t.setIntProperty("n", 42);
            p.send(t);
            Message got = r.receive(20000);
            Checks.expect(got instanceof TextMessage, "received " + got);
            Checks.expectEquals("through the tunnel \u00e9\u20ac", ((TextMessage) got).getText(), "text");
            Checks.expectEquals(tag, got.getStringProperty("tag"), "property");
            Checks.expectEquals(42, got.getIntProperty("n"), "int property");
        }
    }

    static void connectBothWays() {
        Checks.check("address_list_send_receive", () -> sendReceive(byList(), "list"));
        Checks.check("connection_type_send_receive", () -> sendReceive(byType(), "type"));
    }

    static void oneMegabyte(com.sun.messaging.ConnectionFactory cf) throws Exception {
        try (Connection c = cf.createConnection("guest", "guest")) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue(unique("big"));
            MessageProducer p = s.createProducer(q);
            MessageConsumer r = s.createConsumer(q);
            c.start();
            byte[] big = new byte[1 << 20];
            for (int i = 0; i < big.length; i++) {
                big[i] = (byte) (i * 31 + 7);
            }
            BytesMessage b = s.createBytesMessage();
            b.writeBytes(big);
            p.send(b);
            Message got = r.receive(60000);
            Checks.expect(got instanceof BytesMessage, "received " + got);
            BytesMessage gb = (BytesMessage) got;
            Checks.expectEquals((long) big.length, gb.getBodyLength(), "length");
            byte[] back = new byte[big.length];
            gb.readBytes(back);
            Checks.expect(Arrays.equals(big, back), "1 MB body changed on the way");
        }
    }

    static void full() {
        connectBothWays();
        Checks.check("transactions", () -> {
            try (Connection c = byList().createConnection("guest", "guest")) {
                Session ts = c.createSession(true, Session.SESSION_TRANSACTED);
                Queue q = ts.createQueue(unique("txn"));
                MessageProducer p = ts.createProducer(q);
                MessageConsumer r = ts.createConsumer(q);
                c.start();
                p.send(ts.createTextMessage("rolled back"));
                ts.rollback();
                p.send(ts.createTextMessage("committed"));
                ts.commit();
                TextMessage got = (TextMessage) r.receive(20000);
                Checks.expect(got != null, "nothing after commit");
                Checks.expectEquals("committed", got.getText(), "the committed message");
                ts.rollback();
                got = (TextMessage) r.receive(20000);
                Checks.expect(got != null, "nothing after the receive's rollback");
                Checks.expect(got.getJMSRedelivered(), "not flagged redelivered after rollback");
                ts.commit();
                Checks.expect(r.receive(500) == null, "a message left after commit");
            }
        });
        Checks.check("one_megabyte", () -> oneMegabyte(byList()));
        Checks.check("many_clients", () -> {
            int clients = 20, each = 25;
            String qname = unique("many");
            ConcurrentHashMap<String, Boolean> seen = new ConcurrentHashMap<>();
            List<Throwable> errors = new ArrayList<>();
            CountDownLatch done = new CountDownLatch(clients);
            try (Connection rc = byList().createConnection("guest", "guest")) {
                Session rs = rc.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer r = rs.createConsumer(rs.createQueue(qname));
                rc.start();
                for (int i = 0; i < clients; i++) {
                    final int id = i;
                    new Thread(() -> {
                        try (Connection c = byList().createConnection("guest", "guest")) {
                            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                            MessageProducer p = s.createProducer(s.createQueue(qname));
                            for (int k = 0; k < each; k++) {
                                p.send(s.createTextMessage(id + "/" + k));
                            }
                        } catch (Throwable t) {
                            synchronized (errors) {
                                errors.add(t);
                            }
                        } finally {
                            done.countDown();
                        }
                    }).start();
                }
                while (seen.size() < clients * each) {
                    TextMessage m = (TextMessage) r.receive(60000);
                    if (m == null) {
                        break;
                    }
                    seen.put(m.getText(), true);
                }
                Checks.expect(done.await(120, TimeUnit.SECONDS), "producers did not finish");
            }
            Checks.expect(errors.isEmpty(), "producer failed: " + errors);
            Checks.expectEquals(clients * each, seen.size(), "distinct messages received");
        });
        Checks.check("tcp_producer_tunnel_consumer", () -> {
            String qname = unique("mixed");
            try (Connection tc = Checks.connect(host, port); Connection hc = byList().createConnection("guest", "guest")) {
                Session hs = hc.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer r = hs.createConsumer(hs.createQueue(qname));
                hc.start();
                Session ts = tc.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer p = ts.createProducer(ts.createQueue(qname));
                for (int i = 0; i < 50; i++) {
                    p.send(ts.createTextMessage("m" + i));
                }
                for (int i = 0; i < 50; i++) {
                    TextMessage m = (TextMessage) r.receive(20000);
                    Checks.expect(m != null, "missing message " + i);
                    Checks.expectEquals("m" + i, m.getText(), "order");
                }
            }
        });
    }

    /** Receives without acknowledging, then waits to be killed. */
    static void vanish(String qname) throws Exception {
        try (Connection tc = Checks.connect(host, port)) {
            Session ts = tc.createSession(false, Session.AUTO_ACKNOWLEDGE);
            ts.createProducer(ts.createQueue(qname)).send(ts.createTextMessage("unacknowledged"));
        }
        Connection c = byList().createConnection("guest", "guest");
        Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer r = s.createConsumer(s.createQueue(qname));
        c.start();
        TextMessage m = (TextMessage) r.receive(20000);
        System.out.println(m != null && "unacknowledged".equals(m.getText()) ? "ok received" : "fail received: " + m);
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(600000);
    }

    static void after(String qname) {
        Checks.check("redelivered_after_vanish", () -> {
            try (Connection c = byList().createConnection("guest", "guest")) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer r = s.createConsumer(s.createQueue(qname));
                c.start();
                TextMessage m = (TextMessage) r.receive(20000);
                Checks.expect(m != null, "the vanished consumer's message did not come back");
                Checks.expectEquals("unacknowledged", m.getText(), "text");
                Checks.expect(m.getJMSRedelivered(), "not flagged redelivered");
            }
        });
    }
}
