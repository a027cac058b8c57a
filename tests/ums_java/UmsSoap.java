import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Hashtable;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import javax.xml.soap.AttachmentPart;
import javax.xml.soap.MessageFactory;
import javax.xml.soap.MimeHeader;
import javax.xml.soap.MimeHeaders;
import javax.xml.soap.SOAPBody;
import javax.xml.soap.SOAPElement;
import javax.xml.soap.SOAPHeader;
import javax.xml.soap.SOAPMessage;
import org.w3c.dom.Node;

/**
 * A JMS program beside the UMS gateway, with the stock client (imq.jar) and a real SAAJ
 * (Debian's saaj-impl): it reads the BytesMessage a UMS XML send stored and makes one
 * for a UMS XML receive, both in com.sun.messaging.xml.MessageTransformer's layout
 * (writeInt + ObjectOutputStream of a Hashtable of the SOAP message's MIME headers,
 * writeInt + SOAPMessage.writeTo), which is what SOAPMessageIntoJMSMessage and
 * SOAPMessageFromJMSMessage write and read. MessageTransformer itself is in imqxm.jar,
 * which the stock client here does not include.
 *
 * Args: host port queue-the-gateway-sent-to queue-to-send-to. One line per check.
 */
public final class UmsSoap {
    interface Body {
        void run() throws Exception;
    }

    static final byte[] ATT1 = new byte[256];
    static final String ATT2 = "h\u00e9llo from UMS";
    static final String SHOP = "urn:shop";
    static int failures;

    static {
        for (int i = 0; i < 256; i++) {
            ATT1[i] = (byte) i;
        }
    }

    static void check(String name, Body b) {
        try {
            b.run();
            System.out.println("ok " + name);
        } catch (Throwable t) {
            failures++;
            System.out.println("fail " + name + ": " + String.valueOf(t).replace('\n', ' '));
        }
        System.out.flush();
    }

