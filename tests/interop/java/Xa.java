import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.*;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import javax.transaction.xa.XAException;
import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;

/**
 * XA through com.sun.messaging.XAConnectionFactory, with recovery after a broker restart.
 *
 * <pre>
 *   Xa HOST PORT prepare SUFFIX   two branches (each receives one message and sends one) prepared
 *   Xa HOST PORT recover SUFFIX   after the restart: recover() lists both; commit one, roll back the other
 * </pre>
 */
public class Xa {
    static final int FORMAT = 0x4A4D5358;

    /** A transaction branch identifier of the application's own (as a transaction manager makes). */
    static final class TestXid implements Xid {
        final byte[] gtrid, bqual;

        TestXid(String g) {
            gtrid = g.getBytes(StandardCharsets.UTF_8);
            bqual = new byte[] {1};
        }

        public int getFormatId() {
            return FORMAT;
        }

        public byte[] getGlobalTransactionId() {
            return gtrid;
        }

        public byte[] getBranchQualifier() {
            return bqual;
        }

        boolean same(Xid x) {
            return x.getFormatId() == FORMAT && Arrays.equals(gtrid, x.getGlobalTransactionId())
                    && Arrays.equals(bqual, x.getBranchQualifier());
        }
    }

    static String host, port, sfx;

    public static void main(String[] a) throws Exception {
        host = a[0];
        port = a[1];
        sfx = a[3];
        com.sun.messaging.XAConnectionFactory xcf = new com.sun.messaging.XAConnectionFactory();
        xcf.setProperty(ConnectionConfiguration.imqAddressList, "mq://" + host + ":" + port + "/jms");
        TestXid commit = new TestXid("commit-" + sfx), rollback = new TestXid("rollback-" + sfx);
        try (XAConnection xc = xcf.createXAConnection("guest", "guest")) {
            XASession xs = xc.createXASession();
            XAResource xr = xs.getXAResource();
            Session s = xs.getSession();
            xc.start();
            if (a[2].equals("prepare")) {
                prepare(xc, xs, xr, s, commit, "c");
                prepare(xc, xs, xr, s, rollback, "r");
                Checks.check("prepared_not_visible", () -> {
                    try (Connection c = Checks.connect(host, port)) {
                        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        c.start();
                        for (String b : new String[] {"c", "r"}) {
                            Checks.expect(plain.createConsumer(plain.createQueue(q("out", b))).receive(500) == null,
                                    "a prepared send was delivered");
                            Checks.expect(plain.createConsumer(plain.createQueue(q("in", b))).receive(500) == null,
                                    "a prepared receive was delivered again");
                        }
                    }
                });
                Checks.check("recover_before_restart", () -> {
                    Xid[] found = xr.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                    Checks.expect(contains(found, commit) && contains(found, rollback), "recover(): " + found.length);
                });
            } else {
                Checks.check("recover_after_restart", () -> {
                    Xid[] found = xr.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                    Checks.expect(contains(found, commit), "the committing branch is not in recover()");
                    Checks.expect(contains(found, rollback), "the rolling-back branch is not in recover()");
                });
                Checks.check("commit_after_restart", () -> xr.commit(commit, false));
                Checks.check("rollback_after_restart", () -> xr.rollback(rollback));
                Checks.check("recover_after_completion", () -> {
                    Xid[] found = xr.recover(XAResource.TMSTARTRSCAN | XAResource.TMENDRSCAN);
                    Checks.expect(!contains(found, commit) && !contains(found, rollback), "still in doubt");
                });
                Checks.check("committed_outcome", () -> {
                    try (Connection c = Checks.connect(host, port)) {
                        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        c.start();
                        Message m = plain.createConsumer(plain.createQueue(q("out", "c"))).receive(10000);
                        Checks.expect(m instanceof TextMessage, "the committed send did not arrive: " + m);
                        Checks.expectEquals("sent in c", ((TextMessage) m).getText(), "body");
                        Checks.expect(plain.createConsumer(plain.createQueue(q("in", "c"))).receive(500) == null,
                                "the committed receive came back");
                    }
                });
                Checks.check("rolled_back_outcome", () -> {
                    try (Connection c = Checks.connect(host, port)) {
                        Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        c.start();
                        Checks.expect(plain.createConsumer(plain.createQueue(q("out", "r"))).receive(500) == null,
                                "the rolled-back send arrived");
                        Message m = plain.createConsumer(plain.createQueue(q("in", "r"))).receive(10000);
                        Checks.expect(m instanceof TextMessage, "the rolled-back receive is lost: " + m);
                        Checks.expectEquals("to consume r", ((TextMessage) m).getText(), "body");
                        Checks.expect(m.getJMSRedelivered(), "JMSRedelivered false");
                    }
                });
            }
        }
        Checks.done();
    }

    static String q(String what, String branch) {
        return "jxa_" + what + "_" + branch + "_" + sfx;
    }

    static boolean contains(Xid[] found, TestXid x) {
        for (Xid f : found) {
            if (x.same(f)) {
                return true;
            }
        }
        return false;
    }

    static void prepare(XAConnection xc, XASession xs, XAResource xr, Session s, TestXid xid, String b) {
        Checks.check("prepare_" + b, () -> {
            try (Connection c = Checks.connect(host, port)) {
                Session plain = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                plain.createProducer(plain.createQueue(q("in", b))).send(plain.createTextMessage("to consume " + b));
            }
            MessageConsumer k = s.createConsumer(s.createQueue(q("in", b)));
            MessageProducer p = s.createProducer(s.createQueue(q("out", b)));
            xr.start(xid, XAResource.TMNOFLAGS);
            Message m = k.receive(10000);
            Checks.expect(m instanceof TextMessage, "nothing to receive in the branch: " + m);
            p.send(s.createTextMessage("sent in " + b));
            xr.end(xid, XAResource.TMSUCCESS);
            Checks.expectEquals(XAResource.XA_OK, xr.prepare(xid), "prepare");
            k.close();
            p.close();
        });
    }
}
