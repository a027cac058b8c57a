import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * One JMX connector of the broker through the stock client's AdminConnectionFactory: the
 * service URL it reads from the port mapper (mq://host:port/CONNECTOR), a login and one
 * attribute. Arguments: host port connector (jmxrmi or ssljmxrmi).
 */
public final class JmxTransport {
    public static void main(String[] args) throws Exception {
        String address = "mq://" + args[0] + ":" + args[1] + "/" + args[2];
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, address);
        Checks.check("connect " + args[2], () -> {
            System.out.println("info url " + acf.getJMXServiceURL());
            JMXConnector c = acf.createConnection("admin", "admin");
            try {
                MBeanServerConnection m = c.getMBeanServerConnection();
                ObjectName config = new ObjectName("com.sun.messaging.jms.server:type=Broker,subtype=Config");
                System.out.println("info version " + m.getAttribute(config, "Version"));
            } finally {
                c.close();
            }
        });
        Checks.done();
    }
}
