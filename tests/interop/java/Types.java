import jakarta.jms.*;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * Every message type, property type and header, both ways with the other clients.
 *
 * <pre>
 *   Types HOST PORT send PREFIX...    to each PREFIX: PREFIX_a Text+Bytes, _b Map+Stream+Object, _c Message
 *   Types HOST PORT recv QUEUE COUNT  receive COUNT messages, check body and properties, print the headers
 * </pre>
 *
 * The values are the ones tests/interop/test_java_types.py (and probe.c's send-props) use. Each
 * message's correlation ID names it; "send" prints "info sent CORR ID TIMESTAMP EXPIRATION
 * DELIVERYTIME", "recv" prints "info got CORR key=value ..." for the test to compare.
 */
public class Types {
    static final String TEXT = "interop caf\u00e9 \u20ac";
    static final byte[] BYTES = new byte[300];

    static {
        for (int i = 0; i < BYTES.length; i++) {
            BYTES[i] = (byte) ((i * 7 + 3) & 0xff);
        }
    }

    /** The properties every sender sets (name -> value of its Java type). */
    static Map<String, Object> props() {
        Map<String, Object> p = new TreeMap<>();
        p.put("pBool", Boolean.TRUE);
        p.put("pByte", (byte) -5);
        p.put("pShort", (short) -1234);
        p.put("pInt", 123456789);
        p.put("pLong", 1234567890123L);
        p.put("pFloat", 1.5f);
        p.put("pDouble", -2.25d);
        p.put("pString", "caf\u00e9");
        return p;
    }

    /** MapMessage entries and, in this order, StreamMessage items. */
    static final String[] FIELD_NAMES = {"b", "y", "s", "c", "i", "l", "f", "d", "t", "a"};

    static Object[] fields() {
        return new Object[] {
            Boolean.TRUE, (byte) -5, (short) -1234, '\u00e9', 123456789, 1234567890123L, 1.5f,
            -2.25d, "caf\u00e9", new byte[] {1, 2, 3, (byte) 0xff}
        };
    }

    static HashMap<String, Object> object() {
        HashMap<String, Object> o = new HashMap<>();
        o.put("k", 7);
        o.put("s", "caf\u00e9");
        return o;
    }

    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1];
        if (a[2].equals("send")) {
            send(host, port, Arrays.copyOfRange(a, 3, a.length));
        } else {
            recv(host, port, a[3], Integer.parseInt(a[4]));
        }
        Checks.done();
    }

    static void setAll(Message m, String corr, Destination replyTo) throws JMSException {
        for (Map.Entry<String, Object> e : props().entrySet()) {
            m.setObjectProperty(e.getKey(), e.getValue());
        }
        m.setJMSCorrelationID(corr);
        m.setJMSType("jtype");
        if (replyTo != null) {
            m.setJMSReplyTo(replyTo);
        }
    }

    static void send(String host, String port, String[] prefixes) throws Exception {
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            for (String prefix : prefixes) {
                Checks.check("send " + prefix, () -> {
                    MessageProducer p = s.createProducer(null);
                    Queue qa = s.createQueue(prefix + "_a");
                    Queue qb = s.createQueue(prefix + "_b");
                    Queue qc = s.createQueue(prefix + "_c");

                    TextMessage t = s.createTextMessage(TEXT);
                    setAll(t, "java-text", s.createQueue(prefix + "_reply"));
                    p.send(qa, t, DeliveryMode.PERSISTENT, 7, 120000);
                    sent(t);

                    BytesMessage b = s.createBytesMessage();
                    b.writeBytes(BYTES);
                    setAll(b, "java-bytes", s.createTopic(prefix + "_rtopic"));
                    p.send(qa, b, DeliveryMode.NON_PERSISTENT, 2, 0);
                    sent(b);

                    MapMessage m = s.createMapMessage();
                    Object[] f = fields();
                    for (int i = 0; i < f.length; i++) {
                        m.setObject(FIELD_NAMES[i], f[i]);
                    }
                    setAll(m, "java-map", null);
                    p.send(qb, m, DeliveryMode.PERSISTENT, 4, 0);
                    sent(m);

                    StreamMessage st = s.createStreamMessage();
                    for (Object o : f) {
                        st.writeObject(o);
                    }
                    setAll(st, "java-stream", null);
                    p.send(qb, st, DeliveryMode.NON_PERSISTENT, 9, 0);
                    sent(st);

                    ObjectMessage o = s.createObjectMessage(object());
                    setAll(o, "java-object", null);
                    p.send(qb, o, DeliveryMode.PERSISTENT, 0, 0);
                    sent(o);

                    Message plain = s.createMessage();
                    setAll(plain, "java-message", null);
                    p.send(qc, plain, DeliveryMode.PERSISTENT, 5, 0);
                    sent(plain);
                });
            }
        }
    }

    static void sent(Message m) throws JMSException {
        Checks.info(
                "sent",
                m.getJMSCorrelationID() + " " + m.getJMSMessageID() + " " + m.getJMSTimestamp() + " "
                        + m.getJMSExpiration() + " " + m.getJMSDeliveryTime());
    }

    static void recv(String host, String port, String queue, int count) throws Exception {
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer k = s.createConsumer(s.createQueue(queue));
            c.start();
            for (int i = 0; i < count; i++) {
                Message m = k.receive(15000);
                if (m == null) {
                    Checks.check("receive " + i, () -> Checks.expect(false, "nothing within 15 s"));
                    return;
                }
                String corr = m.getJMSCorrelationID();
                Checks.check("body " + corr, () -> checkBody(m));
                Checks.check("props " + corr, () -> checkProps(m));
                Destination r = m.getJMSReplyTo();
                String rt = r == null ? "none"
                        : r instanceof Queue ? "queue:" + ((Queue) r).getQueueName()
                        : "topic:" + ((Topic) r).getTopicName();
                Checks.info(
                        "got",
                        corr + " class=" + kind(m) + " mode=" + m.getJMSDeliveryMode() + " prio="
                                + m.getJMSPriority() + " exp=" + m.getJMSExpiration() + " ts="
                                + m.getJMSTimestamp() + " id=" + m.getJMSMessageID() + " type="
                                + m.getJMSType() + " replyto=" + rt + " redelivered="
                                + m.getJMSRedelivered() + " dest="
                                + ((Queue) m.getJMSDestination()).getQueueName() + " deliverytime="
                                + m.getJMSDeliveryTime() + " count="
                                + m.getIntProperty("JMSXDeliveryCount"));
            }
        }
    }

    static String kind(Message m) {
        if (m instanceof TextMessage) return "Text";
        if (m instanceof BytesMessage) return "Bytes";
        if (m instanceof MapMessage) return "Map";
        if (m instanceof StreamMessage) return "Stream";
        if (m instanceof ObjectMessage) return "Object";
        return "Message";
    }

    static void checkProps(Message m) throws JMSException {
        Map<String, Object> want = props();
        Map<String, Object> got = new TreeMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String n = (String) e.nextElement();
            if (!n.startsWith("JMSX") && !n.startsWith("JMS_")) {
                got.put(n, m.getObjectProperty(n));
            }
        }
        Checks.expectEquals(want, got, "properties");
        for (Map.Entry<String, Object> e : want.entrySet()) {
            Checks.expectEquals(
                    e.getValue().getClass(), got.get(e.getKey()).getClass(), e.getKey() + " type");
        }
        // The typed getters' conversions the JMS spec table allows.
        Checks.expectEquals(-5L, m.getLongProperty("pByte"), "pByte as long");
        Checks.expectEquals(1.5d, m.getDoubleProperty("pFloat"), "pFloat as double");
        Checks.expectEquals("true", m.getStringProperty("pBool"), "pBool as String");
    }

    static void checkBody(Message m) throws JMSException {
        if (m instanceof TextMessage) {
            Checks.expectEquals(TEXT, ((TextMessage) m).getText(), "text");
        } else if (m instanceof BytesMessage) {
            BytesMessage b = (BytesMessage) m;
            Checks.expectEquals((long) BYTES.length, b.getBodyLength(), "body length");
            byte[] got = new byte[(int) b.getBodyLength()];
            b.readBytes(got);
            Checks.expect(Arrays.equals(BYTES, got), "bytes differ");
        } else if (m instanceof MapMessage) {
            MapMessage mm = (MapMessage) m;
            Object[] f = fields();
            int n = 0;
            for (Enumeration<?> e = mm.getMapNames(); e.hasMoreElements(); e.nextElement()) {
                n++;
            }
            Checks.expectEquals(f.length, n, "map size");
            for (int i = 0; i < f.length; i++) {
                same(f[i], mm.getObject(FIELD_NAMES[i]), "map " + FIELD_NAMES[i]);
            }
            Checks.expectEquals(-1234, mm.getInt("s"), "getInt of a short");
        } else if (m instanceof StreamMessage) {
            StreamMessage sm = (StreamMessage) m;
            for (Object want : fields()) {
                same(want, sm.readObject(), "stream item");
            }
            try {
                sm.readObject();
                Checks.expect(false, "more items than written");
            } catch (MessageEOFException expected) {
                // the end of the stream
            }
        } else if (m instanceof ObjectMessage) {
            Checks.expectEquals(object(), ((ObjectMessage) m).getObject(), "object");
        } else {
            Checks.expect(m.getBody(Object.class) == null, "a plain Message has no body");
        }
    }

    static void same(Object want, Object got, String what) {
        if (want instanceof byte[]) {
            Checks.expect(got instanceof byte[] && Arrays.equals((byte[]) want, (byte[]) got),
                    what + ": want bytes " + Arrays.toString((byte[]) want) + ", got " + got);
            return;
        }
        Checks.expectEquals(want, got, what);
        Checks.expectEquals(want.getClass(), got.getClass(), what + " type");
    }
}
