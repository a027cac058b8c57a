import com.sun.messaging.jmq.jmsclient.ConnectionImpl;
import jakarta.jms.*;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The stock HA client at the taker while its takeover is held up, on purpose: the test
 * holds a row lock on the failed broker's store-owner row (so the taker's takeover waits
 * and it answers the reconnecting client 408), kills that broker, and lets the takeover go
 * on only once this program's commit() is under way.
 *
 * The commit() is made while the transacted connection is failing over, and held (this
 * program holds the monitor of the session's client Transaction object, which commit()
 * takes after SessionImpl.commit has checked that no failover occurred) until the
 * failover is over: then the client sends END of its old transaction to the taker and
 * reads the answer, the order session 17's loaded run gave by chance (END 404 there,
 * C4104, a plain JMSException the application could not tell from a failure).  The
 * transaction was not prepared, so the taker never had it: the commit must end in
 * TransactionRolledBackException (the work is then done again and committed) or commit.
 *
 * Usage: HATakeover ADDRESSLIST FIRST QUEUE TXNQUEUE open|prepared
 *   ADDRESSLIST names the first broker (FIRST, host:port) before the taker (PRIORITY);
 *   "prepared": the transaction is PREPARED when the first broker dies
 *   (preparedThenKilled), so the taker must find it and the commit be done;
 *   "ask hold_prepare" / "ask let_prepare": the test holds, then lets go, the store's
 *   transaction table;
 *   "ask hold_and_kill": the test locks the first broker's row and kills it;
 *   "ask release": the test lets the takeover finish (after the taker refused this client).
 * Its helpers (ask, open, Got, reconnects, brokerList, where, sendRetrying, numbers) are
 * FailoverClient's, inherited: the two programs talk to their tests the same way.
 */
public class HATakeover extends FailoverClient {
    /** Until ``cond`` holds (a minute at most: a hang is a failure, not a wait). */
    interface Cond {
        boolean holds() throws Exception;
    }

