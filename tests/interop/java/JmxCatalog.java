import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.lang.reflect.Array;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import javax.management.remote.JMXConnector;

/**
 * Lists every MBean under com.sun.messaging.jms.server and reads every attribute of each,
 * through the stock client's AdminConnectionFactory and javax.management only, so the same
 * program prints the stock broker's catalogue and ours for the test to compare.
 *
 * Arguments: host port [attributes-file]. The attribute names come from getMBeanInfo; when a
 * broker does not answer it, from the file (lines "TYPE-KEY ATTRIBUTE", TYPE-KEY being the
 * name's type and subtype, e.g. "Broker/Config Version").
 *
 * Prints "mbean NAME", then "attr NAME ATTRIBUTE DECLARED-TYPE VALUE-TYPE VALUE" for each
 * attribute (DECLARED-TYPE "?" when getMBeanInfo is not answered), first idle, then (phase
 * "busy") while a stock JMS client holds a connection, a producer and a consumer on queue
 * jmxq: the Connection and Consumer lists and the Destination monitor of jmxq.
 */
public final class JmxCatalog {
    private static final String DOMAIN = "com.sun.messaging.jms.server";

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        Map<String, List<String>> fallback = new LinkedHashMap<>();
        if (args.length > 2) {
            for (String line : Files.readAllLines(Path.of(args[2]))) {
                String[] kv = line.trim().split(" ");
                if (kv.length == 2) {
                    fallback.computeIfAbsent(kv[0], k -> new ArrayList<>()).add(kv[1]);
                }
            }
        }
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, "mq://" + host + ":" + port);
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminUsername, "admin");
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminPassword, "admin");
        JMXConnector[] conn = new JMXConnector[1];
        Checks.check("connect", () -> conn[0] = acf.createConnection());
        if (conn[0] == null) {
            Checks.done();
        }
        MBeanServerConnection mbsc = conn[0].getMBeanServerConnection();
        Checks.check("idle catalogue", () -> dump(mbsc, "idle", new ObjectName(DOMAIN + ":*"), fallback));
        Connection jms = Checks.connect(host, port);
        try {
            jms.setClientID("jmxcatalog");
            Session s = jms.createSession(false, Session.AUTO_ACKNOWLEDGE);
            jakarta.jms.Queue q = s.createQueue("jmxq");
            MessageProducer p = s.createProducer(q);
            MessageConsumer c = s.createConsumer(q);
            jms.start();
            for (int i = 0; i < 3; i++) {
                p.send(s.createTextMessage("m" + i));
            }
            for (int i = 0; i < 3; i++) {
                Checks.expect(c.receive(10000) != null, "message " + i + " not received");
            }
            p.send(s.createTextMessage("left"));
            Checks.check("busy catalogue", () -> {
                for (String pattern : new String[] {
                    "type=Connection,*", "type=Consumer,*", "type=Producer,*",
                    "type=Destination,desttype=q,name=\"jmxq\",*",
                    "type=ConnectionManager,*", "type=ConsumerManager,*",
                    "type=ProducerManager,*", "type=DestinationManager,*",
                    "type=Service,name=jms,*"}) {
                    dump(mbsc, "busy", new ObjectName(DOMAIN + ":" + pattern), fallback);
                }
            });
        } finally {
            jms.close();
        }
        Checks.check("close", () -> conn[0].close());
        Checks.done();
    }

    private static void dump(MBeanServerConnection mbsc, String phase, ObjectName pattern,
            Map<String, List<String>> fallback) throws Exception {
        Set<String> names = new TreeSet<>();
        for (ObjectName n : mbsc.queryNames(pattern, null)) {
            names.add(n.getCanonicalName());
        }
        for (String text : names) {
            ObjectName n = new ObjectName(text);
            System.out.println("mbean " + phase + " " + text);
            Map<String, String> declared = new LinkedHashMap<>();
            try {
                for (MBeanAttributeInfo a : mbsc.getMBeanInfo(n).getAttributes()) {
                    declared.put(a.getName(), a.getType());
                }
            } catch (Exception e) {
                String key = n.getKeyProperty("type") + "/" + n.getKeyProperty("subtype");
                for (String a : fallback.getOrDefault(key, List.of())) {
                    declared.put(a, "?");
                }
            }
            for (Map.Entry<String, String> a : new TreeSet<>(declared.keySet()).stream()
                    .map(k -> Map.entry(k, declared.get(k))).toList()) {
                String shown;
                try {
                    Object v = mbsc.getAttribute(n, a.getKey());
                    shown = type(v) + " " + show(v);
                } catch (Exception e) {
                    shown = "! " + e.getClass().getName();
                }
                System.out.println("attr " + phase + " " + text + " " + a.getKey() + " "
                        + a.getValue() + " " + shown.replace('\n', ' '));
            }
        }
    }

    private static String type(Object v) {
        return v == null ? "null" : v.getClass().getName();
    }

    private static String show(Object v) {
        if (v == null) {
            return "null";
        }
        if (v.getClass().isArray()) {
            StringBuilder sb = new StringBuilder("[");
            for (int i = 0; i < Array.getLength(v); i++) {
                sb.append(i == 0 ? "" : ", ").append(show(Array.get(v, i)));
            }
            return sb.append("]").toString();
        }
        if (v instanceof CompositeData cd) {
            StringBuilder sb = new StringBuilder("{");
            for (String k : new TreeSet<>(cd.getCompositeType().keySet())) {
                Object x = cd.get(k);
                sb.append(sb.length() == 1 ? "" : ", ").append(k).append(':')
                        .append(cd.getCompositeType().getType(k).getClassName()).append('=')
                        .append(show(x));
            }
            return sb.append("}").toString();
        }
        return String.valueOf(v);
    }
}
