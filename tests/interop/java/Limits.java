import jakarta.jms.*;

/**
 * Size and count limits as the stock client meets them.
 *
 * <pre>  Limits HOST PORT unlimited SUFFIX
 *  Limits HOST PORT boundary SUFFIX</pre>
 *
 * "unlimited": a broker whose imq.message.max_size, imq.system.max_count, imq.system.max_size
 * and auto-created destinations' maxNumMsgs / maxTotalMsgBytes / maxBytesPerMsg are all 0
 * (no limit, as OpenMQ reads 0) takes a 2 MB message and more.
 *
 * "boundary": queue jlim_d_SUFFIX made with maxBytesPerMsg=10k, and the broker's
 * imq.message.max_size set to 20k; for each, the largest body a persistent send gets through
 * ("info largest_body_dest N", "info largest_body_broker N") and what the next byte throws
 * ("info refused_dest CLASS CODE MESSAGE"): where each broker draws the line (the whole packet
 * or the body) shows in N.
 */
public class Limits {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], mode = a[2], sfx = a[3];
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            c.start();
            if (mode.equals("unlimited")) {
                unlimited(s, sfx);
            } else {
                boundary(s, "dest", s.createQueue("jlim_d_" + sfx));
                boundary(s, "broker", s.createQueue("jlim_b_" + sfx));
            }
        }
        Checks.done();
    }

    static void unlimited(Session s, String sfx) throws JMSException {
        Queue q = s.createQueue("jlim_u_" + sfx);
        MessageProducer p = s.createProducer(q);
        MessageConsumer k = s.createConsumer(q);
        Checks.check("zero_means_unlimited", () -> {
            BytesMessage big = s.createBytesMessage();
            big.writeBytes(new byte[2 * 1024 * 1024]);
            p.send(big, DeliveryMode.PERSISTENT, 4, 0);
            for (int i = 0; i < 5; i++) {
                p.send(s.createTextMessage("m" + i), DeliveryMode.PERSISTENT, 4, 0);
            }
            Message got = k.receive(15000);
            Checks.expect(got instanceof BytesMessage, "the 2 MB message: " + got);
            Checks.expectEquals(2L * 1024 * 1024, ((BytesMessage) got).getBodyLength(), "its length");
            for (int i = 0; i < 5; i++) {
                Message m = k.receive(15000);
                Checks.expect(m instanceof TextMessage, "message " + i + ": " + m);
                Checks.expectEquals("m" + i, ((TextMessage) m).getText(), "message " + i);
            }
        });
    }

    /** Persistent send of a body of n bytes: null when taken, else what was thrown. */
    static JMSException send(Session s, MessageProducer p, int n) throws JMSException {
        BytesMessage m = s.createBytesMessage();
        m.writeBytes(new byte[n]);
        try {
            p.send(m, DeliveryMode.PERSISTENT, 4, 0);
            return null;
        } catch (JMSException e) {
            return e;
        }
    }

    static void boundary(Session s, String which, Queue q) throws JMSException {
        MessageProducer p = s.createProducer(q);
        Checks.check("boundary_" + which, () -> {
            int lo = 0, hi = 64 * 1024;  // lo is taken, hi is refused
            Checks.expect(send(s, p, lo) == null, "an empty message was refused");
            Checks.expect(send(s, p, hi) != null, "a 64 KB message was taken");
            while (hi - lo > 1) {
                int mid = (lo + hi) >>> 1;
                if (send(s, p, mid) == null) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            Checks.info("largest_body_" + which, lo);
            JMSException e = send(s, p, hi);
            Checks.info("refused_" + which, e.getClass().getName() + " " + e.getErrorCode() + " "
                    + String.valueOf(e.getMessage()).replace('\n', ' '));
        });
        // Drain what got through, so the broker-wide totals stay small.
        try (MessageConsumer k = s.createConsumer(q)) {
            while (k.receive(500) != null) {
                // nothing
            }
        }
    }
}
