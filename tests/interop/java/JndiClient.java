import com.sun.messaging.AdministeredObject;
import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.*;
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Hashtable;
import java.util.Properties;
import javax.naming.Context;
import javax.naming.InitialContext;
import javax.naming.Reference;
import javax.naming.StringRefAddr;
import javax.naming.spi.NamingManager;

/**
 * Administered objects made by our `manage.py imqobjmgr`, looked up by the stock client and
 * used: connect with the factory, send to and receive from the looked-up destinations.
 *
 * Usage: JndiClient HOST PORTMAPPER STORE WHERE ADDRESSLIST QUEUE TOPIC
 *   STORE "ldap": WHERE is the provider URL, looked up anonymously with the JDK's
 *     com.sun.jndi.ldap.LdapCtxFactory (names cn=JCF, cn=JXCF, cn=JQ, cn=JT, cn=JROCF);
 *   STORE "bindings": WHERE is a .bindings file. fscontext's RefFSContextFactory is not in
 *     the JDK nor on this machine, so the file is read with java.util.Properties and each
 *     Reference is turned into an object by the JDK's NamingManager.getObjectInstance,
 *     which is what RefFSContext.lookup does (names JCF, JXCF, JQ, JT, JROCF).
 * ADDRESSLIST, QUEUE and TOPIC are the values the objects were made with.
 */
public class JndiClient {
    interface Lookup {
        Object lookup(String name) throws Exception;
    }

