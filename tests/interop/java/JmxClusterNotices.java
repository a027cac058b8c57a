import com.sun.messaging.AdminConnectionConfiguration;
import com.sun.messaging.AdminConnectionFactory;
import com.sun.messaging.jms.management.server.ClusterNotification;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.management.MBeanServerConnection;
import javax.management.Notification;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;

/**
 * The Cluster Monitor's notifications of another broker joining and leaving, through the
 * stock client only (AdminConnectionFactory and javax.management). Prints "ready" once it
 * listens (the test then starts the other broker), waits for the join, prints "pause" and
 * waits for a line on its input (the test stops the other broker), then waits for the
 * down. Prints "info TYPE address=... master=... ha=...". Arguments: host port.
 */
public final class JmxClusterNotices {
    public static void main(String[] args) throws Exception {
        AdminConnectionFactory acf = new AdminConnectionFactory();
        acf.setProperty(AdminConnectionConfiguration.imqAddress, "mq://" + args[0] + ":" + args[1]);
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminUsername, "admin");
        acf.setProperty(AdminConnectionConfiguration.imqDefaultAdminPassword, "admin");
        JMXConnector conn = acf.createConnection();
        MBeanServerConnection mbsc = conn.getMBeanServerConnection();
        ObjectName cluster = new ObjectName("com.sun.messaging.jms.server:type=Cluster,subtype=Monitor");
        BlockingQueue<Notification> got = new LinkedBlockingQueue<>();
        mbsc.addNotificationListener(cluster, (n, hb) -> got.add(n), null, null);
        System.out.println("ready");
        System.out.flush();
        expect(got, ClusterNotification.CLUSTER_BROKER_JOIN);
        System.out.println("pause");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        expect(got, ClusterNotification.CLUSTER_BROKER_DOWN);
        conn.close();
        Checks.done();
    }

    private static void expect(BlockingQueue<Notification> got, String type) {
        Checks.check(type, () -> {
            Notification n = got.poll(60, TimeUnit.SECONDS);
            Checks.expect(n != null, "no notification within 60 s");
            Checks.expect(n instanceof ClusterNotification, "class " + n.getClass().getName());
            ClusterNotification c = (ClusterNotification) n;
            Checks.info(c.getType(), "address=" + c.getBrokerAddress() + " master="
                    + c.isMasterBroker() + " ha=" + c.isHighlyAvailable());
        });
    }
}
