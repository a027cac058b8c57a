import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.*;
import java.util.Arrays;

/**
 * The stock client over TLS (the ssljms service) with its trust settings.
 *
 * Usage: TlsClient HOST PORTMAPPER SSLJMS_PORT MODE. MODE "trusting" runs in a JVM whose
 * javax.net.ssl.trustStore holds the broker's certificate; "stranger" in one whose trust
 * store does not (the JDK's own CAs), where imqSSLIsHostTrusted=false must be refused.
 */
public class TlsClient {
    static String host, port, sslPort;

    public static void main(String[] a) throws Exception {
        host = a[0];
        port = a[1];
        sslPort = a[2];
        String mode = a[3];
        if ("trusting".equals(mode)) {
            trusting();
        } else {
            stranger();
        }
        Checks.done();
    }

    static com.sun.messaging.ConnectionFactory cf(String address, String... props) throws JMSException {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        if (address != null) {
            cf.setProperty(ConnectionConfiguration.imqAddressList, address);
        }
        for (int i = 0; i + 1 < props.length; i += 2) {
            cf.setProperty(props[i], props[i + 1]);
        }
        return cf;
    }

    static String ssljms() {
        return "mq://" + host + ":" + port + "/ssljms";
    }

    /** Connects, then sends a text, a 1 MB bytes and a map message and reads them back. */
    static void roundTrip(com.sun.messaging.ConnectionFactory f, String tag) throws Exception {
        try (Connection c = f.createConnection("guest", "guest")) {
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue q = s.createQueue("interop.tls." + tag + "." + System.nanoTime());
            MessageProducer p = s.createProducer(q);
            MessageConsumer r = s.createConsumer(q);
            c.start();
            TextMessage t = s.createTextMessage("over tls \u00e9\u20ac");
            t.setStringProperty("tag", tag);
            p.send(t);
            byte[] big = new byte[1 << 20];
            for (int i = 0; i < big.length; i++) {
                big[i] = (byte) (i * 31 + 7);
            }
            BytesMessage b = s.createBytesMessage();
            b.writeBytes(big);
            p.send(b);
            MapMessage m = s.createMapMessage();
            m.setLong("n", 1234567890123L);
            m.setString("s", tag);
            p.send(m);
            Message got = r.receive(20000);
            Checks.expect(got instanceof TextMessage, "text: received " + got);
            Checks.expectEquals("over tls \u00e9\u20ac", ((TextMessage) got).getText(), "text");
            Checks.expectEquals(tag, got.getStringProperty("tag"), "property");
            got = r.receive(20000);
            Checks.expect(got instanceof BytesMessage, "bytes: received " + got);
            BytesMessage gb = (BytesMessage) got;
            Checks.expectEquals((long) big.length, gb.getBodyLength(), "bytes length");
            byte[] back = new byte[big.length];
            gb.readBytes(back);
            Checks.expect(Arrays.equals(big, back), "1 MB body changed on the way");
            got = r.receive(20000);
            Checks.expect(got instanceof MapMessage, "map: received " + got);
            Checks.expectEquals(1234567890123L, ((MapMessage) got).getLong("n"), "map long");
            Checks.expectEquals(tag, ((MapMessage) got).getString("s"), "map string");
        }
    }

    static void trusting() {
        Checks.check("host_trusted_send_receive", () ->
            roundTrip(cf(ssljms(), ConnectionConfiguration.imqSSLIsHostTrusted, "true"), "trusted"));
        Checks.check("truststore_send_receive", () ->
            roundTrip(cf(ssljms(), ConnectionConfiguration.imqSSLIsHostTrusted, "false"), "truststore"));
        // The pre-address-list way: connection type TLS to a host and port-mapper port.
        Checks.check("connection_type_tls", () ->
            roundTrip(cf(null,
                ConnectionConfiguration.imqConnectionType, "TLS",
                ConnectionConfiguration.imqBrokerHostName, host,
                ConnectionConfiguration.imqBrokerHostPort, port,
                ConnectionConfiguration.imqSSLIsHostTrusted, "false"), "conntype"));
        // mqssl:// goes straight to the service's port, without the port mapper.
        Checks.check("mqssl_direct_to_service_port", () ->
            roundTrip(cf("mqssl://" + host + ":" + sslPort + "/ssljms",
                ConnectionConfiguration.imqSSLIsHostTrusted, "false"), "direct"));
        // A message crosses services: sent over TLS, received over plain TCP, and back.
        Checks.check("tls_and_tcp_together", () -> {
            String name = "interop.tls.cross." + System.nanoTime();
            try (Connection tls = cf(ssljms()).createConnection("guest", "guest");
                 Connection tcp = Checks.connect(host, port)) {
                Session st = tls.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Session sp = tcp.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer onTcp = sp.createConsumer(sp.createQueue(name + ".a"));
                MessageConsumer onTls = st.createConsumer(st.createQueue(name + ".b"));
                tls.start();
                tcp.start();
                st.createProducer(st.createQueue(name + ".a")).send(st.createTextMessage("tls->tcp"));
                sp.createProducer(sp.createQueue(name + ".b")).send(sp.createTextMessage("tcp->tls"));
                Message m1 = onTcp.receive(20000);
                Message m2 = onTls.receive(20000);
                Checks.expect(m1 instanceof TextMessage && "tls->tcp".equals(((TextMessage) m1).getText()),
                    "over tcp got " + m1);
                Checks.expect(m2 instanceof TextMessage && "tcp->tls".equals(((TextMessage) m2).getText()),
                    "over tls got " + m2);
            }
        });
    }

    static void stranger() {
        // The broker's self-signed certificate is in no trust store of this JVM.
        Checks.check("untrusted_certificate_refused", () -> {
            try (Connection c = cf(ssljms(), ConnectionConfiguration.imqSSLIsHostTrusted, "false",
                    ConnectionConfiguration.imqReconnectEnabled, "false")
                    .createConnection("guest", "guest")) {
                throw new AssertionError("connected to a broker whose certificate nobody trusts");
            } catch (JMSException e) {
                // The stock client logs the SSLHandshakeException (PKIX ...) and throws what
                // the closed socket gave it next (C4001, C4004 or C4038, it varies); the test
                // reads the log.
                Checks.info("untrusted_error", e.getErrorCode());
            }
        });
        // A plain TCP client on the TLS port is refused, and the broker keeps serving.
        Checks.check("plain_tcp_to_tls_port_refused", () -> {
            try (Connection c = cf("mqtcp://" + host + ":" + sslPort + "/jms",
                    ConnectionConfiguration.imqReconnectEnabled, "false",
                    ConnectionConfiguration.imqPingInterval, "5")
                    .createConnection("guest", "guest")) {
                throw new AssertionError("a plain TCP connection to the TLS port was let in");
            } catch (JMSException e) {
                Checks.info("plain_tcp_error", e.getErrorCode());
            }
        });
        Checks.check("host_trusted_after_refusals", () ->
            roundTrip(cf(ssljms(), ConnectionConfiguration.imqSSLIsHostTrusted, "true"), "after"));
        // The address's own isHostTrusted overrides the factory's.
        Checks.check("address_is_host_trusted", () ->
            roundTrip(cf(ssljms() + "?isHostTrusted=true",
                ConnectionConfiguration.imqSSLIsHostTrusted, "false"), "addrtrusted"));
    }
}
