import java.awt.*;
import java.awt.image.BufferedImage;
import java.io.File;
import javax.imageio.ImageIO;
import javax.swing.*;

public final class Shot {
    public static void main(String[] a) throws Exception {
        String url = a[0];
        Class<?> jcc = Class.forName("sun.tools.jconsole.JConsole");
        Object jc = jcc.getConstructor(boolean.class).newInstance(false);
        JFrame f = (JFrame) jc;
        java.lang.reflect.Method mdi = jcc.getDeclaredMethod("createMDI");
        mdi.setAccessible(true);
        SwingUtilities.invokeAndWait(() -> { try { mdi.invoke(jc); } catch (Exception e) { throw new RuntimeException(e); } });
        SwingUtilities.invokeAndWait(() -> { f.setBounds(0, 0, 1280, 800); f.setVisible(true); });
        java.lang.reflect.Method m = jcc.getDeclaredMethod("addUrl", String.class, String.class, String.class, boolean.class);
        m.setAccessible(true);
        m.invoke(jc, url, "admin", "admin", false);
        Thread.sleep(Integer.parseInt(a[2]) * 1000L);
        SwingUtilities.invokeAndWait(() -> click(f, "Insecure connection"));
        Thread.sleep(Integer.parseInt(a[2]) * 1000L);
        SwingUtilities.invokeAndWait(() -> selectTab(f, "MBeans"));
        Thread.sleep(5000);
        SwingUtilities.invokeAndWait(() -> expandTree(f));
        Thread.sleep(4000);
        BufferedImage img = new Robot().createScreenCapture(new Rectangle(0, 0, 1280, 800));
        ImageIO.write(img, "png", new File(a[1]));
        System.exit(0);
    }
    static void click(Container c, String text) {
        for (Component k : c.getComponents()) {
            if (k instanceof JButton && text.equals(((JButton) k).getText())) { ((JButton) k).doClick(); return; }
            if (k instanceof Container) click((Container) k, text);
        }
    }
    static void selectTab(Container c, String title) {
        for (Component k : c.getComponents()) {
            if (k instanceof JTabbedPane) {
                JTabbedPane t = (JTabbedPane) k;
                for (int i = 0; i < t.getTabCount(); i++) if (title.equals(t.getTitleAt(i))) t.setSelectedIndex(i);
            }
            if (k instanceof Container) selectTab((Container) k, title);
        }
        if (c instanceof JFrame) for (JInternalFrame fr : allFrames(c)) { try { fr.setMaximum(true);} catch (Exception e) {} }
    }
    static java.util.List<JInternalFrame> allFrames(Container c) {
        java.util.List<JInternalFrame> out = new java.util.ArrayList<>();
        for (Component k : c.getComponents()) {
            if (k instanceof JInternalFrame) out.add((JInternalFrame) k);
            if (k instanceof Container) out.addAll(allFrames((Container) k));
        }
        return out;
    }
    static void expandTree(Container c) {
        for (Component k : c.getComponents()) {
            if (k instanceof JTree && k.isShowing()) {
                JTree t = (JTree) k;
                for (int i = 0; i < t.getRowCount() && i < 60; i++) {
                    String s = String.valueOf(t.getPathForRow(i).getLastPathComponent());
                    if (s.equals("Attributes")) { t.setSelectionRow(i); break; }
                }
            }
            if (k instanceof Container) expandTree((Container) k);
        }
    }
}
