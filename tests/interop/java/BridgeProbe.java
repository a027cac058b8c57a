import jakarta.jms.*;
import java.io.ByteArrayOutputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import java.util.Enumeration;
import java.util.HexFormat;
import java.util.TreeMap;

/** Speaks the bridge admin protocol as imqbridgemgr does (HELLO on __JMQBridgeAdmin over an
 *  ADMIN connection, then commands on the queue the HELLO reply names) and prints every
 *  reply: its properties (the instance name only as present), the kind of its JMSReplyTo,
 *  and its body (class and the serialised bytes, which needs imqbroker.jar's
 *  BridgeCmdSharedReplyData on the class path).  Used by tests/interop/test_bridgemgr.py
 *  to compare our broker's replies with the stock broker's.
 *  args: host port user password, then commands TYPE[:Name=value,...] (JMQDebug boolean,
 *  int.Name an int property, others strings). */
public class BridgeProbe {
    public static void main(String[] a) throws Exception {
        com.sun.messaging.QueueConnectionFactory f = new com.sun.messaging.QueueConnectionFactory();
        f.setConnectionType("ADMIN");
        f.setProperty("imqBrokerHostName", a[0]);
        f.setProperty("imqBrokerHostPort", a[1]);
        QueueConnection c = f.createQueueConnection(a[2], a[3]);
        QueueSession s = c.createQueueSession(false, Session.CLIENT_ACKNOWLEDGE);
        jakarta.jms.Queue req = s.createQueue("__JMQBridgeAdmin");
        TemporaryQueue replies = s.createTemporaryQueue();
        QueueSender hello = s.createSender(req);
        QueueReceiver r = s.createReceiver(replies);
        c.start();
        ObjectMessage m = s.createObjectMessage();
        m.setJMSReplyTo(replies);
        m.setIntProperty("JMQMessageType", 28);
        hello.send(m);
        Message rep = r.receive(60000);
        show("HELLO", rep);
        jakarta.jms.Queue bridge = rep == null ? null : (jakarta.jms.Queue) rep.getJMSReplyTo();
        QueueSender sender = bridge == null ? null : s.createSender(bridge);
        for (int i = 4; i < a.length && sender != null; i++) {
            String[] parts = a[i].split(":", 2);
            m = s.createObjectMessage();
            m.setJMSReplyTo(replies);
            m.setIntProperty("JMQMessageType", Integer.parseInt(parts[0]));
            if (parts.length > 1) for (String kv : parts[1].split(",")) {
                String[] p = kv.split("=", 2);
                String v = p.length > 1 ? p[1] : "";
                if (p[0].equals("JMQDebug")) m.setBooleanProperty(p[0], Boolean.parseBoolean(v));
                else if (p[0].startsWith("int.")) m.setIntProperty(p[0].substring(4), Integer.parseInt(v));
                else m.setStringProperty(p[0], v);
            }
            m.setStringProperty("JMQLocaleLanguage", "en");
            m.setStringProperty("JMQLocaleCountry", "");
            m.setStringProperty("JMQLocaleVariant", "");
            sender.send(m);
            show(a[i], r.receive(60000));
        }
        c.close();
    }

    static void show(String what, Message m) throws Exception {
        System.out.println("== " + what);
        if (m == null) { System.out.println("no reply"); return; }
        TreeMap<String, String> props = new TreeMap<>();
        for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements(); ) {
            String n = (String) e.nextElement();
            Object v = m.getObjectProperty(n);
            props.put(n, n.equals("JMQInstanceName") ? "<present>" : v.getClass().getSimpleName() + ":" + v);
        }
        System.out.println("props " + props);
        Destination rt = m.getJMSReplyTo();
        System.out.println("replyTo " + (rt == null ? "null" : rt.getClass().getName()));
        if (m instanceof ObjectMessage om) {
            Serializable o = om.getObject();
            System.out.println("body " + (o == null ? "null" : o.getClass().getName()));
            if (o != null) {
                ByteArrayOutputStream b = new ByteArrayOutputStream();
                try (ObjectOutputStream out = new ObjectOutputStream(b)) { out.writeObject(o); }
                System.out.println("hex " + HexFormat.of().formatHex(b.toByteArray()));
            }
        }
    }
}
