import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Acknowledging messages whose home broker has left the cluster.  Connected to the
 * consumer's broker, it receives one message of each of two queues (homed on the other
 * broker): one in a CLIENT_ACKNOWLEDGE session, one in a transacted session.  It prints
 * "info received" and waits for a line on its standard input (the test kills the home
 * broker meanwhile), then acknowledges and commits: the stock client throws the
 * remote-failure exceptions (C4108 for the acknowledgement, TransactionRolledBackException
 * C4109 for the commit).  Arguments: host pm clientAckQueue transactedQueue.
 */
public final class HomeGone {
    public static void main(String[] args) throws Exception {
        Connection conn = Checks.connect(args[0], args[1]);
        conn.start();
        Session client = conn.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        Session txn = conn.createSession(true, Session.SESSION_TRANSACTED);
        Queue q1 = client.createQueue(args[2]);
        Queue q2 = txn.createQueue(args[3]);
        MessageConsumer c1 = client.createConsumer(q1);
        MessageConsumer c2 = txn.createConsumer(q2);
        Message[] got = new Message[2];
        Checks.check("received_both", () -> {
            got[0] = c1.receive(30000);
            got[1] = c2.receive(30000);
            Checks.expect(got[0] != null && got[1] != null, "a message did not arrive");
        });
        Checks.info("received", "2");
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        Checks.check("ack_after_home_gone_fails_remote", () -> {
            try {
                got[0].acknowledge();
                throw new AssertionError("the acknowledgement succeeded");
            } catch (JMSException e) {
                Checks.info("ack_error", e.getClass().getName() + " " + e.getErrorCode());
                Checks.expectEquals("C4108", e.getErrorCode(), "error code");
            }
        });
        Checks.check("commit_after_home_gone_rolls_back", () -> {
            try {
                txn.commit();
                throw new AssertionError("the commit succeeded");
            } catch (jakarta.jms.TransactionRolledBackException e) {
                Checks.info("commit_error", e.getClass().getName() + " " + e.getErrorCode());
                Checks.expectEquals("C4109", e.getErrorCode(), "error code");
            }
        });
        Checks.check("session_goes_on", () -> {
            txn.commit();
            client.recover();
        });
        conn.close();
        Checks.done();
    }
}
