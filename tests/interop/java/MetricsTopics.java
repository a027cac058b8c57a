import jakarta.jms.*;
import java.util.*;

/**
 * The metrics topics (mq.metrics.*) as a monitoring tool sees them with plain JMS.
 *
 * Mode "maps" (as admin): subscribe to mq.metrics.broker, .jvm, .destination_list and the
 * destination topics of a queue and a topic; a map arrives at once and another after
 * the interval; print each map's keys and value types and the messages' properties
 * ("info keys NAME k:Type,...", "info props NAME k:Type,...", "info entry k:Type,..."
 * for one destination_list entry) for the test to compare, and check their values. A
 * metrics topic nobody subscribes to any more gets nothing more (its own destination
 * map, read from mq.metrics.destination.topic.mq.metrics.jvm, says so). Producers and
 * unknown metrics topics are refused.
 *
 * Mode "acl": the broker's rules deny topic.mq.metrics.* to guest, which one level of
 * wildcard makes mq.metrics.broker and mq.metrics.jvm, not
 * mq.metrics.destination.queue.NAME; admin is not denied.
 */
public class MetricsTopics {
    static final String QUEUE_PREFIX = "mq.metrics.destination.queue.";
    static final String TOPIC_PREFIX = "mq.metrics.destination.topic.";
    static String host, port;

    public static void main(String[] a) throws Exception {
        host = a[0];
        port = a[1];
        String suffix = a[2];
        String mode = a[3];
        long wait = Long.parseLong(a[4]) * 1000 + 10000;  // the interval, and time to spare
        String q = "metrics.q." + suffix, t = "metrics.t." + suffix;
        if (mode.equals("maps")) {
            maps(q, t, wait);
        } else {
            acl(q);
        }
        Checks.done();
    }

    static Connection connect(String user) throws JMSException {
        return Checks.factory(host, port).createConnection(user, user);
    }

    static String typeName(Object v) {
        return v == null ? "null" : v.getClass().getSimpleName();
    }

