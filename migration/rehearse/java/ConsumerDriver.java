import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A Kafka consumer (kafka-clients 4.3) driven by kcoord's test harness.
 *
 * Prints one JSON object per line on stdout, "t" being System.nanoTime() (CLOCK_MONOTONIC on
 * Linux, the clock Python's time.monotonic_ns() reads, so the harness can merge timelines):
 *   ready | assigned | revoked | lost | record | committed | error | closed
 * "assigned" is stamped on entry to the listener, "revoked" on exit after the synchronous
 * commit, so an ownership interval is never narrower than the real one.
 *
 * Stops cleanly (commitSync + close, which revokes and sends LeaveGroup) when stdin reaches EOF or
 * reads the line "close" ("leave" / "remain" force CloseOptions LEAVE_GROUP / REMAIN_IN_GROUP, which
 * matters for static members). kill -9 gives an abrupt stop (session expiry on the coordinator).
 * A fatal error (e.g. UnsupportedVersionException for group.protocol=consumer on a broker
 * without ConsumerGroupHeartbeat) prints an "error" event with fatal=true and exits with 2.
 *
 * Usage: java -cp 'jars/*' ConsumerDriver.java --bootstrap HOST:PORT --topics a,b --group G
 *   [--group-protocol classic|consumer] [--assignor range|roundrobin|sticky|cooperative-sticky|CLASS,...]
 *   [--remote-assignor uniform|range] [--instance-id ID] [--commit manual|auto]
 *   [--session-timeout-ms N] [--heartbeat-interval-ms N] [--max-poll-interval-ms N]
 *   [--client-id ID] [--poll-ms N] [--prop key=value]...
 * --session-timeout-ms, --heartbeat-interval-ms and --assignor are classic-only: the consumer
 * protocol (KIP-848) moves them to the broker and the client rejects them.
 */
public class ConsumerDriver {
    private static final PrintStream OUT = new PrintStream(
        new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false, StandardCharsets.UTF_8);
    private static volatile boolean closing = false;
    private static volatile GroupMembershipOperation membershipOnClose = GroupMembershipOperation.DEFAULT;
    /* Next offset per partition, from the records this member consumed. Revocation and close
     * commit these rather than position(): the 4.3 consumer (group.protocol=consumer) does not
     * initialise the position of a partition already pending revocation, so position() inside
     * onPartitionsRevoked can block for default.api.timeout.ms (60 s) and stall the revocation.
     * Only the poll thread touches it (callbacks run inside poll()). */
    private static final Map<TopicPartition, OffsetAndMetadata> consumedNext = new HashMap<>();

    public static void main(String[] argv) {
        Map<String, List<String>> opts = parseArgs(argv);
        String protocol = one(opts, "group-protocol", "classic");
        boolean manualCommit = one(opts, "commit", "manual").equals("manual");
        long pollMs = Long.parseLong(one(opts, "poll-ms", "100"));
        Properties props = consumerProps(opts, protocol, manualCommit);
        List<String> topics = List.of(required(opts, "topics").split(","));

        Thread stdinWatcher = new Thread(ConsumerDriver::watchStdin, "stdin-watcher");
        stdinWatcher.setDaemon(true);
        stdinWatcher.start();

        KafkaConsumer<String, String> consumer = null;
        try {
            consumer = new KafkaConsumer<>(props);
            consumer.subscribe(topics, new Listener(consumer, manualCommit));
            emit(event("ready").str("protocol", protocol).str("group", props.getProperty(ConsumerConfig.GROUP_ID_CONFIG)));
            while (!closing) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(pollMs));
                if (records.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    emitNoFlush(event("record").str("topic", r.topic()).num("partition", r.partition())
                        .num("offset", r.offset()).str("key", r.key()).str("value", r.value()));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                consumedNext.putAll(next);
                OUT.flush();
                if (manualCommit) commit(consumer, next, "batch");
            }
            if (manualCommit) commit(consumer, consumedOf(consumer.assignment()), "close");
            // Revokes via the listener, then leaves (DEFAULT: dynamic members leave, static ones stay, KIP-345).
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(30)).withGroupMembershipOperation(membershipOnClose));
            consumer = null;
            emit(event("closed"));
            System.exit(0);
        } catch (Exception e) {
            emit(error(e, true));
            if (consumer != null) {
                try { consumer.close(CloseOptions.timeout(Duration.ZERO)); } catch (Exception ignored) { }
            }
            System.exit(2);
        }
    }

    /** Rebalance callbacks, reported for the harness's OwnershipLedger. */
    static final class Listener implements ConsumerRebalanceListener {
        private final KafkaConsumer<String, String> consumer;
        private final boolean manualCommit;

        Listener(KafkaConsumer<String, String> consumer, boolean manualCommit) {
            this.consumer = consumer;
            this.manualCommit = manualCommit;
        }

        @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            long t = System.nanoTime();
            emit(event("assigned", t).parts(parts).str("member_id", consumer.groupMetadata().memberId())
                .num("generation", consumer.groupMetadata().generationId()));
        }

        @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            // Commit before giving the partitions up, so the next owner starts where we stopped.
            if (!parts.isEmpty()) commit(consumer, consumedOf(parts), "revoke");
            consumedNext.keySet().removeAll(parts);
            emit(event("revoked").parts(parts));
        }

        @Override public void onPartitionsLost(Collection<TopicPartition> parts) {
            // Already owned by someone else: committing now could overwrite their progress.
            consumedNext.keySet().removeAll(parts);
            emit(event("lost").parts(parts));
        }
    }

    private static Map<TopicPartition, OffsetAndMetadata> consumedOf(Collection<TopicPartition> parts) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : parts) {
            OffsetAndMetadata next = consumedNext.get(tp);
            if (next != null) out.put(tp, next);
        }
        return out;
    }

    private static void commit(KafkaConsumer<String, String> c, Map<TopicPartition, OffsetAndMetadata> offsets,
                               String reason) {
        try {
            Map<TopicPartition, OffsetAndMetadata> committed = offsets;
            if (committed.isEmpty()) return;
            c.commitSync(committed);
            Json ev = event("committed").str("reason", reason);
            List<String> rows = new ArrayList<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                rows.add("[" + quote(e.getKey().topic()) + "," + e.getKey().partition() + "," + e.getValue().offset() + "]");
            }
            emit(ev.raw("offsets", "[" + String.join(",", rows) + "]"));
        } catch (Exception e) {
            emit(error(e, false).str("during", "commit on " + reason));
        }
    }

    private static void watchStdin() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String cmd = line.trim();
                if (cmd.equals("close")) break;
                if (cmd.equals("leave")) { membershipOnClose = GroupMembershipOperation.LEAVE_GROUP; break; }
                if (cmd.equals("remain")) { membershipOnClose = GroupMembershipOperation.REMAIN_IN_GROUP; break; }
            }
        } catch (Exception ignored) {
            // A broken stdin means the harness is gone: close as on EOF.
        }
        closing = true;
    }

    private static Properties consumerProps(Map<String, List<String>> opts, String protocol, boolean manualCommit) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, required(opts, "bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, required(opts, "group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, String.valueOf(!manualCommit));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        putIf(p, ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, one(opts, "instance-id", null));
        putIf(p, ConsumerConfig.CLIENT_ID_CONFIG, one(opts, "client-id", null));
        putIf(p, ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, one(opts, "max-poll-interval-ms", null));
        putIf(p, ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, one(opts, "session-timeout-ms", null));
        putIf(p, ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, one(opts, "heartbeat-interval-ms", null));
        putIf(p, ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, one(opts, "remote-assignor", null));
        String assignor = one(opts, "assignor", null);
        if (assignor != null) {
            List<String> classes = new ArrayList<>();
            for (String name : assignor.split(",")) classes.add(assignorClass(name.trim()));
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
        }
        for (String kv : opts.getOrDefault("prop", List.of())) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--prop expects key=value, got: " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    private static String assignorClass(String name) {
        switch (name) {
            case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky": return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default: return name;   // a fully qualified class name
        }
    }

    private static Map<String, List<String>> parseArgs(String[] argv) {
        Map<String, List<String>> opts = new LinkedHashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                System.err.println("bad argument '" + argv[i] + "': options are --name value pairs");
                System.exit(64);
            }
            opts.computeIfAbsent(argv[i].substring(2), k -> new ArrayList<>()).add(argv[++i]);
        }
        return opts;
    }

    private static String one(Map<String, List<String>> opts, String key, String dflt) {
        List<String> v = opts.get(key);
        return v == null ? dflt : v.get(v.size() - 1);
    }

    private static String required(Map<String, List<String>> opts, String key) {
        String v = one(opts, key, null);
        if (v == null) {
            System.err.println("missing required option --" + key);
            System.exit(64);
        }
        return v;
    }

    private static void putIf(Properties p, String key, String value) {
        if (value != null) p.put(key, value);
    }

    // --- JSON lines -------------------------------------------------------------------------

    static Json event(String kind) { return event(kind, System.nanoTime()); }

    static Json event(String kind, long t) { return new Json().num("t", t).str("event", kind); }

    static Json error(Throwable e, boolean fatal) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        return event("error").str("error", e.getClass().getSimpleName()).str("message", String.valueOf(e.getMessage()))
            .str("cause", root == e ? null : root.getClass().getSimpleName() + ": " + root.getMessage())
            .raw("fatal", String.valueOf(fatal));
    }

    static synchronized void emit(Json j) { OUT.println(j.done()); OUT.flush(); }

    static synchronized void emitNoFlush(Json j) { OUT.println(j.done()); }

    static String quote(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** A flat JSON object builder: enough for the driver's events, no library needed. */
    static final class Json {
        private final StringBuilder b = new StringBuilder("{");

        Json raw(String key, String json) {
            if (b.length() > 1) b.append(',');
            b.append(quote(key)).append(':').append(json);
            return this;
        }

        Json str(String key, String value) { return raw(key, quote(value)); }

        Json num(String key, long value) { return raw(key, Long.toString(value)); }

        Json parts(Collection<TopicPartition> parts) {
            List<String> rows = new ArrayList<>();
            for (TopicPartition tp : parts) rows.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
            return raw("partitions", "[" + String.join(",", rows) + "]");
        }

        String done() { return b.append('}').toString(); }
    }
}
