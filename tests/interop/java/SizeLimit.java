import jakarta.jms.*;
import java.util.Arrays;

/**
 * A broker with imq.message.max_size=1m: what a send over the limit throws, and that the
 * connection goes on serving.
 *
 * <pre>  SizeLimit HOST PORT SUFFIX</pre>
 *
 * Prints "info refused SIZE CLASS ERRORCODE MESSAGE" for each persistent send over the limit.
 */
public class SizeLimit {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], sfx = a[2];
        byte[] big = new byte[2 * 1024 * 1024];
        byte[] fits = new byte[900 * 1024];
        Arrays.fill(fits, (byte) 7);
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue("jsize_" + sfx);
            MessageProducer p = s.createProducer(q);
            MessageConsumer k = s.createConsumer(q);
            c.start();
            // 2 MB, and just over 1 MB (a packet the broker may read whole before refusing it).
            for (int size : new int[] {big.length, 1024 * 1024 + 10 * 1024}) {
                Checks.check("persistent_over_limit_refused " + size, () -> {
                    BytesMessage m = s.createBytesMessage();
                    m.writeBytes(big, 0, size);
                    try {
                        p.send(m, DeliveryMode.PERSISTENT, 4, 0);
                        Checks.expect(false, "a send of " + size + " bytes was accepted");
                    } catch (JMSException e) {
                        Checks.info("refused", size + " " + e.getClass().getName() + " " + e.getErrorCode()
                                + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
                    }
                });
            }
            Checks.check("non_persistent_over_limit_not_delivered", () -> {
                BytesMessage m = s.createBytesMessage();
                m.writeBytes(big);
                try {
                    p.send(m, DeliveryMode.NON_PERSISTENT, 4, 0);
                    Checks.info("non_persistent", "no exception");
                } catch (JMSException e) {
                    Checks.info("non_persistent", e.getClass().getName() + " " + e.getErrorCode());
                }
            });
            // imq.producer.maxBatch=4: a new producer's fourth send is the last of its
            // credit (C flag) and it waits for RESUME_FLOW before a fifth. Here the fourth
            // is over the limit: does the fifth go? (Its own connection: on OpenMQ's broker
            // it waits for ever.) Prints "info fifth_send sent|waiting".
            Checks.check("over_limit_at_end_of_credit", () -> {
                Connection c2 = Checks.connect(host, port);
                Session s2 = c2.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue q2 = s2.createQueue("jcredit_" + sfx);
                MessageProducer p2 = s2.createProducer(q2);
                byte[] small = new byte[100];
                for (int i = 0; i < 3; i++) {
                    BytesMessage m = s2.createBytesMessage();
                    m.writeBytes(small);
                    p2.send(m, DeliveryMode.NON_PERSISTENT, 4, 0);
                }
                BytesMessage over = s2.createBytesMessage();
                over.writeBytes(big);
                p2.send(over, DeliveryMode.NON_PERSISTENT, 4, 0);
                Thread fifth = new Thread(() -> {
                    try {
                        BytesMessage m = s2.createBytesMessage();
                        m.writeBytes(small);
                        p2.send(m, DeliveryMode.NON_PERSISTENT, 4, 0);
                    } catch (JMSException e) {
                        throw new RuntimeException(e);
                    }
                });
                fifth.setDaemon(true);
                fifth.start();
                fifth.join(15000);
                if (fifth.isAlive()) {
                    Checks.info("fifth_send", "waiting");
                    return;  // c2 is left to the JVM's exit: closing it would wait too
                }
                Checks.info("fifth_send", "sent");
                MessageConsumer k2 = s2.createConsumer(q2);
                c2.start();
                for (int i = 0; i < 4; i++) {
                    Message got = k2.receive(15000);
                    Checks.expect(got instanceof BytesMessage, "small message " + i + ": " + got);
                    Checks.expect(got.getBody(byte[].class).length == 100, "not a small message");
                }
                Checks.expect(k2.receive(300) == null, "the message over the limit arrived");
                c2.close();
            });
            Checks.check("connection_serves_after", () -> {
                BytesMessage m = s.createBytesMessage();
                m.writeBytes(fits);
                p.send(m);
                Message got = k.receive(15000);
                Checks.expect(got instanceof BytesMessage, "the message under the limit: " + got);
                Checks.expect(Arrays.equals(fits, got.getBody(byte[].class)), "body differs");
                Checks.expect(k.receive(300) == null, "a message over the limit arrived");
            });
        }
        Checks.done();
    }
}
