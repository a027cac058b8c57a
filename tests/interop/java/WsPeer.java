import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;

/**
 * The stock Java client's side of the browser exchange (tests/interop/test_browser_stomp.py):
 * reads what stompjs in Chromium sent over the WebSocket service to PREFIX.b2j, then sends
 * what the page reads back from PREFIX.j2b.
 * Arguments: host port prefix.
 */
public final class WsPeer {
    private WsPeer() {}

    public static void main(String[] args) throws Exception {
        String host = args[0];
        String port = args[1];
        String prefix = args[2];
        Connection c = Checks.connect(host, port);
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        c.start();

        Checks.check("browser_to_java", () -> {
            MessageConsumer mc = s.createConsumer(s.createQueue(prefix + ".b2j"));
            Message m = mc.receive(20000);
            Checks.expect(m instanceof TextMessage, "a TextMessage, got " + m);
            Checks.expectEquals("hello from " + prefix, ((TextMessage) m).getText(), "text");
            Checks.expectEquals("red", m.getStringProperty("colour"), "colour property");
            Checks.expectEquals(7, m.getJMSPriority(), "priority");
            mc.close();
        });

        Checks.check("java_to_browser", () -> {
            MessageProducer p = s.createProducer(s.createQueue(prefix + ".j2b"));
            TextMessage m = s.createTextMessage("hello from java over " + prefix);
            m.setIntProperty("num", 5);
            m.setJMSCorrelationID("jc");
            p.send(m);
            p.close();
        });
        c.close();
        Checks.done();
    }
}
