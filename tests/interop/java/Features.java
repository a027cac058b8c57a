import jakarta.jms.*;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * What a JMS application sees of the broker's messaging features: JMS 2.0 (JMSContext,
 * CompletionListener, shared and shared-durable subscriptions, delivery delay), client
 * acknowledge and recover, transacted sessions, a 5 MB message, and what the broker refuses
 * (the exception class and error code OpenMQ's broker makes the client throw).
 *
 * <pre>  Features HOST PORT SUFFIX</pre>
 */
public class Features {
    static String host, port, sfx;

    public static void main(String[] a) throws Exception {
        host = a[0];
        port = a[1];
        sfx = a[2];
        ConnectionFactory cf = Checks.factory(host, port);
        jms2(cf);
        acknowledge();
        transactions();
        large();
        refusals(cf);
        Checks.done();
    }

    static String name(String base) {
        return "jf_" + base + "_" + sfx;
    }

    static void jms2(ConnectionFactory cf) {
        Checks.check("context_send_receive_body", () -> {
            try (JMSContext ctx = cf.createContext("guest", "guest")) {
                Queue q = ctx.createQueue(name("ctx"));
                JMSConsumer k = ctx.createConsumer(q);
                Map<String, Object> map = new HashMap<>();
                map.put("n", 42);
                map.put("s", "x");
                ctx.createProducer().send(q, "hello 2.0");
                ctx.createProducer().send(q, new byte[] {9, 8, 7});
                ctx.createProducer().send(q, map);
                // To a queue of its own: a higher priority, non-persistent message may overtake.
                Queue q2 = ctx.createQueue(name("ctx2"));
                ctx.createProducer().setProperty("pInt", 5).setJMSCorrelationID("c2").setPriority(6)
                        .setDeliveryMode(DeliveryMode.NON_PERSISTENT).send(q2, "with properties");
                Checks.expectEquals("hello 2.0", k.receiveBody(String.class, 10000), "text body");
                byte[] b = k.receiveBody(byte[].class, 10000);
                Checks.expect(Arrays.equals(new byte[] {9, 8, 7}, b), "bytes body " + Arrays.toString(b));
                Checks.expectEquals(map, k.receiveBody(Map.class, 10000), "map body");
                Checks.expect(k.receiveNoWait() == null, "a fourth message");
                k.close();
                k = ctx.createConsumer(q2);
                Message m = k.receive(10000);
                Checks.expect(m != null, "the message with properties");
                Checks.expectEquals("with properties", m.getBody(String.class), "body");
                Checks.expectEquals(5, m.getIntProperty("pInt"), "pInt");
                Checks.expectEquals("c2", m.getJMSCorrelationID(), "correlation ID");
                Checks.expectEquals(6, m.getJMSPriority(), "priority");
                Checks.expectEquals(DeliveryMode.NON_PERSISTENT, m.getJMSDeliveryMode(), "delivery mode");
            }
        });

        Checks.check("context_session_modes", () -> {
            // A transacted JMSContext: nothing is delivered before commit, all of it after.
            try (JMSContext tx = cf.createContext("guest", "guest", JMSContext.SESSION_TRANSACTED);
                    JMSContext rx = cf.createContext("guest", "guest")) {
                Queue q = tx.createQueue(name("ctxtx"));
                JMSConsumer k = rx.createConsumer(q);
                tx.createProducer().send(q, "one");
                tx.createProducer().send(q, "two");
                Checks.expect(k.receiveBody(String.class, 500) == null, "delivered before commit");
                tx.commit();
                Checks.expectEquals("one", k.receiveBody(String.class, 10000), "first");
                Checks.expectEquals("two", k.receiveBody(String.class, 10000), "second");
            }
        });

        Checks.check("completion_listener", () -> {
            try (Connection c = cf.createConnection("guest", "guest")) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue(name("async"));
                MessageProducer p = s.createProducer(q);
                int n = 20;
                CountDownLatch done = new CountDownLatch(n);
                List<String> completed = Collections.synchronizedList(new ArrayList<>());
                List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
                CompletionListener l = new CompletionListener() {
                    public void onCompletion(Message m) {
                        try {
                            completed.add(((TextMessage) m).getText());
                        } catch (JMSException e) {
                            errors.add(e);
                        }
                        done.countDown();
                    }

                    public void onException(Message m, Exception e) {
                        errors.add(e);
                        done.countDown();
                    }
                };
                for (int i = 0; i < n; i++) {
                    p.send(s.createTextMessage("async " + i), i % 2 == 0 ? DeliveryMode.PERSISTENT
                            : DeliveryMode.NON_PERSISTENT, 4, 0, l);
                }
                Checks.expect(done.await(30, TimeUnit.SECONDS), "not every send completed");
                Checks.expect(errors.isEmpty(), "onException: " + errors);
                Checks.expectEquals(n, new HashSet<>(completed).size(), "completed sends");
                MessageConsumer k = s.createConsumer(q);
                c.start();
                for (int i = 0; i < n; i++) {
                    Message m = k.receive(10000);
                    Checks.expect(m != null, "message " + i + " missing");
                    Checks.expectEquals("async " + i, ((TextMessage) m).getText(), "order");
                }
            }
            // And through a JMSContext: setAsync on the producer.
            try (JMSContext ctx = cf.createContext("guest", "guest")) {
                Queue q = ctx.createQueue(name("async2"));
                CountDownLatch done = new CountDownLatch(1);
                Exception[] err = new Exception[1];
                ctx.createProducer().setAsync(new CompletionListener() {
                    public void onCompletion(Message m) {
                        done.countDown();
                    }

                    public void onException(Message m, Exception e) {
                        err[0] = e;
                        done.countDown();
                    }
                }).send(q, "ctx async");
                Checks.expect(done.await(30, TimeUnit.SECONDS), "setAsync send did not complete");
                Checks.expect(err[0] == null, "onException: " + err[0]);
                Checks.expectEquals("ctx async", ctx.createConsumer(q).receiveBody(String.class, 10000), "body");
            }
        });

        Checks.check("shared_subscription", () -> {
            try (JMSContext ctx = cf.createContext("guest", "guest");
                    JMSContext ctx2 = cf.createContext("guest", "guest")) {
                Topic t = ctx.createTopic(name("shared"));
                JMSConsumer k1 = ctx.createSharedConsumer(t, "sub");
                JMSConsumer k2 = ctx2.createSharedConsumer(t, "sub");
                JMSConsumer plain = ctx.createConsumer(t);
                int n = 10;
                for (int i = 0; i < n; i++) {
                    ctx.createProducer().send(t, "s" + i);
                }
                Set<String> got = new HashSet<>();
                int taken = 0;
                // Both consumers in turn until all are taken (or nothing came for 10 s); short
                // receives: each turn ends on an empty receive of each.
                for (int idle = 0; taken < n && idle < 50; ) {
                    int before = taken;
                    for (JMSConsumer k : new JMSConsumer[] {k1, k2}) {
                        String b;
                        while ((b = k.receiveBody(String.class, 100)) != null) {
                            got.add(b);
                            taken++;
                        }
                    }
                    idle = taken == before ? idle + 1 : 0;
                }
                for (JMSConsumer k : new JMSConsumer[] {k1, k2}) {
                    Checks.expect(k.receiveBody(String.class, 300) == null, "more than was published");
                }
                Checks.expectEquals(n, taken, "messages taken by the shared subscription");
                Checks.expectEquals(n, got.size(), "distinct messages");
                for (int i = 0; i < n; i++) {
                    Checks.expect(plain.receiveBody(String.class, 10000) != null, "plain subscriber " + i);
                }
                // imq.jar 6.9's JMSContext.close throws ConcurrentModificationException when it
                // still has two consumers open (it closes them while iterating over the set).
                k1.close();
                plain.close();
            }
        });

        Checks.check("shared_durable_subscription", () -> {
            try (JMSContext ctx = cf.createContext("guest", "guest")) {
                Topic t = ctx.createTopic(name("sdur"));
                JMSConsumer k = ctx.createSharedDurableConsumer(t, "dsub");
                JMSConsumer k2 = ctx.createSharedDurableConsumer(t, "dsub");
                k.close();
                k2.close();
                for (int i = 0; i < 3; i++) {
                    ctx.createProducer().send(t, "kept " + i);
                }
                k = ctx.createSharedDurableConsumer(t, "dsub");
                for (int i = 0; i < 3; i++) {
                    Checks.expectEquals("kept " + i, k.receiveBody(String.class, 10000), "kept message");
                }
                Checks.expect(k.receiveBody(String.class, 300) == null, "a fourth message");
                // An active consumer keeps the subscription from being removed.
                try {
                    ctx.unsubscribe("dsub");
                    Checks.expect(false, "unsubscribe with an active consumer succeeded");
                } catch (JMSRuntimeException expected) {
                    // IllegalStateRuntimeException or JMSRuntimeException: the broker refused
                }
                k.close();
                ctx.unsubscribe("dsub");
                ctx.createProducer().send(t, "after unsubscribe");
                k = ctx.createSharedDurableConsumer(t, "dsub");
                Checks.expect(k.receiveBody(String.class, 300) == null, "the old subscription's message");
                k.close();
                ctx.unsubscribe("dsub");
            }
        });

        Checks.check("delivery_delay", () -> {
            try (JMSContext ctx = cf.createContext("guest", "guest")) {
                Queue q = ctx.createQueue(name("delay"));
                JMSConsumer k = ctx.createConsumer(q);
                long delay = 3000;
                long before = System.currentTimeMillis();
                ctx.createProducer().setDeliveryDelay(delay).send(q, "later");
                ctx.createProducer().send(q, "now");
                Checks.expectEquals("now", k.receiveBody(String.class, 10000), "the undelayed message first");
                // Nothing until the delivery time (however long the first receive took).
                long early = before + delay - System.currentTimeMillis() - 200;
                if (early > 0) {
                    Checks.expect(k.receive(early) == null, "delivered before its delivery time");
                }
                Message m = k.receive(15000);
                long after = System.currentTimeMillis();
                Checks.expect(m != null, "not delivered after its delivery time");
                Checks.expectEquals("later", m.getBody(String.class), "body");
                // The client reads its clock apart for the two (a millisecond or so).
                long skew = m.getJMSDeliveryTime() - (m.getJMSTimestamp() + delay);
                Checks.expect(Math.abs(skew) <= 50, "JMSDeliveryTime - (JMSTimestamp + delay) = " + skew);
                Checks.expect(after >= before + delay, "arrived " + (after - before) + " ms after the send");
            }
        });
    }

    static void acknowledge() {
        Checks.check("client_ack_recover", () -> {
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                Queue q = s.createQueue(name("cack"));
                MessageProducer p = s.createProducer(q);
                for (int i = 0; i < 3; i++) {
                    p.send(s.createTextMessage("m" + i));
                }
                MessageConsumer k = s.createConsumer(q);
                c.start();
                for (int i = 0; i < 3; i++) {
                    Message m = k.receive(10000);
                    Checks.expectEquals("m" + i, ((TextMessage) m).getText(), "first delivery");
                    Checks.expect(!m.getJMSRedelivered(), "redelivered on the first delivery");
                    Checks.expectEquals(1, m.getIntProperty("JMSXDeliveryCount"), "JMSXDeliveryCount");
                }
                s.recover();
                Message last = null;
                for (int i = 0; i < 3; i++) {
                    Message m = k.receive(10000);
                    Checks.expect(m != null, "not redelivered after recover: " + i);
                    Checks.expectEquals("m" + i, ((TextMessage) m).getText(), "redelivery order");
                    Checks.expect(m.getJMSRedelivered(), "JMSRedelivered false after recover");
                    Checks.expectEquals(2, m.getIntProperty("JMSXDeliveryCount"), "JMSXDeliveryCount");
                    last = m;
                }
                last.acknowledge();
                Checks.expect(k.receive(300) == null, "a message after the acknowledged ones");
            }
            // Acknowledged: a new connection finds the queue empty.
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                c.start();
                Checks.expect(s.createConsumer(s.createQueue(name("cack"))).receive(500) == null,
                        "an acknowledged message came back");
            }
        });

        Checks.check("client_ack_unacked_redelivered_on_close", () -> {
            Queue q;
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                q = s.createQueue(name("cack2"));
                s.createProducer(q).send(s.createTextMessage("not acknowledged"));
                c.start();
                Message m = s.createConsumer(q).receive(10000);
                Checks.expect(m != null && !m.getJMSRedelivered(), "first delivery " + m);
            }
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                c.start();
                Message m = s.createConsumer(q).receive(10000);
                Checks.expect(m != null, "not redelivered to the next connection");
                Checks.expect(m.getJMSRedelivered(), "JMSRedelivered false");
                Checks.expectEquals(2, m.getIntProperty("JMSXDeliveryCount"), "JMSXDeliveryCount");
                m.acknowledge();
            }
        });
    }

    static void transactions() {
        Checks.check("transacted_commit_rollback", () -> {
            try (Connection c = Checks.connect(host, port)) {
                Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
                Session auto = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = tx.createQueue(name("tx"));
                MessageProducer p = tx.createProducer(q);
                MessageConsumer watch = auto.createConsumer(q);
                c.start();
                p.send(tx.createTextMessage("rolled back"));
                tx.rollback();
                p.send(tx.createTextMessage("t1"));
                p.send(tx.createTextMessage("t2"));
                Checks.expect(watch.receive(500) == null, "delivered before commit");
                tx.commit();
                Checks.expectEquals("t1", ((TextMessage) watch.receive(10000)).getText(), "first committed");
                Checks.expectEquals("t2", ((TextMessage) watch.receive(10000)).getText(), "second committed");
                Checks.expect(watch.receive(300) == null, "the rolled-back send arrived");
                watch.close();

                // A received message rolled back comes again, redelivered; commit takes it.
                auto.createProducer(q).send(auto.createTextMessage("take me"));
                MessageConsumer k = tx.createConsumer(q);
                Message m = k.receive(10000);
                Checks.expect(m != null && !m.getJMSRedelivered(), "first delivery " + m);
                tx.rollback();
                m = k.receive(10000);
                Checks.expect(m != null, "not redelivered after rollback");
                Checks.expectEquals("take me", ((TextMessage) m).getText(), "body");
                Checks.expect(m.getJMSRedelivered(), "JMSRedelivered false after rollback");
                Checks.expectEquals(2, m.getIntProperty("JMSXDeliveryCount"), "JMSXDeliveryCount");
                tx.commit();
                Checks.expect(k.receive(300) == null, "a committed receive came back");
            }
        });
    }

    static void large() {
        Checks.check("large_5mb", () -> {
            byte[] body = new byte[5 * 1024 * 1024];
            for (int i = 0; i < body.length; i++) {
                body[i] = (byte) (i * 31 + (i >> 13));
            }
            StringBuilder sb = new StringBuilder(5 * 1024 * 1024);
            for (int i = 0; sb.length() < 5 * 1024 * 1024; i++) {
                sb.append("line ").append(i).append(" \u00e9\u20ac\n");
            }
            String text = sb.toString();
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q = s.createQueue(name("large"));
                MessageProducer p = s.createProducer(q);
                BytesMessage b = s.createBytesMessage();
                b.writeBytes(body);
                p.send(b);
                p.send(s.createTextMessage(text));
                c.start();
                MessageConsumer k = s.createConsumer(q);
                Message m = k.receive(30000);
                Checks.expect(m instanceof BytesMessage, "received " + m);
                Checks.expectEquals((long) body.length, ((BytesMessage) m).getBodyLength(), "length");
                Checks.expect(Arrays.equals(body, m.getBody(byte[].class)), "bytes differ");
                m = k.receive(30000);
                Checks.expect(m instanceof TextMessage, "received " + m);
                Checks.expect(text.equals(((TextMessage) m).getText()), "text differs");
            }
        });
    }

    /** Runs body, which must throw a JMSException of type want with error code code. */
    static void refused(String name, Class<? extends Exception> want, String code, Checks.Body body) {
        Checks.check("refused " + name, () -> {
            try {
                body.run();
            } catch (JMSException e) {
                Checks.expect(want.isInstance(e), "threw " + e);
                Checks.expectEquals(code, e.getErrorCode(), "error code of " + e);
                return;
            }
            Checks.expect(false, "nothing thrown");
        });
    }

    static void refusals(ConnectionFactory cf) throws Exception {
        String cid = name("cid");
        try (Connection c = Checks.connect(host, port)) {
            c.setClientID(cid);
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic t = s.createTopic(name("rt"));
            refused("client_id_in_use", InvalidClientIDException.class, "C4052", () -> {
                try (Connection c2 = Checks.connect(host, port)) {
                    c2.setClientID(cid);
                }
            });
            refused("bad_password", JMSSecurityException.class, "C4060",
                    () -> cf.createConnection("guest", "not the password").close());
            refused("unknown_user", JMSSecurityException.class, "C4060",
                    () -> cf.createConnection("nobody-" + sfx, "guest").close());
            refused("unsubscribe_unknown", InvalidDestinationException.class, "C4086",
                    () -> s.unsubscribe(name("nosuch")));
            refused("durable_already_active", ResourceAllocationException.class, "C4073", () -> {
                MessageConsumer d = s.createDurableSubscriber(t, "d2");
                try {
                    s.createDurableSubscriber(t, "d2");
                } finally {
                    d.close();
                    s.unsubscribe("d2");
                }
            });
            refused("invalid_selector", InvalidSelectorException.class, "C4022",
                    () -> s.createConsumer(s.createQueue(name("sel")), "a = = 3"));
            refused("send_to_deleted_temporary", InvalidDestinationException.class, "C4111", () -> {
                TemporaryQueue tq = s.createTemporaryQueue();
                tq.delete();
                s.createProducer(tq).send(s.createTextMessage("x"));
            });
            // OpenMQ's dead message queue takes no producers (maxNumProducers 0: ADD_PRODUCER 409).
            refused("producer_on_dmq", JMSException.class, "C4036",
                    () -> s.createProducer(s.createQueue("mq.sys.dmq")).send(s.createTextMessage("x")));
            // Only topics can be patterns: a queue named like one is refused (415), never made.
            refused("producer_on_wildcard_queue", JMSException.class, "C4036",
                    () -> s.createProducer(s.createQueue(name("wq") + ".*")).send(s.createTextMessage("x")));
            refused("consumer_on_wildcard_queue", JMSException.class, "C4036",
                    () -> s.createConsumer(s.createQueue(name("wq") + ".>")).close());

            Checks.check("listener_request_reply_temporary_queue", () -> {
                // A server with a MessageListener answers each request on its JMSReplyTo, a
                // temporary queue of the requester's (QueueRequestor).
                Queue service = s.createQueue(name("service"));
                try (Connection sc = Checks.connect(host, port)) {
                    Session ss = sc.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    MessageProducer replier = ss.createProducer(null);
                    ss.createConsumer(service).setMessageListener(m -> {
                        try {
                            TextMessage r = ss.createTextMessage("re: " + ((TextMessage) m).getText());
                            r.setJMSCorrelationID(m.getJMSMessageID());
                            replier.send(m.getJMSReplyTo(), r);
                        } catch (JMSException e) {
                            throw new RuntimeException(e);
                        }
                    });
                    sc.start();
                    c.start();
                    com.sun.messaging.QueueConnectionFactory qcf = new com.sun.messaging.QueueConnectionFactory();
                    qcf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList,
                            "mq://" + host + ":" + port + "/jms");
                    try (QueueConnection qc = qcf.createQueueConnection("guest", "guest")) {
                        QueueSession qs = qc.createQueueSession(false, Session.AUTO_ACKNOWLEDGE);
                        qc.start();
                        QueueRequestor req = new QueueRequestor(qs, service);
                        for (int i = 0; i < 3; i++) {
                            TextMessage ask = qs.createTextMessage("q" + i);
                            Message r = req.request(ask);
                            Checks.expect(r instanceof TextMessage, "no reply " + i);
                            Checks.expectEquals("re: q" + i, ((TextMessage) r).getText(), "reply");
                            Checks.expectEquals(ask.getJMSMessageID(), r.getJMSCorrelationID(), "correlation");
                            Checks.expect(r.getJMSDestination() instanceof TemporaryQueue, "to " + r.getJMSDestination());
                        }
                        req.close();
                    }
                }
            });
            Checks.check("browse_with_selector", () -> {
                Queue q = s.createQueue(name("browse"));
                MessageProducer p = s.createProducer(q);
                for (int i = 0; i < 3; i++) {
                    Message m = s.createTextMessage("b" + i);
                    m.setIntProperty("i", i);
                    p.send(m);
                }
                QueueBrowser br = s.createBrowser(q, "i >= 1");
                List<String> seen = new ArrayList<>();
                for (Enumeration<?> e = br.getEnumeration(); e.hasMoreElements(); ) {
                    seen.add(((TextMessage) e.nextElement()).getText());
                }
                br.close();
                Checks.expectEquals(Arrays.asList("b1", "b2"), seen, "browsed");
                c.start();
                MessageConsumer k = s.createConsumer(q);
                for (int i = 0; i < 3; i++) {
                    Checks.expect(k.receive(10000) != null, "browsing took message " + i);
                }
                k.close();
            });
            Checks.check("no_local_and_expired", () -> {
                Topic nl = s.createTopic(name("nolocal"));
                MessageConsumer k = s.createConsumer(nl, null, true);
                s.createProducer(nl).send(s.createTextMessage("local"));
                Checks.expect(k.receive(500) == null, "noLocal consumer got its connection's message");
                k.close();
                Queue q = s.createQueue(name("expired"));
                s.createProducer(q).send(s.createTextMessage("x"), DeliveryMode.PERSISTENT, 4, 100);
                Thread.sleep(300);
                k = s.createConsumer(q);
                Checks.expect(k.receive(500) == null, "an expired message was delivered");
                k.close();
            });
            Checks.check("jmsx_group_properties", () -> {
                Queue q = s.createQueue(name("jmsx"));
                Message m = s.createTextMessage("x");
                m.setStringProperty("JMSXGroupID", "g");
                m.setIntProperty("JMSXGroupSeq", 3);
                s.createProducer(q).send(m);
                MessageConsumer k = s.createConsumer(q);
                Message r = k.receive(10000);
                Checks.expectEquals("g", r.getStringProperty("JMSXGroupID"), "JMSXGroupID");
                Checks.expectEquals(3, r.getIntProperty("JMSXGroupSeq"), "JMSXGroupSeq");
                Set<Object> names = new HashSet<>(Collections.list(r.getPropertyNames()));
                Checks.expectEquals(new HashSet<>(Arrays.asList("JMSXGroupID", "JMSXGroupSeq", "JMSXDeliveryCount")),
                        names, "property names");
                k.close();
            });
        }
    }
}
