import jakarta.jms.*;
import java.util.HashMap;
import java.util.Map;

/**
 * IBM MQ report messages asked for by a JMS program with JMS_IBM_* Integer properties and read
 * by it from its JMSReplyTo (our broker's extension; the stock broker sends no reports).
 *
 * <pre>  Reports HOST PORT SUFFIX</pre>
 */
public class Reports {
    static final int COA = 256, COA_FULL = 1792, COD = 2048, EXPIRATION = 2097152;
    static final int PASS_MSG_ID = 128, PASS_CORREL_ID = 64;
    static final int FB_COA = 259, FB_COD = 260, FB_EXPIRATION = 258, MSGTYPE_REPORT = 4;

    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], sfx = a[2];
        try (Connection c = Checks.connect(host, port)) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue("jr_q_" + sfx);
            Queue expiring = s.createQueue("jr_exp_" + sfx);
            Queue replies = s.createQueue("jr_replies_" + sfx);
            MessageProducer p = s.createProducer(null);
            Message[] sent = new Message[3];

            Checks.check("send_with_report_options", () -> {
                TextMessage m = s.createTextMessage("report me");
                m.setIntProperty("JMS_IBM_MsgType", 1);
                m.setIntProperty("JMS_IBM_Report_COA", COA);
                m.setIntProperty("JMS_IBM_Report_COD", COD);
                m.setJMSCorrelationID("req-1");
                m.setJMSReplyTo(replies);
                p.send(q, m);
                sent[0] = m;

                TextMessage full = s.createTextMessage("report me in full");
                full.setIntProperty("JMS_IBM_Report_COA", COA_FULL);
                full.setIntProperty("JMS_IBM_Report_Pass_Msg_ID", PASS_MSG_ID);
                full.setIntProperty("JMS_IBM_Report_Pass_Correl_ID", PASS_CORREL_ID);
                full.setJMSCorrelationID("req-2");
                full.setJMSReplyTo(replies);
                p.send(q, full);
                sent[1] = full;

                Message e = s.createTextMessage("expire me");
                e.setIntProperty("JMS_IBM_Report_Expiration", EXPIRATION);
                e.setJMSReplyTo(replies);
                p.send(expiring, e, DeliveryMode.PERSISTENT, 4, 1000);
                sent[2] = e;
            });

            // IBM MQ fails such a put (MQRC_MISSING_REPLY_TO_Q); so does our broker, on the
            // SEND_REPLY of a persistent or transacted send: the client throws.
            Queue noReply = s.createQueue("jr_noreply_" + sfx);
            Checks.check("no_reply_to_send_fails", () -> {
                TextMessage m = s.createTextMessage("reports to nowhere");
                m.setIntProperty("JMS_IBM_Report_COA", COA);
                try {
                    p.send(noReply, m);
                    throw new AssertionError("sent without a JMSReplyTo");
                } catch (JMSException e) {
                    Checks.info("no_reply_to_exception", e.getClass().getName() + " " + e.getErrorCode());
                    Checks.expect(String.valueOf(e.getMessage()).contains("MQRC_MISSING_REPLY_TO_Q"),
                            "reason not given: " + e.getMessage());
                }
            });
            Checks.check("no_reply_to_transacted_send_fails", () -> {
                Session t = c.createSession(true, Session.SESSION_TRANSACTED);
                TextMessage m = t.createTextMessage("a request without a reply-to");
                m.setIntProperty("JMS_IBM_MsgType", 1);
                try {
                    t.createProducer(noReply).send(m);
                    throw new AssertionError("sent without a JMSReplyTo");
                } catch (JMSException e) {
                    Checks.expect(String.valueOf(e.getMessage()).contains("MQRC_MISSING_REPLY_TO_Q"),
                            "reason not given: " + e.getMessage());
                }
                t.commit();
                t.close();
            });

            c.start();
            Checks.check("no_reply_to_not_delivered", () -> {
                Checks.expect(s.createConsumer(noReply).receive(500) == null, "a refused message came");
            });
            Checks.check("consume", () -> {
                MessageConsumer k = s.createConsumer(q);
                for (int i = 0; i < 2; i++) {
                    Message m = k.receive(10000);
                    Checks.expect(m != null, "request " + i + " not delivered");
                    // The options travel with the message, as the application set them.
                    Checks.expectEquals(sent[i].getJMSMessageID(), m.getJMSMessageID(), "order");
                }
                k.close();
                // Past its expiration: a consumer arriving now finds nothing, the broker expires it.
                Thread.sleep(1500);
                Checks.expect(s.createConsumer(expiring).receive(1000) == null, "an expired message");
            });

            Map<Integer, Message> byFeedback = new HashMap<>();
            Checks.check("reports_arrive", () -> {
                MessageConsumer k = s.createConsumer(replies);
                for (int i = 0; i < 4; i++) {
                    Message r = k.receive(15000);
                    Checks.expect(r != null, "only " + i + " reports: " + byFeedback.keySet());
                    Checks.expectEquals(MSGTYPE_REPORT, r.getIntProperty("JMS_IBM_MsgType"), "JMS_IBM_MsgType");
                    int fb = r.getIntProperty("JMS_IBM_Feedback");
                    // COA comes twice (one per request): key the full-data one apart.
                    byFeedback.put(r instanceof TextMessage ? -fb : fb, r);
                }
                Checks.expect(k.receive(500) == null, "a fifth report");
            });

            Checks.check("coa_no_data", () -> {
                Message r = byFeedback.get(FB_COA);
                Checks.expect(r != null, "no COA report");
                Checks.expect(!(r instanceof TextMessage || r instanceof BytesMessage), "has a body: " + r);
                // Default options: the correlation ID is the original's message ID, a new ID.
                Checks.expectEquals(sent[0].getJMSMessageID(), r.getJMSCorrelationID(), "correlation ID");
                Checks.expect(!sent[0].getJMSMessageID().equals(r.getJMSMessageID()), "kept the message ID");
                Checks.expect(r.getObjectProperty("JMS_IBM_Report_COA") == null, "a report asks for a report");
            });
            Checks.check("cod_no_data", () -> {
                Message r = byFeedback.get(FB_COD);
                Checks.expect(r != null, "no COD report");
                Checks.expectEquals(sent[0].getJMSMessageID(), r.getJMSCorrelationID(), "correlation ID");
            });
            Checks.check("coa_full_data_pass_ids", () -> {
                Message r = byFeedback.get(-FB_COA);
                Checks.expect(r instanceof TextMessage, "not a TextMessage: " + r);
                Checks.expectEquals("report me in full", ((TextMessage) r).getText(), "body");
                Checks.expectEquals("req-2", r.getJMSCorrelationID(), "Pass_Correl_ID");
                Checks.expectEquals(sent[1].getJMSMessageID(), r.getJMSMessageID(), "Pass_Msg_ID");
            });
            Checks.check("expiration_report", () -> {
                Message r = byFeedback.get(FB_EXPIRATION);
                Checks.expect(r != null, "no expiration report");
                Checks.expectEquals(sent[2].getJMSMessageID(), r.getJMSCorrelationID(), "correlation ID");
            });
        }
        Checks.done();
    }
}
