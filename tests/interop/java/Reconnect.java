import com.sun.messaging.jms.notification.Event;
import com.sun.messaging.jms.notification.EventListener;
import jakarta.jms.*;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * imqReconnectEnabled=true across a broker restart on the same port and store: the program
 * sends and receives, prints "info ready", waits for a line on stdin (the test restarts the
 * broker meanwhile), then, once the client runtime has reconnected, goes on with the same
 * connection, session, producer and consumer.
 *
 * <pre>  Reconnect HOST PORT SUFFIX</pre>
 */
public class Reconnect {
    public static void main(String[] a) throws Exception {
        String host = a[0], port = a[1], sfx = a[2];
        List<String> events = Collections.synchronizedList(new ArrayList<>());
        List<String> exceptions = Collections.synchronizedList(new ArrayList<>());
        Connection c = Checks.factory(host, port, "imqReconnectEnabled", "true", "imqReconnectInterval", "500",
                "imqReconnectAttempts", "240", "imqAddressListIterations", "1").createConnection("guest", "guest");
        ((com.sun.messaging.jms.Connection) c).setEventListener(new EventListener() {
            public void onEvent(Event e) {
                events.add(e.getEventCode());
            }
        });
        c.setExceptionListener(e -> exceptions.add(String.valueOf(e)));
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue q = s.createQueue("jrc_" + sfx);
        Queue kept = s.createQueue("jrc_kept_" + sfx);
        MessageProducer p = s.createProducer(q);
        MessageProducer pk = s.createProducer(kept);
        MessageConsumer k = s.createConsumer(q);
        c.start();
        Checks.check("before_restart", () -> {
            p.send(s.createTextMessage("before"));
            Message m = k.receive(10000);
            Checks.expectEquals("before", m == null ? null : ((TextMessage) m).getText(), "received");
            pk.send(s.createTextMessage("kept across the restart"));
        });
        Checks.info("ready", "waiting for a line on stdin");
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        // Calls made between the broker's going and the client runtime's recovery are written
        // to the dead connection and fail (C4000 "Packet acknowledge failed", C4001), with any
        // broker: the checks below start once it says it has reconnected (E301), or after 60 s.
        for (int i = 0; i < 600 && !events.contains("E301"); i++) {
            Thread.sleep(100);
        }

        Checks.check("send_receive_after_restart", () -> {
            for (int i = 0; i < 5; i++) {
                p.send(s.createTextMessage("after " + i));
            }
            for (int i = 0; i < 5; i++) {
                Message m = k.receive(30000);
                Checks.expect(m != null, "message " + i + " missing");
                Checks.expectEquals("after " + i, ((TextMessage) m).getText(), "body");
            }
        });
        Checks.check("persistent_kept_across_restart", () -> {
            Message m = s.createConsumer(kept).receive(10000);
            Checks.expect(m instanceof TextMessage, "the persistent message sent before: " + m);
            Checks.expectEquals("kept across the restart", ((TextMessage) m).getText(), "body");
        });
        Checks.check("reconnected_event", () -> {
            // E301 ConnectionReconnectedEvent (E101 lost it, E201 exit/reconnecting came first).
            Checks.expect(events.contains("E301"), "events: " + events);
            Checks.expect(exceptions.isEmpty(), "ExceptionListener: " + exceptions);
        });
        Checks.info("events", events);
        c.close();
        Checks.done();
    }
}
