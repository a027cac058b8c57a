import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

/**
 * The stock Java client's side of the STOMP exchange (tests/interop/test_java_stomp.py):
 * reads what stomp.py sent through the broker's STOMP listener (text, bytes, headers,
 * properties, reply-to, a transaction), answers the request on its JMSReplyTo, then sends
 * what stomp.py reads back (text with properties and headers, bytes, two messages for a
 * selector, a topic message for a durable subscriber that is away).
 * Arguments: host port.
 */
public final class StompPeer {
    private StompPeer() {}

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        Connection c = Checks.connect(host, port);
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        c.start();

        Checks.check("stomp_text_to_java", () -> {
            MessageConsumer mc = s.createConsumer(s.createQueue("stomp.s2j.text"));
            Message m = mc.receive(20000);
            Checks.expect(m instanceof TextMessage, "a TextMessage, got " + m);
            Checks.expectEquals("text from stomp", ((TextMessage) m).getText(), "text");
            Checks.expectEquals("red", m.getStringProperty("colour"), "colour property");
            Checks.expectEquals(8, m.getJMSPriority(), "priority");
            Checks.expectEquals("c-1", m.getJMSCorrelationID(), "correlation id");
            Checks.expectEquals("kind", m.getJMSType(), "JMSType");
            Checks.expectEquals(DeliveryMode.NON_PERSISTENT, m.getJMSDeliveryMode(), "delivery mode");
            Checks.expect(m.getJMSReplyTo() instanceof Queue, "a Queue reply-to, got " + m.getJMSReplyTo());
            Checks.expectEquals("stomp.s2j.reply", ((Queue) m.getJMSReplyTo()).getQueueName(), "reply-to");
            MessageProducer p = s.createProducer(null);
            TextMessage r = s.createTextMessage("reply from java");
            r.setJMSCorrelationID(m.getJMSCorrelationID());
            p.send(m.getJMSReplyTo(), r);
            mc.close();
        });

        Checks.check("stomp_bytes_to_java", () -> {
            MessageConsumer mc = s.createConsumer(s.createQueue("stomp.s2j.bytes"));
            Message m = mc.receive(20000);
            Checks.expect(m instanceof BytesMessage, "a BytesMessage, got " + m);
            BytesMessage b = (BytesMessage) m;
            byte[] got = new byte[(int) b.getBodyLength()];
            b.readBytes(got);
            Checks.expectEquals("[0, 1, -1, 0]", java.util.Arrays.toString(got), "bytes");
            Checks.expectEquals(DeliveryMode.PERSISTENT, m.getJMSDeliveryMode(), "persistent by default");
            mc.close();
        });

        Checks.check("stomp_transaction_to_java", () -> {
            MessageConsumer mc = s.createConsumer(s.createQueue("stomp.s2j.txn"));
            Message m = mc.receive(20000);
            Checks.expect(m instanceof TextMessage, "a TextMessage, got " + m);
            Checks.expectEquals("committed", ((TextMessage) m).getText(), "the committed one");
            Checks.expect(mc.receive(1000) == null, "the rolled back message is not there");
            mc.close();
        });

        Checks.check("java_to_stomp", () -> {
            MessageProducer p = s.createProducer(null);
            TextMessage t = s.createTextMessage("text from java");
            t.setIntProperty("num", 5);
            t.setStringProperty("str", "v");
            t.setJMSCorrelationID("jc");
            t.setJMSType("jt");
            t.setJMSReplyTo(s.createQueue("stomp.j2s.replyto"));
            p.send(s.createQueue("stomp.j2s.text"), t, DeliveryMode.PERSISTENT, 6, 0);
            BytesMessage b = s.createBytesMessage();
            b.writeBytes(new byte[] {1, 0, 2});
            p.send(s.createQueue("stomp.j2s.bytes"), b);
            for (String colour : new String[] {"blue", "red"}) {
                TextMessage sel = s.createTextMessage(colour);
                sel.setStringProperty("colour", colour);
                p.send(s.createQueue("stomp.j2s.sel"), sel);
            }
            Topic topic = s.createTopic("stomp.j2s.durable");
            p.send(topic, s.createTextMessage("while away"));
        });

        c.close();
        Checks.done();
    }
}