    public static void main(String[] a) throws Exception {
        String store = a[2], where = a[3], addressList = a[4], queueName = a[5], topicName = a[6];
        Lookup jndi;
        String prefix;
        if ("ldap".equals(store)) {
            Hashtable<String, String> env = new Hashtable<>();
            env.put(Context.INITIAL_CONTEXT_FACTORY, "com.sun.jndi.ldap.LdapCtxFactory");
            env.put(Context.PROVIDER_URL, where);
            InitialContext ctx = new InitialContext(env);
            jndi = ctx::lookup;
            prefix = "cn=";
        } else {
            Properties props = new Properties();
            try (InputStream in = new FileInputStream(where)) {
                props.load(in);
            }
            jndi = name -> NamingManager.getObjectInstance(reference(props, name), null, null, null);
            prefix = "";
        }
        String p = prefix;
        Object[] found = new Object[5];
        Checks.check(store + "_lookup_types", () -> {
            found[0] = jndi.lookup(p + "JCF");
            found[1] = jndi.lookup(p + "JXCF");
            found[2] = jndi.lookup(p + "JQ");
            found[3] = jndi.lookup(p + "JT");
            found[4] = jndi.lookup(p + "JROCF");
            Checks.expect(found[0] instanceof com.sun.messaging.ConnectionFactory, "cf is " + found[0]);
            Checks.expect(found[1] instanceof com.sun.messaging.XAConnectionFactory, "xcf is " + found[1]);
            Checks.expect(found[2] instanceof com.sun.messaging.Queue, "q is " + found[2]);
            Checks.expect(found[3] instanceof com.sun.messaging.Topic, "t is " + found[3]);
            Checks.expect(found[4] instanceof com.sun.messaging.ConnectionFactory, "ro cf is " + found[4]);
        });
        Checks.check(store + "_attributes", () -> {
            com.sun.messaging.ConnectionFactory cf = (com.sun.messaging.ConnectionFactory) found[0];
            Checks.expectEquals(addressList, cf.getProperty(ConnectionConfiguration.imqAddressList), "address list");
            Checks.expectEquals("true", cf.getProperty(ConnectionConfiguration.imqReconnectEnabled), "reconnect");
            Checks.expectEquals("7", cf.getProperty(ConnectionConfiguration.imqReconnectAttempts), "attempts");
            Checks.expectEquals("jndi-client", cf.getProperty(ConnectionConfiguration.imqConfiguredClientID), "client id");
            Checks.expectEquals(queueName, ((Queue) found[2]).getQueueName(), "queue name");
            Checks.expectEquals(topicName, ((Topic) found[3]).getTopicName(), "topic name");
            Checks.expect(!((AdministeredObject) found[0]).isReadOnly(), "JCF is read-only");
            AdministeredObject ro = (AdministeredObject) found[4];
            Checks.expect(ro.isReadOnly(), "JROCF is not read-only");
            try {
                ro.setProperty(ConnectionConfiguration.imqDefaultUsername, "other");
                throw new AssertionError("a read-only factory took a new value");
            } catch (com.sun.messaging.ReadOnlyPropertyException expected) {
                // what OpenMQ does for an object stored with -r true
            }
        });
        Checks.check(store + "_queue_send_receive", () -> {
            // imqDefaultUsername/Password (guest) from the stored object: no credentials here.
            try (Connection c = ((ConnectionFactory) found[0]).createConnection()) {
                Checks.expectEquals("jndi-client", c.getClientID(), "client id");
                Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                Queue q = (Queue) found[2];
                s.createProducer(q).send(s.createTextMessage("via " + store));
                c.start();
                Message m = s.createConsumer(q).receive(20000);
                Checks.expect(m instanceof TextMessage, "received " + m);
                Checks.expectEquals("via " + store, ((TextMessage) m).getText(), "text");
                Checks.expectEquals(queueName, ((Queue) m.getJMSDestination()).getQueueName(), "JMSDestination");
                m.acknowledge();
            }
        });
        Checks.check(store + "_topic_publish_subscribe", () -> {
            try (JMSContext ctx = ((ConnectionFactory) found[4]).createContext()) {
                Topic t = (Topic) found[3];
                JMSConsumer sub = ctx.createConsumer(t);
                ctx.createProducer().send(t, "published via " + store);
                Checks.expectEquals("published via " + store, sub.receiveBody(String.class, 20000), "body");
            }
        });
        Checks.check(store + "_xa_connection", () -> {
            XAConnection xc = ((XAConnectionFactory) found[1]).createXAConnection();
            try {
                XASession xs = xc.createXASession();
                Checks.expect(xs.getXAResource() != null, "no XAResource");
                Queue q = (Queue) found[2];
                javax.transaction.xa.Xid xid = new SimpleXid(store);
                xs.getXAResource().start(xid, javax.transaction.xa.XAResource.TMNOFLAGS);
                xs.createProducer(q).send(xs.createTextMessage("xa via " + store));
                xs.getXAResource().end(xid, javax.transaction.xa.XAResource.TMSUCCESS);
                xs.getXAResource().commit(xid, true);
            } finally {
                xc.close();
            }
            try (Connection c = ((ConnectionFactory) found[4]).createConnection()) {
                Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                c.start();
                Message m = s.createConsumer((Queue) found[2]).receive(20000);
                Checks.expect(m instanceof TextMessage, "received " + m);
                Checks.expectEquals("xa via " + store, ((TextMessage) m).getText(), "text");
            }
        });
        Checks.done();
    }

    /** NAME/ClassName, NAME/FactoryName, NAME/RefAddr/N/Type|Content|Encoding, as fscontext keeps them. */
    static Reference reference(Properties props, String name) {
        String cls = props.getProperty(name + "/ClassName");
        if (cls == null) {
            throw new IllegalArgumentException(name + " is not bound in the .bindings file");
        }
        Reference ref = new Reference(cls, props.getProperty(name + "/FactoryName"), null);
        for (int n = 0; props.getProperty(name + "/RefAddr/" + n + "/Type") != null; n++) {
            String base = name + "/RefAddr/" + n + "/";
            if (!"String".equals(props.getProperty(base + "Encoding"))) {
                throw new java.lang.IllegalStateException(base + "Encoding is not String");
            }
            ref.add(new StringRefAddr(props.getProperty(base + "Type"), props.getProperty(base + "Content")));
        }
        return ref;
    }

    /** A one-branch Xid for the XA check. */
    static final class SimpleXid implements javax.transaction.xa.Xid {
        private final byte[] gtrid;

        SimpleXid(String tag) {
            gtrid = ("jndi-" + tag + "-" + System.nanoTime()).getBytes();
        }

        public int getFormatId() {
            return 0x4a4e4449;
        }

        public byte[] getGlobalTransactionId() {
            return gtrid;
        }

        public byte[] getBranchQualifier() {
            return new byte[] {1};
        }
    }
}
