import org.glassfish.grizzly.http.server.HttpServer;
import org.glassfish.grizzly.servlet.ServletRegistration;
import org.glassfish.grizzly.servlet.WebappContext;
import org.glassfish.grizzly.threadpool.ThreadPoolConfig;

/**
 * OpenMQ's own tunnel servlet (imq.jar's HttpTunnelServlet, what imqhttp.war deploys) in
 * the Grizzly HTTP server the stock broker ships, at /imq/tunnel: the stock broker's
 * httpjms service links to it on SERVLET_PORT, clients reach it on HTTP_PORT.
 *
 * Usage: StockTunnel HTTP_PORT SERVLET_PORT
 */
public class StockTunnel {
    public static void main(String[] a) throws Exception {
        WebappContext ctx = new WebappContext("imq", "/imq");
        ServletRegistration reg =
                ctx.addServlet("tunnel", new com.sun.messaging.jmq.httptunnel.tunnel.servlet.HttpTunnelServlet());
        reg.addMapping("/tunnel");
        reg.setInitParameter("servletPort", a[1]);
        reg.setLoadOnStartup(1);
        HttpServer server = HttpServer.createSimpleServer(null, "127.0.0.1", Integer.parseInt(a[0]));
        // A pull holds a servlet thread for up to 60 s: give each client one, as a web
        // container's request pool (Grizzly's default is a few per core) would.
        server.getListener("grizzly").getTransport().setWorkerThreadPoolConfig(
                ThreadPoolConfig.defaultConfig().setCorePoolSize(64).setMaxPoolSize(512));
        ctx.deploy(server);
        server.start();
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
