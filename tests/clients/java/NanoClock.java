import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Echoes System.nanoTime() for every line read on stdin, so the harness can check that Java's
 * clock and Python's time.monotonic_ns() share one time line (both CLOCK_MONOTONIC on Linux):
 * each echoed stamp must fall between the Python stamps taken before the write and after the read.
 */
public class NanoClock {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) {
            System.out.println(System.nanoTime());
            System.out.flush();
        }
    }
}
