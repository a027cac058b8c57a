// ActiveMQ with its own JMS client (OpenWire), run by bench/amq_java.py: the same three
// workloads as bench/compare.py.  One JVM: the consumers (AUTO_ACKNOWLEDGE, each on its
// own connection) start first, then one producer sends COUNT 1 KB messages unpaced;
// persistent sends are synchronous (ActiveMQ's default), so each waits until stored.
//
//   java -cp ... AmqBench tcp://127.0.0.1:61616 queue|persistent|topic COUNT SIZE
//
// Prints "producer P msgs/s consumers C msgs/s received N of M".
import javax.jms.*;
import org.apache.activemq.ActiveMQConnectionFactory;
import java.util.concurrent.*;
import java.util.concurrent.atomic.*;

public class AmqBench {
    public static void main(String[] a) throws Exception {
        String url = a[0], mode = a[1];
        int count = Integer.parseInt(a[2]), size = Integer.parseInt(a[3]);
        boolean topic = mode.equals("topic"), persistent = mode.equals("persistent");
        int subscribers = topic ? 4 : 1;
        String name = "bench." + Long.toHexString(System.nanoTime());
        ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
        AtomicLong first = new AtomicLong(), last = new AtomicLong();
        AtomicInteger total = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(subscribers);
        Connection[] conns = new Connection[subscribers];
        for (int i = 0; i < subscribers; i++) {
            Connection c = f.createConnection();
            Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Destination d = topic ? s.createTopic(name) : s.createQueue(name);
            MessageConsumer k = s.createConsumer(d);
            AtomicInteger got = new AtomicInteger();
            k.setMessageListener(m -> {
                long now = System.nanoTime();
                first.compareAndSet(0, now);
                last.set(now);
                total.incrementAndGet();
                if (got.incrementAndGet() == count) done.countDown();
            });
            c.start();
            conns[i] = c;
        }
        Connection pc = f.createConnection();
        pc.start();
        Session ps = pc.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Destination pd = topic ? ps.createTopic(name) : ps.createQueue(name);
        MessageProducer p = ps.createProducer(pd);
        p.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
        byte[] body = new byte[size];
        long t0 = System.nanoTime();
        for (int i = 0; i < count; i++) {
            BytesMessage m = ps.createBytesMessage();
            m.writeBytes(body);
            p.send(m);
        }
        long t1 = System.nanoTime();
        // Wait for all deliveries, or until none arrive for 15 s.
        int seen = -1;
        while (!done.await(15, TimeUnit.SECONDS)) {
            if (total.get() == seen) break;
            seen = total.get();
        }
        double prod = count / ((t1 - t0) / 1e9);
        double cons = total.get() / Math.max((last.get() - first.get()) / 1e9, 1e-9);
        System.out.printf("producer %.0f msgs/s consumers %.0f msgs/s received %d of %d%n",
                          prod, cons, total.get(), count * subscribers);
        pc.close();
        for (Connection c : conns) c.close();
    }
}
