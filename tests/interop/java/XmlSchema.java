import jakarta.jms.*;

/**
 * XML schema validation as the stock client does it: the broker's CREATE_DESTINATION
 * reply says whether the destination wants it (validateXMLSchemaEnabled), and the client
 * then validates each TextMessage it sends there (with no schema URI list, against the
 * document's own DTD).
 *
 * <pre>  XmlSchema HOST PORT QUEUE_VALIDATED QUEUE_PLAIN</pre>
 *
 * Prints "info refused CLASS CODE" for the text that is not XML.
 */
public class XmlSchema {
    public static void main(String[] a) throws Exception {
        try (Connection c = Checks.connect(a[0], a[1])) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            c.start();
            Queue checked = s.createQueue(a[2]);
            Queue plain = s.createQueue(a[3]);
            MessageProducer p = s.createProducer(checked);
            Checks.check("not_xml_refused_by_the_client", () -> {
                try {
                    p.send(s.createTextMessage("not <xml"));
                    throw new AssertionError("the send went through");
                } catch (JMSException e) {
                    Checks.info("refused", e.getClass().getName() + " " + e.getErrorCode());
                }
            });
            String valid = "<?xml version=\"1.0\"?><!DOCTYPE order [<!ELEMENT order EMPTY>"
                    + "<!ATTLIST order id CDATA #REQUIRED>]><order id=\"1\"/>";
            Checks.check("valid_xml_goes_through", () -> {
                p.send(s.createTextMessage(valid));
                TextMessage m = (TextMessage) s.createConsumer(checked).receive(10000);
                Checks.expect(m != null, "the XML message did not arrive");
                Checks.expectEquals(valid, m.getText(), "text");
            });
            Checks.check("plain_queue_takes_any_text", () -> {
                s.createProducer(plain).send(s.createTextMessage("not <xml"));
                TextMessage m = (TextMessage) s.createConsumer(plain).receive(10000);
                Checks.expect(m != null, "the text did not arrive");
            });
        }
        Checks.done();
    }
}
