import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import java.util.concurrent.CyclicBarrier;

/**
 * Two consumers of one queue attach at the same moment, one on each of two brokers of a
 * cluster (whose queues allow one active consumer), then each broker gets 10 messages:
 * one consumer only may receive.  With "all" it receives all 20; with "own" at least its
 * own broker's 10 (a stock broker whose consumer lost the race may keep its messages from
 * the winner).  Arguments: hostA pmA hostB pmB rounds prefix all|own.  A line per round:
 * "ok race_N" then "info round_N a=COUNT b=COUNT" (a refused consumer counts
 * "refused"), or "fail race_N: why".
 */
public final class ExclusiveRace {
    private static final int PER_BROKER = 10;

    public static void main(String[] args) throws Exception {
        Connection a = Checks.connect(args[0], args[1]);
        Connection b = Checks.connect(args[2], args[3]);
        int rounds = Integer.parseInt(args[4]);
        String prefix = args[5];
        boolean all = args.length < 7 || args[6].equals("all");
        a.start();
        b.start();
        // With "all", each round's consumers stay open after it and are looked at once more
        // at the end, after LATE_MS: a second active consumer (or a message delivered
        // twice) would have shown by then.  The wait is paid once, not once a round, and
        // every round gets at least as long as before.  "own" (stock brokers) finishes each
        // round before the next, as before.
        Round[] open = new Round[rounds];
        for (int r = 0; r < rounds; r++) {
            String name = prefix + r;
            if (all) {
                try {
                    open[r] = race(a, b, name, true);
                } catch (Throwable e) {
                    Checks.check("race_" + r, () -> {
                        throw e;
                    });
                }
                continue;
            }
            String[] line = new String[1];
            Checks.check("race_" + r, () -> {
                Round x = race(a, b, name, false);
                late(x, 5, 100);
                line[0] = x.finish(false);
            });
            if (line[0] != null) {
                Checks.info("round_" + r, line[0]);
            }
        }
        if (all) {
            Thread.sleep(LATE_MS);
            for (int r = 0; r < rounds; r++) {
                Round x = open[r];
                if (x == null) {
                    continue;
                }
                String[] line = new String[1];
                Checks.check("race_" + r, () -> {
                    late(x, 1, 0);
                    line[0] = x.finish(true);
                });
                if (line[0] != null) {
                    Checks.info("round_" + r, line[0]);
                }
            }
        }
        a.close();
        b.close();
        Checks.done();
    }

    /** How long after the last round the open rounds' consumers are looked at again. */
    private static final long LATE_MS = 1000;

    /** One race's sessions, consumers and what each consumer received. */
    private static final class Round {
        final Session sa, sb;
        final MessageConsumer[] cons;
        final int[] got = new int[2];

        Round(Session sa, Session sb, MessageConsumer[] cons) {
            this.sa = sa;
            this.sb = sb;
            this.cons = cons;
        }

        /** Closes the sessions and checks the counts: "a=COUNT b=COUNT". */
        String finish(boolean all) throws Exception {
            String line = "a=" + (cons[0] == null ? "refused" : got[0]) + " b="
                    + (cons[1] == null ? "refused" : got[1]);
            sa.close();
            sb.close();
            Checks.expect(got[0] == 0 || got[1] == 0, "both consumers received: " + line);
            if (all) {
                Checks.expectEquals(2 * PER_BROKER, got[0] + got[1], "messages received (" + line + ")");
            } else {
                Checks.expect(got[0] + got[1] >= PER_BROKER, "its own broker's messages missing: " + line);
            }
            return line;
        }
    }

    /**
     * A little longer: a second active consumer would get its share now at the latest.
     * ``tries`` turns of a receive of ``ms`` on each consumer (0: what has arrived, without
     * waiting, until nothing has).
     */
    private static void late(Round x, int tries, long ms) throws JMSException {
        for (int k = 0; k < tries; k++) {
            for (int i = 0; i < 2; i++) {
                if (x.cons[i] == null) {
                    continue;
                }
                if (ms > 0) {
                    if (x.cons[i].receive(ms) != null) {
                        x.got[i]++;
                    }
                } else {
                    while (x.cons[i].receiveNoWait() != null) {
                        x.got[i]++;
                    }
                }
            }
        }
    }

    /** One race on queue ``name``: both attach, each broker gets its messages, and the
     *  round's messages are received (all, or with "own" the winner's own). */
    private static Round race(Connection a, Connection b, String name, boolean all) throws Exception {
        Session sa = a.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Session sb = b.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue qa = sa.createQueue(name);
        Queue qb = sb.createQueue(name);
        CyclicBarrier barrier = new CyclicBarrier(2);
        MessageConsumer[] cons = new MessageConsumer[2];
        Thread ta = attach(barrier, sa, qa, cons, 0);
        Thread tb = attach(barrier, sb, qb, cons, 1);
        ta.start();
        tb.start();
        ta.join();
        tb.join();
        Checks.expect(cons[0] != null || cons[1] != null, "both consumers refused");
        send(sa, qa, "A");
        send(sb, qb, "B");
        Round x = new Round(sa, sb, cons);
        int[] got = x.got;
        // With "own" and the loser refused, no check reads more than the winner's first
        // PER_BROKER messages: waiting out the deadline for the loser's broker to hand over
        // what it may keep for good (20 s a round between stock brokers) decided nothing.
        boolean oneAttached = cons[0] == null || cons[1] == null;
        int enough = !all && oneAttached ? PER_BROKER : 2 * PER_BROKER;
        long deadline = System.currentTimeMillis() + 20000;
        // Short receives in turn: a waiting backup consumer (failover) would otherwise
        // cost its full timeout before each message of the active one.
        while (got[0] + got[1] < enough && System.currentTimeMillis() < deadline) {
            for (int i = 0; i < 2; i++) {
                if (cons[i] != null && cons[i].receive(10) != null) {
                    got[i]++;
                }
            }
        }
        return x;
    }

    private static Thread attach(CyclicBarrier barrier, Session s, Queue q, MessageConsumer[] out, int i) {
        return new Thread(() -> {
            try {
                barrier.await();
                out[i] = s.createConsumer(q);
            } catch (JMSException e) {
                out[i] = null; // refused: the queue has its consumers elsewhere
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
    }

    private static void send(Session s, Queue q, String from) throws JMSException {
        MessageProducer p = s.createProducer(q);
        for (int i = 0; i < PER_BROKER; i++) {
            TextMessage m = s.createTextMessage(from + i);
            p.send(m);
        }
        p.close();
    }
}
