import jakarta.jms.*;

/**
 * Sends one persistent TextMessage to each queue named, as guest: one check per queue
 * ("send_NAME"), so a test sees which sends the broker refused and with what exception.
 *
 * <pre>  Sends HOST PORT QUEUE...</pre>
 */
public class Sends {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1];
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer p = s.createProducer(null);
            for (int i = 2; i < a.length; i++) {
                String name = a[i];
                Checks.check("send_" + name, () -> p.send(s.createQueue(name), s.createTextMessage(name)));
            }
        }
        Checks.done();
    }
}
