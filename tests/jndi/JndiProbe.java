import java.util.Enumeration;
import java.util.Hashtable;
import javax.naming.Context;
import javax.naming.InitialContext;
import javax.naming.RefAddr;
import javax.naming.Reference;

/**
 * Looks names up in a JNDI object store with the JDK alone and prints what it finds.
 * Without OpenMQ's object factory on the class path the JDK hands back the stored
 * javax.naming.Reference itself, so its class name, factory and addresses can be checked.
 *
 * Usage: java JndiProbe FACTORY URL PRINCIPAL CREDENTIALS NAME...  ("-" for no principal)
 */
public final class JndiProbe {
    public static void main(String[] args) throws Exception {
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
            Object found = ctx.lookup(args[i]);
            System.out.println("name=" + args[i]);
            System.out.println("java=" + found.getClass().getName());
            if (found instanceof Reference) {
                Reference ref = (Reference) found;
                System.out.println("className=" + ref.getClassName());
                System.out.println("factoryClassName=" + ref.getFactoryClassName());
                int n = 0;
                for (Enumeration<RefAddr> e = ref.getAll(); e.hasMoreElements(); n++) {
                    RefAddr a = e.nextElement();
                    Object content = a.getContent();
                    System.out.println("addr." + n + "=" + a.getType() + "="
                        + (content == null ? "<null>" : content));
                }
            }
            System.out.println("end");
        }
        ctx.close();
    }
}
