import jakarta.jms.*;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * N stock-client connections at once, each a producer and a consumer on a queue of its
 * own: it sends a message, waits for it to come back, and again (a round trip per
 * message, so each client has one message in flight).  Prints the message rate of all
 * clients together and the round trips' percentiles.
 *
 * Usage: TunnelBench ADDRESS CLIENTS MESSAGES_PER_CLIENT SIZE
 * ADDRESS is imqAddressList: mq://host:port/jms or http://host:port/imq/tunnel.
 */
public class TunnelBench {
    public static void main(String[] a) throws Exception {
        String address = a[0];
        int clients = Integer.parseInt(a[1]);
        int per = Integer.parseInt(a[2]);
        byte[] body = new byte[Integer.parseInt(a[3])];
        String run = Long.toString(System.nanoTime());
        List<Connection> conns = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int i = 0; i < clients; i++) {
            com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
            cf.setProperty(com.sun.messaging.ConnectionConfiguration.imqAddressList, address);
            conns.add(cf.createConnection("guest", "guest"));
        }
        double connectSecs = (System.nanoTime() - t0) / 1e9;
        long[][] rtts = new long[clients][per];
        AtomicInteger failures = new AtomicInteger();
        CountDownLatch ready = new CountDownLatch(clients);
        CountDownLatch go = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(clients);
        for (int i = 0; i < clients; i++) {
            final int id = i;
            new Thread(() -> {
                try {
                    Connection c = conns.get(id);
                    Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    Queue q = s.createQueue("bench.tunnel." + run + "." + id);
                    MessageProducer p = s.createProducer(q);
                    p.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
                    MessageConsumer r = s.createConsumer(q);
                    c.start();
                    ready.countDown();
                    go.await();
                    for (int k = 0; k < per; k++) {
                        BytesMessage m = s.createBytesMessage();
                        m.writeBytes(body);
                        long t = System.nanoTime();
                        p.send(m);
                        if (r.receive(60000) == null) {
                            failures.incrementAndGet();
                            break;
                        }
                        rtts[id][k] = System.nanoTime() - t;
                    }
                } catch (Exception e) {
                    failures.incrementAndGet();
                    e.printStackTrace();
                } finally {
                    done.countDown();
                }
            }).start();
        }
        ready.await();
        long start = System.nanoTime();
        go.countDown();
        done.await();
        double secs = (System.nanoTime() - start) / 1e9;
        for (Connection c : conns) {
            c.close();
        }
        long[] all = Arrays.stream(rtts).flatMapToLong(Arrays::stream).filter(x -> x > 0).sorted().toArray();
        int n = all.length;
        System.out.printf("connect_s %.3f%n", connectSecs);
        System.out.printf("messages %d%n", n);
        System.out.printf("failures %d%n", failures.get());
        System.out.printf("rate %.1f%n", n / secs);
        if (n > 0) {
            System.out.printf("p50_ms %.2f%n", all[n / 2] / 1e6);
            System.out.printf("p99_ms %.2f%n", all[Math.min(n - 1, (int) (n * 0.99))] / 1e6);
            System.out.printf("max_ms %.2f%n", all[n - 1] / 1e6);
        }
    }
}
