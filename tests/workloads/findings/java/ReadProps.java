// ReadProps: the dirty/clean twin of a Java program that reads its configuration.
// `java ReadProps FILE N dirty`: loads FILE N times, once per "request" (the finding).
// `java ReadProps FILE N clean`: loads it once and keeps it (no finding).
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

public class ReadProps {
    static Properties load(String file) throws IOException {
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(file)) { // LOAD_LINE
            p.load(in);
        }
        return p;
    }

    public static void main(String[] args) throws IOException {
        String file = args[0];
        int n = Integer.parseInt(args[1]);
        boolean dirty = args[2].equals("dirty");
        Properties kept = dirty ? null : load(file);
        long sum = 0;
        for (int i = 0; i < n; i++) {
            Properties p = dirty ? load(file) : kept;
            sum += Long.parseLong(p.getProperty("limit", "0"));
        }
        System.out.println("ReadProps: " + n + " requests, limit sum " + sum);
    }
}
