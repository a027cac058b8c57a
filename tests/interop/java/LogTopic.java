import jakarta.jms.*;
import java.util.*;

/**
 * The broker's log as messages on the topic mq.log.broker (imq.log.destination.*), as a
 * monitoring tool sees it with plain JMS.
 *
 * As guest: subscribe to mq.log.broker, make the broker log a WARNING (two logins with a
 * wrong password), and read what arrives: each message's class, its properties and map
 * entries with their value types ("info props k:Type,...", "info body k:Type,..."), its
 * priority, delivery mode and time to live ("info priority 5" ...) for the test to
 * compare with the stock broker; only records at the configured level (WARNING) and
 * above arrive; a producer on mq.log.broker is refused.
 */
public class LogTopic {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1];
        com.sun.messaging.ConnectionFactory cf = Checks.factory(host, port);
        Connection c = cf.createConnection("guest", "guest");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = s.createTopic("mq.log.broker");
        MessageConsumer[] consumer = new MessageConsumer[1];
        Checks.check("subscribe", () -> {
            consumer[0] = s.createConsumer(topic);
            c.start();
        });
        Checks.check("wrong password refused", () -> {
            for (int i = 0; i < 2; i++) {
                try {
                    cf.createConnection("guest", "not-the-password").close();
                    throw new AssertionError("a wrong password was accepted");
                } catch (JMSSecurityException expected) {
                    // the broker logs it as a WARNING
                }
            }
        });
        List<Message> got = new ArrayList<>();
        Checks.check("log message received", () -> {
            long end = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < end && got.size() < 2) {
                Message m = consumer[0].receive(500);
                if (m != null) got.add(m);
            }
            Checks.expect(!got.isEmpty(), "no message on mq.log.broker after a failed login");
        });
        if (!got.isEmpty()) {
            Message m = got.get(0);
            Checks.check("a MapMessage", () -> Checks.expect(m instanceof MapMessage, "got " + m));
            Checks.info("props", keysAndTypes(properties(m)));
            if (m instanceof MapMessage mm) {
                Map<String, Object> body = new HashMap<>();
                for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements();) {
                    String k = (String) e.nextElement();
                    body.put(k, mm.getObject(k));
                }
                Checks.info("body", keysAndTypes(body));
                Checks.info("level", body.get("level"));
                Checks.info("text", String.valueOf(body.get("text")).replace('\n', ' '));
            }
            Checks.info("priority", m.getJMSPriority());
            Checks.info("deliveryMode", m.getJMSDeliveryMode());
            Checks.info("ttl", m.getJMSExpiration() - m.getJMSTimestamp());
            Checks.info("type", m.getStringProperty("type"));
            Checks.info("brokerInstance", m.getStringProperty("brokerInstance"));
            Checks.info("broker", m.getStringProperty("broker"));
            Checks.check("levels", () -> {
                for (Message x : got) {
                    String level = ((MapMessage) x).getString("level");
                    Checks.expect(level.equals("WARNING") || level.equals("ERROR"),
                            "only WARNING and ERROR at the default level, got " + level);
                }
            });
            Checks.check("timestamp property", () -> {
                long ts = m.getLongProperty("timestamp");
                Checks.expect(Math.abs(ts - m.getJMSTimestamp()) < 60000,
                        "timestamp " + ts + " vs JMSTimestamp " + m.getJMSTimestamp());
            });
        }
        Checks.check("refused producer", () -> {
            try {
                MessageProducer p = s.createProducer(topic);
                p.send(s.createTextMessage("not a log record"));
                throw new AssertionError("a producer on mq.log.broker was accepted");
            } catch (JMSException expected) {
                Checks.info("producer_refused", expected.getClass().getSimpleName());
            }
        });
        c.close();
        Checks.done();
    }

    static Map<String, Object> properties(Message m) throws JMSException {
        Map<String, Object> out = new HashMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) {
            String k = (String) e.nextElement();
            if (!k.startsWith("JMSX")) out.put(k, m.getObjectProperty(k));
        }
        return out;
    }

    static String keysAndTypes(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, Object> e : new TreeMap<>(m).entrySet()) {
            if (sb.length() > 0) sb.append(',');
            Object v = e.getValue();
            sb.append(e.getKey()).append(':').append(v == null ? "null" : v.getClass().getSimpleName());
        }
        return sb.toString();
    }
}
