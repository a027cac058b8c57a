import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import com.sun.messaging.jms.management.server.BrokerNotification;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.management.Attribute;
import javax.management.MBeanServerConnection;
import javax.management.Notification;
import javax.management.NotificationFilterSupport;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * The Broker Monitor's resource-state notification through the stock client only
 * (AdminConnectionFactory and javax.management): the memory budget made tiny over JMX
 * (DestinationManager MaxTotalMsgBytes, imq.system.max_size) turns the broker RED, back
 * to unlimited GREEN; each change arrives as OpenMQ's BrokerNotification with the old
 * and new state. Prints "info state OLD>NEW". Arguments: host port.
 */
public final class JmxResourceState {
    public static void main(String[] args) throws Exception {
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, "mq://" + args[0] + ":" + args[1]);
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminUsername, "admin");
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminPassword, "admin");
        JMXConnector conn = acf.createConnection();
        MBeanServerConnection mbsc = conn.getMBeanServerConnection();
        ObjectName monitor = new ObjectName("com.sun.messaging.jms.server:type=Broker,subtype=Monitor");
        ObjectName dm = new ObjectName("com.sun.messaging.jms.server:type=DestinationManager,subtype=Config");
        BlockingQueue<Notification> got = new LinkedBlockingQueue<>();
        NotificationFilterSupport filter = new NotificationFilterSupport();
        filter.enableType(BrokerNotification.BROKER_RESOURCE_STATE_CHANGE);
        mbsc.addNotificationListener(monitor, (n, hb) -> got.add(n), filter, null);
        for (long size : new long[] {1L, -1L}) {
            Checks.check("max total bytes " + size, () -> {
                mbsc.setAttribute(dm, new Attribute("MaxTotalMsgBytes", size));
                Notification n = got.poll(30, TimeUnit.SECONDS);
                Checks.expect(n != null, "no notification within 30 s");
                Checks.expect(n instanceof BrokerNotification, "class " + n.getClass().getName());
                BrokerNotification b = (BrokerNotification) n;
                Checks.info("state", b.getOldResourceState() + ">" + b.getNewResourceState());
                Checks.info("monitor-state", mbsc.getAttribute(monitor, "ResourceState"));
            });
        }
        conn.close();
        Checks.done();
    }
}