    static String keysAndTypes(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, Object> e : new TreeMap<>(m).entrySet()) {
            if (sb.length() > 0) sb.append(',');
            sb.append(e.getKey()).append(':').append(typeName(e.getValue()));
        }
        return sb.toString();
    }

    static Map<String, Object> body(Message m) throws JMSException {
        Checks.expect(m instanceof MapMessage, "a MapMessage, got " + m);
        MapMessage mm = (MapMessage) m;
        Map<String, Object> out = new HashMap<>();
        for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements();) {
            String k = (String) e.nextElement();
            out.put(k, mm.getObject(k));
        }
        return out;
    }

    static Map<String, Object> properties(Message m) throws JMSException {
        Map<String, Object> out = new HashMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) {
            String k = (String) e.nextElement();
            if (!k.startsWith("JMSX")) out.put(k, m.getObjectProperty(k));
        }
        return out;
    }

    static long number(Map<String, Object> m, String key) {
        Object v = m.get(key);
        Checks.expect(v instanceof Number, key + " is a number: " + v);
        return ((Number) v).longValue();
    }

    static void maps(String q, String t, long wait) throws Exception {
        String[] names = {"mq.metrics.broker", "mq.metrics.jvm", "mq.metrics.destination_list",
                QUEUE_PREFIX + q, TOPIC_PREFIX + t};
        Map<String, Message> first = new LinkedHashMap<>();
        Map<String, MessageConsumer> consumers = new LinkedHashMap<>();
        try (Connection c = connect("admin")) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = s.createProducer(null);
            p.send(s.createQueue(q), s.createTextMessage("held"));
            p.send(s.createTopic(t), s.createTextMessage("nobody hears it"));
            TemporaryQueue temp = s.createTemporaryQueue();
            c.start();
            Checks.check("subscribe", () -> {
                for (String n : names) {
                    consumers.put(n, s.createConsumer(s.createTopic(n)));
                }
            });
            for (String n : names) {
                Checks.check("first_map " + n, () -> {
                    Message m = consumers.get(n).receive(wait);
                    Checks.expect(m != null, "no map within " + wait + " ms");
                    first.put(n, m);
                    Checks.info("keys " + n, keysAndTypes(body(m)));
                    Checks.info("props " + n, keysAndTypes(properties(m)));
                });
            }
            for (String n : names) {
                Checks.check("periodic_map " + n, () -> {
                    Message m = consumers.get(n).receive(wait);
                    Checks.expect(m instanceof MapMessage, "no second map within " + wait + " ms");
                });
            }
            Checks.check("headers_and_properties", () -> {
                for (Map.Entry<String, Message> e : first.entrySet()) {
                    Message m = e.getValue();
                    String n = e.getKey();
                    Checks.expectEquals(DeliveryMode.NON_PERSISTENT, m.getJMSDeliveryMode(), n + " delivery mode");
                    Checks.expectEquals(5, m.getJMSPriority(), n + " priority");
                    Checks.expectEquals(300000L, m.getJMSExpiration() - m.getJMSTimestamp(), n + " time to live");
                    Checks.expectEquals(n, ((Topic) m.getJMSDestination()).getTopicName(), n + " destination");
                    Checks.expectEquals(n, m.getStringProperty("type"), n + " type");
                    Checks.expectEquals(Integer.valueOf(port), m.getObjectProperty("brokerPort"), n + " brokerPort");
                    String address = m.getStringProperty("brokerAddress");
                    Checks.expect(address.startsWith("mq://") && address.endsWith(":" + port + "/"),
                            n + " brokerAddress " + address);
                    Object ts = m.getObjectProperty("timestamp");
                    Checks.expect(ts instanceof Long && Math.abs((Long) ts - m.getJMSTimestamp()) < 60000,
                            n + " timestamp " + ts);
                }
            });
            Checks.check("destination_list", () -> {
                Map<String, Object> list = body(first.get("mq.metrics.destination_list"));
                Object entry = list.get(QUEUE_PREFIX + q);
                Checks.expect(entry instanceof Map, q + " listed: " + list.keySet());
                Map<?, ?> qe = (Map<?, ?>) entry;
                Checks.info("entry", keysAndTypes(new HashMap<String, Object>(castMap(qe))));
                Checks.expectEquals("queue", qe.get("type"), "type");
                Checks.expectEquals(q, qe.get("name"), "name");
                Checks.expectEquals(Boolean.FALSE, qe.get("isTemporary"), "isTemporary");
                Map<?, ?> te = (Map<?, ?>) list.get(TOPIC_PREFIX + t);
                Checks.expect(te != null && "topic".equals(te.get("type")), t + " listed: " + te);
                Map<?, ?> tq = (Map<?, ?>) list.get(QUEUE_PREFIX + temp.getQueueName());
                Checks.expect(tq != null && Boolean.TRUE.equals(tq.get("isTemporary")),
                        "the temporary queue listed as temporary: " + tq);
                Checks.expect(list.containsKey(QUEUE_PREFIX + "mq.sys.dmq"), "the DMQ listed");
                for (String k : list.keySet()) {
                    Checks.expect(!k.startsWith(TOPIC_PREFIX + "mq.metrics."), "a metrics topic listed: " + k);
                }
            });
            Checks.check("broker_map", () -> {
                Map<String, Object> m = body(first.get("mq.metrics.broker"));
                Checks.expect(number(m, "numConnections") >= 1, "numConnections " + m);
                Checks.expect(number(m, "numDestinations") >= 4, "numDestinations " + m);
                Checks.expect(number(m, "numMsgs") >= 1, "numMsgs " + m);
                Checks.expect(number(m, "numMsgsIn") >= 2, "numMsgsIn " + m);
            });
            Checks.check("jvm_map", () -> {
                Map<String, Object> m = body(first.get("mq.metrics.jvm"));
                long total = number(m, "totalMemory"), free = number(m, "freeMemory");
                Checks.expect(number(m, "maxMemory") > 0 && total > 0 && 0 <= free && free <= total, "memory " + m);
            });
            Checks.check("destination_maps", () -> {
                Map<String, Object> m = body(first.get(QUEUE_PREFIX + q));
                Checks.expectEquals(1L, number(m, "numMsgs"), "numMsgs of " + q);
                Checks.expectEquals(1L, number(m, "numMsgsIn"), "numMsgsIn of " + q);
                Map<String, Object> tm = body(first.get(TOPIC_PREFIX + t));
                Checks.expectEquals(0L, number(tm, "numMsgs"), "numMsgs of " + t);
            });
            Checks.check("quiet_without_subscribers", () -> {
                // Nobody listens to mq.metrics.jvm any more: what its own metrics topic
                // says it took in stays the same over two more intervals.
                consumers.remove("mq.metrics.jvm").close();
                MessageConsumer watch = s.createConsumer(s.createTopic(TOPIC_PREFIX + "mq.metrics.jvm"));
                long before = number(body(watch.receive(wait)), "numMsgsIn");
                watch.receive(wait);
                Message later = watch.receive(wait);
                Checks.expect(later != null, "no map within " + wait + " ms");
                Checks.expectEquals(before, number(body(later), "numMsgsIn"), "numMsgsIn of mq.metrics.jvm");
                Checks.info("jvm_numMsgsIn", before);
                watch.close();
            });
            refused("producer_on_metrics_topic", JMSException.class, "C4036",
                    () -> s.createProducer(s.createTopic("mq.metrics.broker")).send(s.createTextMessage("x")));
            refused("unknown_metrics_topic", JMSException.class, "C4036",
                    () -> s.createConsumer(s.createTopic("mq.metrics.nosuch")).close());
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> castMap(Map<?, ?> m) {
        return (Map<String, Object>) m;
    }

    static void acl(String q) throws Exception {
        try (Connection c = connect("guest")) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            s.createProducer(s.createQueue(q)).send(s.createTextMessage("held"));
            c.start();
            refused("guest mq.metrics.broker", JMSSecurityException.class, "C4079",
                    () -> s.createConsumer(s.createTopic("mq.metrics.broker")));
            refused("guest mq.metrics.jvm", JMSSecurityException.class, "C4079",
                    () -> s.createConsumer(s.createTopic("mq.metrics.jvm")));
            Checks.check("guest destination topic allowed", () -> {
                MessageConsumer mc = s.createConsumer(s.createTopic(QUEUE_PREFIX + q));
                Checks.expect(mc.receive(10000) instanceof MapMessage, "no map");
                mc.close();
            });
        }
        Checks.check("admin allowed", () -> {
            try (Connection c = connect("admin")) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                c.start();
                Checks.expect(s.createConsumer(s.createTopic("mq.metrics.broker")).receive(10000) instanceof MapMessage,
                        "no map");
            }
        });
    }

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
}