    static void waitUntil(Cond cond, String what) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (!cond.holds()) {
            Checks.expect(System.currentTimeMillis() < deadline, "never: " + what);
            Thread.sleep(20);
        }
    }

    /** The stock client's frames of a stack, innermost first, on one line. */
    static String frames(StackTraceElement[] stack) {
        StringBuilder at = new StringBuilder();
        for (StackTraceElement e : stack) {
            if (e.getClassName().startsWith("com.sun.messaging")) {
                at.append(' ').append(e.getClassName().replaceAll(".*[.]", "")).append('.')
                    .append(e.getMethodName()).append(':').append(e.getLineNumber());
            }
        }
        return at.toString().trim();
    }

    /** A field of the stock client's (not public API: the test's handle on its timing). */
    static Object field(Class<?> cls, Object of, String name) throws ReflectiveOperationException {
        java.lang.reflect.Field f = cls.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(of);
    }

    /** A thread, started, that commits {@code s} and puts "committed" or what it threw in
     * {@code outcome[0]}. */
    static Thread committing(Session s, Object[] outcome) {
        Thread t = new Thread(() -> {
            try {
                s.commit();
                outcome[0] = "committed";
            } catch (Throwable e) {
                outcome[0] = e;
            }
        });
        t.start();
        return t;
    }

    /**
     * "prepared": the transaction is PREPARED on the first broker when it dies, its COMMIT
     * not yet sent.  The test holds the store's transaction table (LOCK TABLE ... SHARE
     * MODE: the first broker's PREPARE record waits, so its answer does), this program
     * then holds its connection's ProtocolHandler monitor, which every write takes, and
     * the test lets the PREPARE be stored: the commit() has its answer and its COMMIT waits
     * for the monitor.  Then the test locks the first broker's row and kills it, and this
     * program lets the COMMIT go (to the dead broker: the client then waits for the
     * failover and asks the taker, VERIFY_TRANSACTION, which must find it PREPARED).
     */
    static void preparedThenKilled(Connection[] conns, Session[] ts, Thread[] committer, Object[] outcome)
            throws Exception {
        Checks.check("ha_commit_prepared_on_the_first_broker_when_it_dies", () -> {
            ConnectionImpl tc = (ConnectionImpl) conns[1];
            Object ph = field(ConnectionImpl.class, tc, "protocolHandler");
            ask("hold_prepare");
            committer[0] = committing(ts[0], outcome);
            waitUntil(() -> outcome[0] != null || frames(committer[0].getStackTrace())
                .matches("AckQueue.dequeueWait.*ProtocolHandler.prepareHATransaction.*"),
                "commit() waiting for its PREPARE's answer");
            synchronized (ph) {
                ask("let_prepare");
                waitUntil(() -> outcome[0] != null || (committer[0].getState() == Thread.State.BLOCKED
                    && frames(committer[0].getStackTrace()).matches(
                        "ProtocolHandler.writePacketNoAck.*ProtocolHandler.commitHATransaction.*")),
                    "commit() waiting to send its COMMIT");
                Checks.expect(outcome[0] == null, "commit() ended before the kill: " + outcome[0]);
                // The test locks the first broker's row and kills it: the taker's takeover
                // waits for the lock.
                ask("hold_and_kill");
            }
            ask("release");
        });
    }

    public static void main(String[] a) throws Exception {
        String addressList = a[0], first = a[1], queue = a[2], txnQueue = a[3], mode = a[4];
        com.sun.messaging.ConnectionFactory cf = factory(addressList);
        final int before = 20, after = 20, taken = 5, inTxn = 3;
        Connection[] conns = new Connection[2];
        Session[] ts = new Session[1];
        MessageConsumer[] tr = new MessageConsumer[1];
        MessageProducer[] tp = new MessageProducer[1];
        MessageProducer[] p = new MessageProducer[1];
        Session[] ps = new Session[1];
        List<Got> got = new CopyOnWriteArrayList<>();
        Object[] outcome = {null};
        Set<Integer> committed = new TreeSet<>();
        Thread[] committer = {null};

        Checks.check("ha_on_the_first_broker", () -> {
            conns[0] = open(cf, "producer");
            conns[1] = open(cf, "txn");
            for (Connection c : conns) {
                Checks.expect(((com.sun.messaging.jms.Connection) c).isConnectedToHABroker(),
                    "isConnectedToHABroker false");
                Checks.expect(where(c).startsWith(first), "connected to " + where(c) + ", not " + first);
                // An HA client fails over along the broker list the broker gives it (HELLO_REPLY,
                // then cluster INFO packets), not its own address list: it must name the taker.
                waitUntil(() -> brokerList(c).split(",").length == 2, "a broker list of two: " + brokerList(c));
            }
        });
        Checks.check("ha_sent_and_open_transaction", () -> {
            ps[0] = conns[0].createSession(false, Session.AUTO_ACKNOWLEDGE);
            p[0] = ps[0].createProducer(ps[0].createQueue(queue));
            p[0].setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int n = 0; n < before; n++) {
                TextMessage m = ps[0].createTextMessage("m" + n);
                m.setIntProperty("n", n);
                p[0].send(m); // returns once the first broker has stored it
            }
            ts[0] = conns[1].createSession(true, Session.SESSION_TRANSACTED);
            tr[0] = ts[0].createConsumer(ts[0].createQueue(queue));
            tp[0] = ts[0].createProducer(ts[0].createQueue(txnQueue));
            conns[1].start();
            for (int i = 0; i < taken; i++) {
                Message m = tr[0].receive(20000);
                Checks.expect(m != null, "nothing to take in the transaction");
                got.add(new Got(m.getIntProperty("n"), m.getJMSRedelivered(), m.getJMSMessageID()));
            }
            for (int i = 0; i < inTxn; i++) {
                TextMessage m = ts[0].createTextMessage("t" + i);
                m.setIntProperty("t", i);
                tp[0].send(m);
            }
        });
        if ("prepared".equals(mode)) {
            preparedThenKilled(conns, ts, committer, outcome);
        } else {
            // The test locks the first broker's store-owner row, then kills that broker: the
            // taker notices, and its takeover waits for the lock.
            ask("hold_and_kill");
            Checks.check("ha_commit_ends_its_transaction_at_the_taker", () -> {
                ConnectionImpl tc = (ConnectionImpl) conns[1];
                waitUntil(tc::getReconnecting, "the connection failing over");
                // The client's Transaction of the session: commit() takes its monitor after it
                // has checked that no failover occurred (SessionImpl.commit: none had, yet).
                // Held here, it keeps that commit() from ending the transaction until the
                // failover is over, the order a loaded machine gave by chance: the END then
                // goes to the taker as any request, and its answer is read.
                Object txn = field(com.sun.messaging.jmq.jmsclient.SessionImpl.class, ts[0], "transaction");
                synchronized (txn) {
                    committer[0] = committing(ts[0], outcome);
                    waitUntil(() -> outcome[0] != null || (committer[0].getState() == Thread.State.BLOCKED
                        && frames(committer[0].getStackTrace()).startsWith("Transaction.commit")),
                        "commit() waiting for the transaction");
                    Checks.expect(outcome[0] == null, "commit() ended before the failover: " + outcome[0]);
                    // The test waits until the taker has refused this client (408: the takeover
                    // it waits for), then lets the takeover finish.
                    ask("release");
                    waitUntil(() -> !tc.getReconnecting()
                        && !(Boolean) field(ConnectionImpl.class, tc, "recoverInProcess")
                        && (Boolean) field(com.sun.messaging.jmq.jmsclient.SessionImpl.class, ts[0], "failoverOccurred"),
                        "the failover over");
                    Checks.info("txn_failed_over_to", where(conns[1]));
                }
            });
        }
        Checks.check("ha_commit_during_failover_rolled_back_or_committed", () -> {
            committer[0].join(60000);
            Checks.expect(!committer[0].isAlive(), "commit() still waiting");
            Checks.info("commit_outcome", outcome[0] instanceof JMSException
                ? outcome[0].getClass().getSimpleName() + " " + ((JMSException) outcome[0]).getErrorCode()
                    + " " + ((JMSException) outcome[0]).getMessage().replace('\n', ' ')
                : outcome[0]);
            if (outcome[0] instanceof Throwable) {
                Checks.info("commit_outcome_at", frames(((Throwable) outcome[0]).getStackTrace()));
            }
            if (outcome[0] instanceof TransactionRolledBackException && !"prepared".equals(mode)) {
                // The stock way of saying so: the application does it again.
                got.clear();
                for (int i = 0; i < taken; i++) {
                    Message m = tr[0].receive(20000);
                    Checks.expect(m != null, "the rolled-back messages did not come again");
                    Checks.expect(m.getJMSRedelivered(), "message " + m.getIntProperty("n")
                        + " came again after the rollback without JMSRedelivered");
                    got.add(new Got(m.getIntProperty("n"), true, m.getJMSMessageID()));
                }
                for (int i = 0; i < inTxn; i++) {
                    TextMessage m = ts[0].createTextMessage("t" + i);
                    m.setIntProperty("t", i);
                    tp[0].send(m);
                }
                ts[0].commit();
            } else {
                Checks.expectEquals("committed", outcome[0], "commit() during the failover");
                committed.addAll(numbers(got));
            }
            Checks.info("txn_now_on", where(conns[1]));
        });
        Checks.check("ha_every_sent_message_received", () -> {
            for (int n = before; n < before + after; n++) {
                TextMessage m = ps[0].createTextMessage("m" + n);
                m.setIntProperty("n", n);
                sendRetrying(p[0], m);
            }
            Checks.info("producer_now_on", where(conns[0]));
            long deadline = System.currentTimeMillis() + 60000;
            while (numbers(got).size() < before + after && System.currentTimeMillis() < deadline) {
                Message m = tr[0].receive(2000);
                if (m != null) {
                    got.add(new Got(m.getIntProperty("n"), m.getJMSRedelivered(), m.getJMSMessageID()));
                }
                ts[0].commit();
            }
            expectEveryOneReceived(got, before + after);
            // Consumed in a transaction that was committed: never delivered again.
            Map<Integer, Integer> deliveries = new HashMap<>();
            for (Got g : got) {
                deliveries.merge(g.n(), 1, Integer::sum);
            }
            for (int n : committed) {
                Checks.expectEquals(1, deliveries.get(n), "deliveries of message " + n + ", consumed in the committed transaction");
            }
            expectDuplicatesFlagged(got);
        });
        Checks.check("ha_transaction_sends_stored_once",
            () -> expectTransactionSendsOnce(conns[1], txnQueue, inTxn));
        Checks.check("ha_both_reconnected_to_the_taker", () -> {
            for (Connection c : conns) {
                Checks.expect(!where(c).startsWith(first), "still on " + where(c));
            }
            Checks.expectEquals(2, reconnects.size(), "reconnects " + reconnects);
        });
        Checks.info("reconnects", reconnects);
        for (Connection c : conns) {
            if (c != null) {
                c.close();
            }
        }
        Checks.done();
    }
}
