import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TransactionRolledBackException;
import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * The stock client's producer through broker kills (bench/failover_soak.py): PERSISTENT
 * messages numbered by the int property "n", one of every ten batches in a transaction of
 * five, with reconnect on.  It prints "sent N" when a send returned, "commit A B" when a
 * transaction of A..B committed, "lost N: why" / "rolledback A B: why" when they failed
 * (not counted as sent), and stops when a line arrives on its standard input.
 * Arguments: ADDRESSLIST QUEUE PAUSE_MS.
 */
public final class SoakProducer {
    public static void main(String[] args) throws Exception {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(ConnectionConfiguration.imqAddressList, args[0]);
        cf.setProperty(ConnectionConfiguration.imqReconnectEnabled, "true");
        cf.setProperty(ConnectionConfiguration.imqReconnectAttempts, "-1");
        cf.setProperty(ConnectionConfiguration.imqReconnectInterval, "500");
        cf.setProperty(ConnectionConfiguration.imqAddressListIterations, "-1");
        long pause = Long.parseLong(args[2]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Connection conn = cf.createConnection("guest", "guest");
        Session plain = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Session txn = conn.createSession(true, Session.SESSION_TRANSACTED);
        Queue q = plain.createQueue(args[1]);
        MessageProducer p = plain.createProducer(q);
        MessageProducer tp = txn.createProducer(txn.createQueue(args[1]));
        p.setDeliveryMode(DeliveryMode.PERSISTENT);
        tp.setDeliveryMode(DeliveryMode.PERSISTENT);
        int n = 0;
        for (int batch = 0; !in.ready(); batch++) {
            if (batch % 10 == 9) {
                int first = n;
                try {
                    for (int k = 0; k < 5; k++) {
                        Message m = txn.createTextMessage("t" + n);
                        m.setIntProperty("n", n++);
                        tp.send(m);
                    }
                    txn.commit();
                    System.out.println("commit " + first + " " + (n - 1));
                } catch (JMSException e) {
                    System.out.println("rolledback " + first + " " + (n - 1) + ": " + why(e));
                    try {
                        txn.rollback();
                    } catch (JMSException e2) {
                        // the transaction is gone with its broker: nothing to roll back
                    }
                }
            } else {
                for (int k = 0; k < 5; k++) {
                    int mine = n++;
                    try {
                        Message m = plain.createTextMessage("p" + mine);
                        m.setIntProperty("n", mine);
                        p.send(m);
                        System.out.println("sent " + mine);
                    } catch (JMSException e) {
                        System.out.println("lost " + mine + ": " + why(e));
                    }
                }
            }
            System.out.flush();
            if (pause > 0) {
                Thread.sleep(pause);
            }
        }
        conn.close();
        System.out.println("done " + n);
    }

    private static String why(JMSException e) {
        return (e.getErrorCode() + " " + e.getMessage()).replace('\n', ' ');
    }
}
