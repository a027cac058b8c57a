import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.InstanceNotFoundException;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanServerConnection;
import javax.management.NotificationFilterSupport;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * A JMX monitoring client of the JDK's API only (the stock client's AdminConnectionFactory and
 * javax.management): once a second it lists every MBean under com.sun.messaging.jms.server and
 * reads every attribute of each (getAttributes with the names getMBeanInfo declares), as a
 * monitoring agent polls a broker.
 *
 * Arguments: host port seconds [ops] [load].  "ops" also invokes, each round, every operation
 * of impact INFO without parameters (the managers' ID and info lists); "load" runs a stock JMS
 * producer and consumer on queue jmxpollq meanwhile, and listens to the ConnectionManager's
 * notifications (its own load connection's open and close).
 *
 * Prints "round N mbeans M attributes A" per round, then "info polls", "info reads" (attribute
 * values read), "info missing" (asked for and not returned), "info errors" (calls that threw,
 * other than an MBean gone between the listing and the read, counted as "info gone"),
 * "info invoked", "info sent"/"info received" (the load's messages) and "notification TYPE" for
 * each notification.  Checks: connect, poll, load, close.
 */
public final class JmxPoll {
    private static final String DOMAIN = "com.sun.messaging.jms.server";

    private static long reads;
    private static long missing;
    private static long errors;
    private static long gone;
    private static long invoked;
    private static String firstError;

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        int seconds = Integer.parseInt(args[2]);
        boolean withOps = false;
        boolean withLoad = false;
        for (int i = 3; i < args.length; i++) {
            withOps |= args[i].equals("ops");
            withLoad |= args[i].equals("load");
        }
        final boolean ops = withOps;
        final boolean load = withLoad;
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
        Map<String, Integer> notes = new TreeMap<>();
        if (load) {
            NotificationFilterSupport filter = new NotificationFilterSupport();
            filter.enableType("mq.connection");
            mbsc.addNotificationListener(
                    new ObjectName(DOMAIN + ":type=ConnectionManager,subtype=Monitor"),
                    (n, hb) -> {
                        synchronized (notes) {
                            notes.merge(n.getType(), 1, Integer::sum);
                        }
                    },
                    filter,
                    null);
        }
        AtomicBoolean stop = new AtomicBoolean();
        long[] traffic = new long[2];
        Thread loader = null;
        if (load) {
            loader = new Thread(() -> Checks.check("load", () -> traffic(host, port, stop, traffic)));
            loader.start();
        }
        Map<String, MBeanInfo> infos = new HashMap<>();
        int[] polls = new int[1];
        Checks.check("poll", () -> {
            long start = System.nanoTime();
            for (int round = 0; round < seconds; round++) {
                long due = start + round * 1_000_000_000L;
                long wait = (due - System.nanoTime()) / 1_000_000L;
                if (wait > 0) {
                    Thread.sleep(wait);
                }
                poll(mbsc, infos, round, ops);
                polls[0]++;
            }
        });
        stop.set(true);
        if (loader != null) {
            loader.join(30000);
        }
        Checks.info("polls", polls[0]);
        Checks.info("reads", reads);
        Checks.info("missing", missing);
        Checks.info("errors", errors);
        Checks.info("gone", gone);
        Checks.info("invoked", invoked);
        Checks.info("sent", traffic[0]);
        Checks.info("received", traffic[1]);
        if (firstError != null) {
            Checks.info("first-error", firstError);
        }
        if (load) {
            Thread.sleep(1500); // the close notification of the load's connection
        }
        synchronized (notes) {
            for (Map.Entry<String, Integer> e : notes.entrySet()) {
                System.out.println("notification " + e.getKey() + " " + e.getValue());
            }
        }
        Checks.check("close", () -> conn[0].close());
        Checks.done();
    }

    private static void poll(
            MBeanServerConnection mbsc, Map<String, MBeanInfo> infos, int round, boolean ops)
            throws Exception {
        Set<ObjectName> names = mbsc.queryNames(new ObjectName(DOMAIN + ":*"), null);
        long attrs = 0;
        for (ObjectName name : names) {
            String kind = name.getKeyProperty("type") + "/" + name.getKeyProperty("subtype");
            try {
                MBeanInfo info = infos.get(kind);
                if (info == null) {
                    info = mbsc.getMBeanInfo(name);
                    infos.put(kind, info);
                }
                MBeanAttributeInfo[] declared = info.getAttributes();
                String[] wanted = new String[declared.length];
                for (int i = 0; i < declared.length; i++) {
                    wanted[i] = declared[i].getName();
                }
                AttributeList got = mbsc.getAttributes(name, wanted);
                attrs += got.size();
                reads += got.size();
                missing += wanted.length - got.size();
                for (Attribute a : got.asList()) {
                    a.getValue(); // a value that did not deserialise throws earlier
                }
                if (ops) {
                    for (MBeanOperationInfo op : info.getOperations()) {
                        if (op.getImpact() == MBeanOperationInfo.INFO && op.getSignature().length == 0) {
                            mbsc.invoke(name, op.getName(), new Object[0], new String[0]);
                            invoked++;
                        }
                    }
                }
            } catch (InstanceNotFoundException e) {
                gone++; // a connection or destination that went between the listing and the read
            } catch (Exception e) {
                errors++;
                if (firstError == null) {
                    firstError = name + ": " + e;
                }
            }
        }
        System.out.println("round " + round + " mbeans " + names.size() + " attributes " + attrs);
    }

    /** A stock producer and consumer on one queue until ``stop``: [sent, received]. */
    private static void traffic(String host, String port, AtomicBoolean stop, long[] counts)
            throws Exception {
        Connection c = Checks.connect(host, port);
        try {
            Session ps = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session cs = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            jakarta.jms.Queue q = ps.createQueue("jmxpollq");
            MessageProducer p = ps.createProducer(q);
            MessageConsumer r = cs.createConsumer(q);
            r.setMessageListener(m -> counts[1]++);
            c.start();
            while (!stop.get()) {
                p.send(ps.createTextMessage("poll load"));
                counts[0]++;
                if (counts[0] % 100 == 0) {
                    Thread.sleep(10);
                }
            }
            long end = System.currentTimeMillis() + 10000;
            while (counts[1] < counts[0] && System.currentTimeMillis() < end) {
                Thread.sleep(20);
            }
            Checks.expectEquals(counts[0], counts[1], "messages received");
        } finally {
            c.close();
        }
    }
}
