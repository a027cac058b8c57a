import com.sun.messaging.ConnectionConfiguration;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;

/**
 * What every interop program shares: the stock client's factory for a broker, and one
 * printed line per check ("ok NAME" or "fail NAME: why") for the Python test to read.
 */
public final class Checks {
    /** A check's body; any exception or failed expectation fails the check. */
    public interface Body {
        void run() throws Exception;
    }

    private static int failures;

    private Checks() {}

    /** The stock client's ConnectionFactory for mq://host:port/jms, plus name=value pairs. */
    public static com.sun.messaging.ConnectionFactory factory(String host, String port, String... props)
            throws JMSException {
        com.sun.messaging.ConnectionFactory cf = new com.sun.messaging.ConnectionFactory();
        cf.setProperty(ConnectionConfiguration.imqAddressList, "mq://" + host + ":" + port + "/jms");
        for (int i = 0; i + 1 < props.length; i += 2) {
            cf.setProperty(props[i], props[i + 1]);
        }
        return cf;
    }

    public static Connection connect(String host, String port, String... props) throws JMSException {
        return factory(host, port, props).createConnection("guest", "guest");
    }

    /** Runs one check and prints its line; later checks run whatever this one did. */
    public static void check(String name, Body body) {
        try {
            body.run();
            System.out.println("ok " + name);
        } catch (Throwable t) {
            failures++;
            String why = String.valueOf(t);
            Throwable c = t.getCause();
            if (c != null && c != t) {
                why += " caused by " + c;
            }
            System.out.println("fail " + name + ": " + why.replace('\n', ' '));
        }
        System.out.flush();
    }

    /** A failed expectation, with what was found. */
    public static void expect(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    public static void expectEquals(Object want, Object got, String what) {
        if (want == null ? got != null : !want.equals(got)) {
            throw new AssertionError(what + ": want " + want + ", got " + got);
        }
    }

    /** Prints "info NAME VALUE": a fact the test reads (ids, counts) that is not a check. */
    public static void info(String name, Object value) {
        System.out.println("info " + name + " " + value);
        System.out.flush();
    }

    /** Ends the program: exit status 1 when a check failed. */
    public static void done() {
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }
}
