import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import java.util.Set;
import java.util.TreeSet;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * JMX through the stock client's AdminConnectionFactory (imq.jar), which reads the broker's
 * port mapper for the jmxrmi service URL and connects with the JDK's RMI connector.
 * Prints "info" lines with what it read so the test can compare brokers.
 * Arguments: host port.
 */
public final class JmxBasics {
    private static final String[] BROKER_ATTRS = {
        "BrokerID", "Version", "InstanceName", "Port", "Host"
    };

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        Checks.check("wrong password refused", () -> {
            try {
                JMXConnector c = factory(host, port, "admin", "wrong").createConnection();
                c.close();
                throw new AssertionError("connected with a wrong password");
            } catch (javax.management.JMException e) {
                Throwable c = e.getCause();
                Checks.expect(c instanceof SecurityException, "cause " + c);
                System.out.println("info refused " + c.getClass().getName());
            }
        });
        Checks.check("non-admin user refused", () -> {
            try {
                JMXConnector c = factory(host, port, "guest", "guest").createConnection();
                c.close();
                throw new AssertionError("connected as guest");
            } catch (javax.management.JMException e) {
                Throwable c = e.getCause();
                Checks.expect(c instanceof SecurityException, "cause " + c);
                System.out.println("info guest-refused " + c.getClass().getName());
            }
        });
        JMXConnector[] conn = new JMXConnector[1];
        Checks.check("connect as admin", () -> {
            conn[0] = factory(host, port, "admin", "admin").createConnection();
            System.out.println("info url " + factory(host, port, "admin", "admin").getJMXServiceURL());
        });
        if (conn[0] == null) {
            Checks.done();
        }
        MBeanServerConnection mbsc = conn[0].getMBeanServerConnection();
        ObjectName config = new ObjectName("com.sun.messaging.jms.server:type=Broker,subtype=Config");
        ObjectName monitor = new ObjectName("com.sun.messaging.jms.server:type=Broker,subtype=Monitor");
        Checks.check("default domain", () -> {
            System.out.println("info domain " + mbsc.getDefaultDomain());
        });
        Checks.check("mbean count", () -> {
            Integer n = mbsc.getMBeanCount();
            Checks.expect(n > 0, "count " + n);
        });
        Checks.check("query names", () -> {
            Set<ObjectName> all = mbsc.queryNames(
                    new ObjectName("com.sun.messaging.jms.server:type=Broker,*"), null);
            Set<String> names = new TreeSet<>();
            for (ObjectName n : all) {
                names.add(n.getCanonicalName());
            }
            System.out.println("info broker-names " + names);
            Checks.expect(all.contains(config) && all.contains(monitor), "names " + names);
        });
        Checks.check("is registered", () -> {
            Checks.expect(mbsc.isRegistered(config), "config not registered");
            Checks.expect(!mbsc.isRegistered(new ObjectName("com.sun.messaging.jms.server:type=Nope")),
                    "type=Nope registered");
        });
        Checks.check("get attribute", () -> {
            for (String a : BROKER_ATTRS) {
                Object v = mbsc.getAttribute(config, a);
                System.out.println("info config." + a + " " + type(v) + " " + v);
            }
        });
        Checks.check("get attributes", () -> {
            AttributeList l = mbsc.getAttributes(config, new String[] {"Port", "Version", "NoSuch"});
            StringBuilder sb = new StringBuilder();
            for (Object o : l) {
                Attribute a = (Attribute) o;
                sb.append(a.getName()).append('=').append(type(a.getValue())).append(' ');
            }
            System.out.println("info getattributes " + sb.toString().trim());
        });
        Checks.check("monitor attribute", () -> {
            for (String a : new String[] {"BrokerID", "Version", "InstanceName", "Port", "Embedded"}) {
                Object v = mbsc.getAttribute(monitor, a);
                System.out.println("info monitor." + a + " " + type(v) + " " + v);
            }
        });
        Checks.check("unknown attribute", () -> {
            try {
                mbsc.getAttribute(config, "NoSuch");
                throw new AssertionError("NoSuch answered");
            } catch (javax.management.AttributeNotFoundException e) {
                System.out.println("info nosuch " + e.getClass().getName());
            }
        });
        Checks.check("unknown mbean", () -> {
            try {
                mbsc.getAttribute(new ObjectName("com.sun.messaging.jms.server:type=Nope"), "Port");
                throw new AssertionError("type=Nope answered");
            } catch (javax.management.InstanceNotFoundException e) {
                System.out.println("info nombean " + e.getClass().getName());
            }
        });
        Checks.check("close", () -> conn[0].close());
        Checks.done();
    }

    private static String type(Object v) {
        return v == null ? "null" : v.getClass().getSimpleName();
    }

    private static AdminConnectionFactory factory(String host, String port, String user, String pw)
            throws Exception {
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, "mq://" + host + ":" + port);
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminUsername, user);
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminPassword, pw);
        return acf;
    }
}
