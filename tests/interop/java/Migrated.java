import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.*;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A stock broker's application before and after `manage.py imqimport` moved it to ours.
 *
 * fill (on the stock broker): as USER/PASSWORD, 5 messages to queue mig.orders (property
 * n, region, JMSCorrelationID, JMSType, priority 7 or 4); the durable subscription
 * mig-dur (client ID mig-client, selector region = 'eu') on topic mig.prices, closed,
 * with one message waiting.
 *
 * check (on ours, after the import): USER logs in with the stock password and not with
 * another; the 5 messages arrive with their headers and properties; the durable
 * subscription kept what was published while nobody was subscribed, by its selector;
 * USER logs in over ssljms (the imported key material); guest may not browse mig.orders
 * (the imported rule).
 */
public class Migrated {
    static final String QUEUE = "mig.orders";
    static final String TOPIC = "mig.prices";

    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], mode = a[2], user = a[3], password = a[4];
        if (mode.equals("fill")) {
            fill(host, port, user, password);
        } else {
            check(host, port, user, password);
        }
        Checks.done();
    }

    static void fill(String host, String port, String user, String password) {
        Checks.check("fill", () -> {
            try (Connection c = Checks.factory(host, port).createConnection(user, password)) {
                c.setClientID("mig-client");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer p = s.createProducer(s.createQueue(QUEUE));
                for (int i = 0; i < 5; i++) {
                    TextMessage m = s.createTextMessage("order " + i);
                    m.setIntProperty("n", i);
                    m.setStringProperty("region", i % 2 == 0 ? "eu" : "us");
                    m.setJMSCorrelationID("c-" + i);
                    m.setJMSType("order");
                    p.send(m, DeliveryMode.PERSISTENT, i % 2 == 0 ? 7 : 4, 0);
                }
                Topic t = s.createTopic(TOPIC);
                s.createDurableSubscriber(t, "mig-dur", "region = 'eu'", false).close();
                TextMessage m = s.createTextMessage("waiting on the stock broker");
                m.setStringProperty("region", "eu");
                s.createProducer(t).send(m);
            }
        });
    }

    static void check(String host, String port, String user, String password) {
        Checks.check("login_with_stock_password", () -> {
            Checks.factory(host, port).createConnection(user, password).close();
        });
        Checks.check("other_password_refused", () -> {
            try {
                Checks.factory(host, port).createConnection(user, password + "x").close();
                throw new AssertionError("logged in with a wrong password");
            } catch (JMSSecurityException expected) {
                // C4060 Login failed
            }
        });
        Checks.check("queue_messages_moved", () -> {
            try (Connection c = Checks.factory(host, port).createConnection(user, password)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer r = s.createConsumer(s.createQueue(QUEUE));
                c.start();
                List<Message> got = new ArrayList<>();
                for (Message m; got.size() < 5 && (m = r.receive(20000)) != null; ) {
                    got.add(m);
                }
                Checks.expectEquals(5, got.size(), "messages");
                Checks.expect(r.receive(500) == null, "a sixth message");
                got.sort(Comparator.comparingInt(m -> {
                    try {
                        return m.getIntProperty("n");
                    } catch (JMSException e) {
                        throw new RuntimeException(e);
                    }
                }));
                for (int i = 0; i < 5; i++) {
                    Message m = got.get(i);
                    Checks.expectEquals("order " + i, ((TextMessage) m).getText(), "text");
                    Checks.expectEquals(i % 2 == 0 ? "eu" : "us", m.getStringProperty("region"), "region");
                    Checks.expectEquals("c-" + i, m.getJMSCorrelationID(), "correlation ID");
                    Checks.expectEquals("order", m.getJMSType(), "JMSType");
                    Checks.expectEquals(i % 2 == 0 ? 7 : 4, m.getJMSPriority(), "priority");
                    Checks.expectEquals(DeliveryMode.PERSISTENT, m.getJMSDeliveryMode(), "delivery mode");
                }
            }
        });
        Checks.check("durable_subscription_kept", () -> {
            try (Connection c = Checks.factory(host, port).createConnection(user, password)) {
                c.setClientID("mig-client");
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Topic t = s.createTopic(TOPIC);
                MessageProducer p = s.createProducer(t);
                for (String region : new String[] {"us", "eu"}) {
                    TextMessage m = s.createTextMessage("published on ours, " + region);
                    m.setStringProperty("region", region);
                    p.send(m);
                }
                MessageConsumer d = s.createDurableSubscriber(t, "mig-dur", "region = 'eu'", false);
                c.start();
                Message m = d.receive(20000);
                Checks.expect(m != null, "nothing kept for the durable subscription");
                Checks.expectEquals("published on ours, eu", ((TextMessage) m).getText(), "text");
                Checks.expect(d.receive(500) == null, "a second message passed the selector");
                d.close();
                s.unsubscribe("mig-dur");
            }
        });
        Checks.check("ssljms_login", () -> {
            com.sun.messaging.ConnectionFactory cf = Checks.factory(host, port,
                    ConnectionConfiguration.imqSSLIsHostTrusted, "true");
            cf.setProperty(ConnectionConfiguration.imqAddressList, "mq://" + host + ":" + port + "/ssljms");
            try (Connection c = cf.createConnection(user, password)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createTemporaryQueue();
                s.createProducer(q).send(s.createTextMessage("over TLS"));
                c.start();
                Message m = s.createConsumer(q).receive(20000);
                Checks.expect(m instanceof TextMessage, "received " + m);
            }
        });
        Checks.check("imported_rule_denies_guest_browse", () -> {
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                try {
                    s.createBrowser(s.createQueue(QUEUE)).getEnumeration();
                    throw new AssertionError("guest browsed " + QUEUE);
                } catch (JMSSecurityException expected) {
                    // C4076 / the broker's 403
                }
            }
        });
    }
}
