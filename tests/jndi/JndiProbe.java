import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Enumeration;
import java.util.Hashtable;
import java.util.Properties;
import javax.naming.Context;
import javax.naming.InitialContext;
import javax.naming.RefAddr;
import javax.naming.Reference;
import javax.naming.StringRefAddr;

/**
 * Looks names up in a JNDI object store with the JDK alone and prints what it finds.
 * Without OpenMQ's object factory on the class path the JDK hands back the stored
 * javax.naming.Reference itself, so its class name, factory and addresses can be checked.
 *
 * Usage: java JndiProbe FACTORY URL PRINCIPAL CREDENTIALS NAME...  ("-" for no principal)
 *
 * fscontext (RefFSContext) is not part of the JDK, so for a .bindings file the probe reads
 * it with java.util.Properties, as RefFSContext does, and rebuilds each Reference from
 * NAME/ClassName, NAME/FactoryName and NAME/RefAddr/N/Type|Content|Encoding:
 *
 *        java JndiProbe bindings FILE NAME...
 */
public final class JndiProbe {
    public static void main(String[] args) throws Exception {
        if ("bindings".equals(args[0])) {
            Properties props = new Properties();
            try (InputStream in = new FileInputStream(args[1])) {
                props.load(in);
            }
            for (int i = 2; i < args.length; i++) {
                String name = args[i];
                Reference ref = new Reference(props.getProperty(name + "/ClassName"),
                    props.getProperty(name + "/FactoryName"), null);
                for (int n = 0; props.getProperty(name + "/RefAddr/" + n + "/Type") != null; n++) {
                    String base = name + "/RefAddr/" + n + "/";
                    if (!"String".equals(props.getProperty(base + "Encoding"))) {
                        throw new IllegalStateException(base + "Encoding is not String");
                    }
                    ref.add(new StringRefAddr(props.getProperty(base + "Type"),
                        props.getProperty(base + "Content")));
                }
                print(name, ref);
            }
            return;
        }
        Hashtable<String, String> env = new Hashtable<>();
        env.put(Context.INITIAL_CONTEXT_FACTORY, args[0]);
        env.put(Context.PROVIDER_URL, args[1]);
        if (!"-".equals(args[2])) {
            env.put(Context.SECURITY_AUTHENTICATION, "simple");
            env.put(Context.SECURITY_PRINCIPAL, args[2]);
            env.put(Context.SECURITY_CREDENTIALS, args[3]);
        }
        Context ctx = new InitialContext(env);
        for (int i = 4; i < args.length; i++) {
            print(args[i], ctx.lookup(args[i]));
        }
        ctx.close();
    }

    private static void print(String name, Object found) {
        System.out.println("name=" + name);
        System.out.println("java=" + found.getClass().getName());
        if (found instanceof Reference) {
            Reference ref = (Reference) found;
            System.out.println("className=" + ref.getClassName());
            System.out.println("factoryClassName=" + ref.getFactoryClassName());
            int n = 0;
            for (Enumeration<RefAddr> e = ref.getAll(); e.hasMoreElements(); n++) {
                RefAddr a = e.nextElement();
                Object content = a.getContent();
                // Values are one line (the actions refuse line breaks).
                System.out.println("addr." + n + "=" + a.getType() + "="
                    + (content == null ? "<null>" : content));
            }
        }
        System.out.println("end");
    }
}
