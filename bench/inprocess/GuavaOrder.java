// Guava's RateLimiter.tryAcquire() over 100k keys (a HashMap of limiters looked up per decision,
// as the peers harness models "many keys" for Guava), with the keys visited in the order they were
// added or in a shuffled order (fixed seed). The harness's round-robin is the first: the JVM lays
// the map's nodes and limiters out in allocation order, so the scan is sequential in memory.
// bench/inprocess/visit_order.sh runs it beside limiter_hit's scenarios 2, 3, 6 and 7.
//
// usage: java -cp /usr/share/java/guava.jar:DIR GuavaOrder [seconds=1] [reps=3]
import com.google.common.util.concurrent.RateLimiter;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

public class GuavaOrder {
    static final int KEYS = 100_000;
    static volatile long sink;

    // Decisions per second over `order` (indexes into `keys`), for about `seconds`.
    static double run(Map<String, RateLimiter> m, String[] keys, int[] order, double seconds) {
        final long t0 = System.nanoTime();
        final long deadline = t0 + (long) (seconds * 1e9);
        long ops = 0, allowed = 0;
        int i = 0;
        do {
            for (int j = 0; j < 1024; j++) {
                if (m.get(keys[order[i]]).tryAcquire()) allowed++;
                if (++i == order.length) i = 0;
            }
            ops += 1024;
        } while (System.nanoTime() < deadline);
        sink += allowed;
        return ops / ((System.nanoTime() - t0) / 1e9);
    }

    public static void main(String[] args) {
        final double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 1.0;
        final int reps = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        final String[] keys = new String[KEYS];
        for (int i = 0; i < KEYS; i++) keys[i] = "user:" + i;
        final int[] added = new int[KEYS];
        for (int i = 0; i < KEYS; i++) added[i] = i;
        final List<Integer> list = new ArrayList<>();
        for (int i = 0; i < KEYS; i++) list.add(i);
        Collections.shuffle(list, new Random(42));
        final int[] shuffled = list.stream().mapToInt(Integer::intValue).toArray();
        System.out.printf("%-24s %7s %6s %7s %9s %12s%n", "peer", "keys", "regime", "threads", "order", "M/s median");
        for (String regime : new String[] {"allow", "deny"}) {
            // allow: never reached; deny: one permit an hour, taken by the warm-up.
            final double rate = regime.equals("allow") ? 1e12 : 1.0 / 3600;
            for (int[] order : new int[][] {added, shuffled}) {
                final double[] runs = new double[reps];
                for (int r = 0; r < reps; r++) {
                    final Map<String, RateLimiter> m = new HashMap<>(KEYS * 2);
                    for (String k : keys) m.put(k, RateLimiter.create(rate));
                    for (String k : keys) m.get(k).tryAcquire();  // warm-up, in the order added
                    run(m, keys, order, Math.min(0.5, seconds));   // and the JIT's
                    runs[r] = run(m, keys, order, seconds);
                }
                Arrays.sort(runs);
                System.out.printf("%-24s %7d %6s %7d %9s %12.2f%n", "guava tryAcquire", KEYS, regime, 1,
                                  order == added ? "as added" : "shuffled", runs[reps / 2] / 1e6);
            }
        }
    }
}
