import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import jakarta.jms.Connection;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.management.Attribute;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;
import javax.management.MBeanParameterInfo;
import javax.management.MBeanServerConnection;
import javax.management.Notification;
import javax.management.NotificationListener;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * JMX changes through the stock client's AdminConnectionFactory (imq.jar) and javax.management
 * only: getMBeanInfo, creating, changing, pausing, purging and destroying a destination, the
 * notifications they send, and the exceptions of bad calls. Prints "info" lines the test compares
 * between brokers. Arguments: host port.
 */
public final class JmxOperations {
    private static final String D = "com.sun.messaging.jms.server:";
    private static final String QUEUE = "jmxops.q1";

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, "mq://" + host + ":" + port);
        JMXConnector jmx = acf.createConnection("admin", "admin");
        MBeanServerConnection m = jmx.getMBeanServerConnection();
        ObjectName brokerConfig = new ObjectName(D + "type=Broker,subtype=Config");
        ObjectName dmConfig = new ObjectName(D + "type=DestinationManager,subtype=Config");
        ObjectName dmMonitor = new ObjectName(D + "type=DestinationManager,subtype=Monitor");
        ObjectName logMonitor = new ObjectName(D + "type=Log,subtype=Monitor");
        ObjectName destConfig = new ObjectName(
                D + "type=Destination,subtype=Config,desttype=q,name=" + ObjectName.quote(QUEUE));
        ObjectName destMonitor = new ObjectName(
                D + "type=Destination,subtype=Monitor,desttype=q,name=" + ObjectName.quote(QUEUE));
        LinkedBlockingQueue<Notification> dmNotes = new LinkedBlockingQueue<>();
        LinkedBlockingQueue<Notification> logNotes = new LinkedBlockingQueue<>();

        Checks.check("mbean info", () -> {
            for (ObjectName n : new ObjectName[] {brokerConfig, dmConfig, dmMonitor, logMonitor}) {
                MBeanInfo i = m.getMBeanInfo(n);
                String key = n.getKeyProperty("type") + "." + n.getKeyProperty("subtype");
                TreeSet<String> attrs = new TreeSet<>();
                for (MBeanAttributeInfo a : i.getAttributes()) {
                    attrs.add(a.getName() + ":" + a.getType() + (a.isWritable() ? ":rw" : ":r"));
                }
                TreeSet<String> ops = new TreeSet<>();
                for (MBeanOperationInfo o : i.getOperations()) {
                    StringBuilder sig = new StringBuilder();
                    for (MBeanParameterInfo p : o.getSignature()) {
                        sig.append(sig.length() > 0 ? "," : "").append(p.getType());
                    }
                    ops.add(o.getName() + "(" + sig + ")" + o.getReturnType() + "/" + o.getImpact());
                }
                TreeSet<String> notes = new TreeSet<>();
                for (javax.management.MBeanNotificationInfo x : i.getNotifications()) {
                    notes.add(x.getName() + "=" + String.join("|", new TreeSet<>(List.of(x.getNotifTypes()))));
                }
                System.out.println("info mbeaninfo." + key + ".class " + i.getClassName());
                System.out.println("info mbeaninfo." + key + ".attributes " + attrs);
                System.out.println("info mbeaninfo." + key + ".operations " + ops);
                System.out.println("info mbeaninfo." + key + ".notifications " + notes);
            }
        });
        Checks.check("is instance of", () -> {
            Checks.expect(m.isInstanceOf(brokerConfig, "javax.management.DynamicMBean"),
                    "not a DynamicMBean");
            System.out.println("info instance-class " + m.getObjectInstance(dmConfig).getClassName());
        });
        NotificationListener toDm = (n, hb) -> dmNotes.add(n);
        NotificationListener toLog = (n, hb) -> logNotes.add(n);
        Checks.check("add listeners", () -> {
            m.addNotificationListener(dmMonitor, toDm, null, null);
            m.addNotificationListener(logMonitor, toLog, null, null);
        });
        Checks.check("create destination", () -> {
            m.invoke(dmConfig, "create", new Object[] {"q", QUEUE},
                    new String[] {"java.lang.String", "java.lang.String"});
            Checks.expect(m.isRegistered(destConfig), QUEUE + " has no Config MBean");
        });
        Checks.check("create notification", () -> {
            Notification n = next(dmNotes, "mq.destination.create");
            System.out.println("info create-notification " + n.getClass().getName() + " "
                    + n.getSource() + " " + describe(n));
        });
        Checks.check("get destinations", () -> {
            ObjectName[] all = (ObjectName[]) m.invoke(dmConfig, "getDestinations", null, null);
            boolean found = false;
            for (ObjectName n : all) {
                found |= n.equals(destConfig);
            }
            Checks.expect(found, "getDestinations lacks " + destConfig);
        });
        Checks.check("send messages", () -> {
            Connection c = Checks.connect(host, port);
            try {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer p = s.createProducer(s.createQueue(QUEUE));
                for (int i = 0; i < 3; i++) {
                    p.send(s.createTextMessage("jmx " + i));
                }
            } finally {
                c.close();
            }
            System.out.println("info msgs-before-purge " + m.getAttribute(destMonitor, "NumMsgs"));
        });
        Checks.check("set attribute", () -> {
            m.setAttribute(destConfig, new Attribute("MaxNumMsgs", 500L));
            Object v = m.getAttribute(destConfig, "MaxNumMsgs");
            System.out.println("info set-maxnummsgs " + v.getClass().getSimpleName() + " " + v);
        });
        Checks.check("set attributes", () -> {
            javax.management.AttributeList l = new javax.management.AttributeList();
            l.add(new Attribute("MaxNumProducers", 50));
            l.add(new Attribute("UseDMQ", false));
            javax.management.AttributeList done = m.setAttributes(destConfig, l);
            System.out.println("info set-attributes " + done.size() + " "
                    + m.getAttribute(destConfig, "MaxNumProducers") + " "
                    + m.getAttribute(destConfig, "UseDMQ"));
        });
        Checks.check("pause destination", () -> {
            m.invoke(destConfig, "pause", new Object[] {"PRODUCERS"}, new String[] {"java.lang.String"});
            System.out.println("info paused-state " + m.getAttribute(destMonitor, "StateLabel"));
            Notification n = next(dmNotes, "mq.destination.pause");
            System.out.println("info pause-notification " + describe(n));
        });
        Checks.check("resume destination", () -> {
            m.invoke(destConfig, "resume", null, null);
            System.out.println("info resumed-state " + m.getAttribute(destMonitor, "StateLabel"));
        });
        Checks.check("purge destination", () -> {
            m.invoke(destConfig, "purge", null, null);
            System.out.println("info msgs-after-purge " + m.getAttribute(destMonitor, "NumMsgs"));
            Notification n = next(dmNotes, "mq.destination.purge");
            System.out.println("info purge-notification " + describe(n));
        });
        Checks.check("destroy destination", () -> {
            m.invoke(dmConfig, "destroy", new Object[] {"q", QUEUE},
                    new String[] {"java.lang.String", "java.lang.String"});
            Checks.expect(!m.isRegistered(destConfig), QUEUE + " still registered");
            Notification n = next(dmNotes, "mq.destination.destroy");
            System.out.println("info destroy-notification " + describe(n));
        });
        Checks.check("log notification", () -> {
            Notification n = logNotes.poll(20, TimeUnit.SECONDS);
            Checks.expect(n != null, "no log notification in 20 s");
            System.out.println("info log-notification " + n.getClass().getName() + " "
                    + n.getType().startsWith("mq.log.level.") + " " + n.getSource());
        });
        Checks.check("remove listeners", () -> {
            m.removeNotificationListener(dmMonitor, toDm);
            m.removeNotificationListener(logMonitor, toLog);
        });
        Checks.check("broker operations", () -> {
            m.invoke(brokerConfig, "resetMetrics", null, null);
            Object v = m.invoke(brokerConfig, "getProperty", new Object[] {"imq.portmapper.port"},
                    new String[] {"java.lang.String"});
            System.out.println("info getproperty " + v.getClass().getSimpleName() + " " + v.equals(port));
        });
        Checks.check("service pause and resume", () -> {
            ObjectName svc = new ObjectName(D + "type=Service,subtype=Config,name=jms");
            ObjectName svcMon = new ObjectName(D + "type=Service,subtype=Monitor,name=jms");
            m.invoke(svc, "pause", null, null);
            System.out.println("info service-paused " + m.getAttribute(svcMon, "State"));
            m.invoke(svc, "resume", null, null);
            System.out.println("info service-resumed " + m.getAttribute(svcMon, "State"));
        });
        Checks.check("errors", () -> {
            System.out.println("info err.unknown-operation " + error(() ->
                    m.invoke(brokerConfig, "noSuchOperation", null, null)));
            System.out.println("info err.read-only " + error(() ->
                    m.setAttribute(brokerConfig, new Attribute("Version", "1.0"))));
            System.out.println("info err.unknown-attribute " + error(() ->
                    m.setAttribute(brokerConfig, new Attribute("NoSuch", "1.0"))));
            System.out.println("info err.destroy-missing " + error(() ->
                    m.invoke(dmConfig, "destroy", new Object[] {"q", "jmxops.none"},
                            new String[] {"java.lang.String", "java.lang.String"})));
            System.out.println("info err.unknown-mbean " + error(() ->
                    m.invoke(new ObjectName(D + "type=Nope"), "x", null, null)));
            System.out.println("info err.bad-type " + error(() ->
                    m.invoke(dmConfig, "create", new Object[] {"x", "jmxops.bad"},
                            new String[] {"java.lang.String", "java.lang.String"})));
        });
        Checks.check("close", jmx::close);
        Checks.done();
    }

    interface Call {
        void run() throws Exception;
    }

    /** The exception a call throws, and what it wraps ("none" if it returns). */
    private static String error(Call c) {
        try {
            c.run();
            return "none";
        } catch (Exception e) {
            Throwable cause = e.getCause();
            return e.getClass().getName() + (cause == null ? "" : "<" + cause.getClass().getName());
        }
    }

    private static Notification next(LinkedBlockingQueue<Notification> q, String type)
            throws InterruptedException {
        long end = System.currentTimeMillis() + 20_000;
        List<String> seen = new ArrayList<>();
        while (System.currentTimeMillis() < end) {
            Notification n = q.poll(end - System.currentTimeMillis(), TimeUnit.MILLISECONDS);
            if (n == null) {
                break;
            }
            if (n.getType().equals(type)) {
                return n;
            }
            seen.add(n.getType());
        }
        throw new AssertionError("no " + type + " notification in 20 s; saw " + seen);
    }

    private static String describe(Notification n) {
        if (n instanceof com.sun.messaging.jms.management.server.DestinationNotification) {
            com.sun.messaging.jms.management.server.DestinationNotification d =
                    (com.sun.messaging.jms.management.server.DestinationNotification) n;
            return n.getType() + " " + d.getDestinationName() + " " + d.getDestinationType()
                    + (d.getPauseType() != null ? " " + d.getPauseType() : "");
        }
        return n.getType();
    }
}
