import jakarta.jms.*;

/** The least a JMS application does: connect, send a TextMessage to a queue, receive it. */
public class Smoke {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1];
        String q = "interop.smoke." + System.nanoTime();
        Checks.check("connect_send_receive", () -> {
            try (Connection c = Checks.connect(host, port)) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue queue = s.createQueue(q);
                s.createProducer(queue).send(s.createTextMessage("hello"));
                c.start();
                Message m = s.createConsumer(queue).receive(10000);
                Checks.expect(m instanceof TextMessage, "received " + m);
                Checks.expectEquals("hello", ((TextMessage) m).getText(), "text");
            }
        });
        Checks.done();
    }
}