    static void expect(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    /** The layout's reading side: MIME headers, then the SOAP stream for SAAJ. */
    static SOAPMessage fromJms(BytesMessage m, MessageFactory mf) throws Exception {
        int n = m.readInt();
        byte[] head = new byte[n];
        expect(m.readBytes(head) == n, "short MIME header block");
        Hashtable<?, ?> table;
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(head))) {
            table = (Hashtable<?, ?>) in.readObject();
        }
        MimeHeaders mh = new MimeHeaders();
        for (Map.Entry<?, ?> e : table.entrySet()) {
            mh.addHeader((String) e.getKey(), (String) e.getValue());
        }
        int len = m.readInt();
        byte[] soap = new byte[len];
        expect(m.readBytes(soap) == len, "short SOAP stream");
        expect(m.readBytes(new byte[1]) == -1, "bytes after the SOAP stream");
        return mf.createMessage(mh, new ByteArrayInputStream(soap));
    }

    static byte[] serialized(Hashtable<String, String> table) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (ObjectOutputStream oo = new ObjectOutputStream(out)) {
            oo.writeObject(table);
        }
        return out.toByteArray();
    }

    /** The layout's writing side. */
    static BytesMessage toJms(SOAPMessage sm, Session s) throws Exception {
        sm.saveChanges();
        Hashtable<String, String> table = new Hashtable<>();
        Iterator<?> it = sm.getMimeHeaders().getAllHeaders();
        while (it.hasNext()) {
            MimeHeader h = (MimeHeader) it.next();
            table.put(h.getName(), h.getValue());
        }
        byte[] head = serialized(table);
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        sm.writeTo(body);
        BytesMessage m = s.createBytesMessage();
        m.writeInt(head.length);
        m.writeBytes(head);
        m.writeInt(body.size());
        m.writeBytes(body.toByteArray());
        return m;
    }

    static SOAPElement firstElement(Node parent) {
        for (Node c = parent.getFirstChild(); c != null; c = c.getNextSibling()) {
            if (c instanceof SOAPElement) {
                return (SOAPElement) c;
            }
        }
        return null;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], fromUms = a[2], toUms = a[3];
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(ConnectionConfiguration.imqAddressList, "mq://" + host + ":" + port + "/jms");
        Connection c = cf.createConnection("guest", "guest");
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        c.start();
        MessageFactory mf = MessageFactory.newInstance();
        Message[] got = new Message[1];
        SOAPMessage[] sm = new SOAPMessage[1];

        check("ums_send_is_a_bytes_message", () -> {
            MessageConsumer cons = s.createConsumer(s.createQueue(fromUms));
            got[0] = cons.receive(20000);
            cons.close();
            expect(got[0] instanceof BytesMessage, "got " + got[0]);
        });
        check("ums_send_properties", () -> {
            expect(got[0].getIntProperty("pInt") == 7, "pInt " + got[0].getObjectProperty("pInt"));
            expect("caf\u00e9".equals(got[0].getStringProperty("pString")), "pString");
        });
        check("ums_send_read_as_transformer_layout", () -> {
            BytesMessage bm = (BytesMessage) got[0];
            long total = bm.getBodyLength();
            sm[0] = fromJms(bm, mf);
            expect(total > 8, "body length " + total);
        });
        check("ums_send_body_intact", () -> {
            SOAPBody body = sm[0].getSOAPBody();
            SOAPElement order = firstElement(body);
            expect(order != null && "order".equals(order.getLocalName())
                    && SHOP.equals(order.getNamespaceURI()), "body child " + order);
            SOAPElement item = firstElement(order);
            expect(item != null && "tea".equals(item.getTextContent()), "item " + item);
        });
        check("ums_send_header_without_ums_elements", () -> {
            SOAPHeader h = sm[0].getSOAPHeader();
            if (h != null) {
                Iterator<?> it = h.getChildElements();
                while (it.hasNext()) {
                    Object e = it.next();
                    if (e instanceof SOAPElement) {
                        String ns = ((SOAPElement) e).getNamespaceURI();
                        expect(!"https://mq.java.net/ums".equals(ns), "UMS element left: " + e);
                    }
                }
            }
        });
        check("ums_send_attachments", () -> {
            expect(sm[0].countAttachments() == 2, "attachments " + sm[0].countAttachments());
            List<AttachmentPart> parts = new ArrayList<>();
            sm[0].getAttachments().forEachRemaining(p -> parts.add((AttachmentPart) p));
            AttachmentPart p1 = parts.get(0), p2 = parts.get(1);
            expect("<att1>".equals(p1.getContentId()), "cid1 " + p1.getContentId());
            expect("application/octet-stream".equals(p1.getContentType()), "type1 " + p1.getContentType());
            expect(Arrays.equals(ATT1, p1.getRawContentBytes()), "data1");
            expect("<att2>".equals(p2.getContentId()), "cid2 " + p2.getContentId());
            expect(p2.getContentType().startsWith("text/plain"), "type2 " + p2.getContentType());
            expect(Arrays.equals(ATT2.getBytes("UTF-8"), p2.getRawContentBytes()), "data2");
        });

        check("java_send_in_transformer_layout", () -> {
            SOAPMessage out = mf.createMessage();
            SOAPElement note = out.getSOAPBody().addChildElement("note", "n", "urn:note");
            note.addChildElement("to", "n").addTextNode("ums");
            note.addChildElement("text", "n").addTextNode("from java \u20ac");
            AttachmentPart p = out.createAttachmentPart();
            p.setRawContentBytes(ATT1, 0, ATT1.length, "image/png");
            p.setContentId("<java-img>");
            out.addAttachmentPart(p);
            AttachmentPart q = out.createAttachmentPart("plain words", "text/plain");
            q.setContentId("<java-txt>");
            out.addAttachmentPart(q);
            BytesMessage bm = toJms(out, s);
            bm.setStringProperty("origin", "java");
            MessageProducer prod = s.createProducer(s.createQueue(toUms));
            prod.send(bm);
            prod.close();
        });
        check("java_send_without_attachment", () -> {
            SOAPMessage out = mf.createMessage();
            out.getSOAPBody().addChildElement("ping", "n", "urn:note").addTextNode("2");
            MessageProducer prod = s.createProducer(s.createQueue(toUms));
            prod.send(toJms(out, s));
            prod.close();
        });
        check("hashtable_bytes", () -> {
            Hashtable<String, String> t = new Hashtable<>();
            t.put("Content-Type", "multipart/related; type=\"text/xml\"; boundary=\"b\"");
            System.out.println("info hashtable " + hex(serialized(t)));
        });
        c.close();
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }
}
