import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

/**
 * The application `kcoord rehearse streams` runs (Kafka Streams 4.4): it counts the values of
 * --input per value, through a repartition ("by-value") and a changelogged store ("counts"),
 * and writes "value -> count" (a decimal string) to --output. Two subtopologies, so 2 x P tasks
 * for a P-partition input: 0_p reads the input, 1_p the repartition topic.
 *
 * Rules:
 * - stdout carries one JSON object per line, each with "event" and "t" (System.nanoTime(),
 *   CLOCK_MONOTONIC on Linux, the rehearsal's clock); the log goes to stderr.
 * - "input" lines: every input record processed, with its partition and offset (the rehearsal
 *   finds reprocessing and gaps from them).
 * - "tasks" lines: the instance's active tasks as its stream threads see them, polled every
 *   --poll-ms and printed on change; "prev_t" is when the previous poll started, the last
 *   instant the previous line's set was seen whole.
 * - "state" lines: KafkaStreams state transitions; "fatal": an uncaught exception (the client
 *   shuts down).
 * - stdin: "close leave" (CloseOptions LEAVE_GROUP: the member leaves at once) or "close remain"
 *   (REMAIN_IN_GROUP: the coordinator removes it when its session expires); EOF is "close leave".
 *   Each closes with a 30 s bound, then prints "closed" and exits 0.
 *
 * Usage: StreamsRehearsalApp --bootstrap H:P --app-id ID --input T --output T --state-dir DIR
 *   --protocol classic|streams [--name NAME] [--commit-ms MS] [--poll-ms MS] [--session-timeout-ms MS]
 */
public class StreamsRehearsalApp {
    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.get("protocol"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, opts.getOrDefault("name", opts.get("app-id")));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opts.getOrDefault("commit-ms", "500"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (opts.containsKey("session-timeout-ms")) {
            // The classic protocol's member session; a streams group takes the group's own.
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), opts.get("session-timeout-ms"));
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(opts.get("input"))
            .processValues(InputRecorder::new)
            .groupBy((key, value) -> value, Grouped.as("by-value"))
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(String::valueOf)
            .to(opts.get("output"));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) ->
            say("state", "\"state\":" + q(now.name()) + ",\"from\":" + q(before.name())));
        streams.setUncaughtExceptionHandler(e -> {
            say("fatal", "\"error\":" + q(e.getClass().getName()) + ",\"message\":" + q(String.valueOf(e.getMessage())));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        say("ready", "\"protocol\":" + q(opts.get("protocol")));
        Thread poller = new Thread(() -> pollTasks(streams, Long.parseLong(opts.getOrDefault("poll-ms", "50"))),
            "task-poller");
        poller.setDaemon(true);
        poller.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().startsWith("close")) {
            say("error", "\"command\":" + q(line.trim()) + ",\"message\":\"unknown command\"");
        }
        CloseOptions.GroupMembershipOperation op = line != null && line.trim().equals("close remain")
            ? CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP
            : CloseOptions.GroupMembershipOperation.LEAVE_GROUP;
        streams.close(CloseOptions.groupMembershipOperation(op).withTimeout(Duration.ofSeconds(30)));
        closedTasks();
        say("closed", "\"state\":" + q(streams.state().name()) + ",\"how\":" + q(op.name()));
    }

    /** Prints every input record it passes on: the source task's partition and offset. */
    static final class InputRecorder implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> context;

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
        }

        @Override
        public void process(FixedKeyRecord<String, String> record) {
            context.recordMetadata().ifPresent(m ->
                say("input", "\"partition\":" + m.partition() + ",\"offset\":" + m.offset()
                    + ",\"task\":" + q(context.taskId().toString())));
            context.forward(record);
        }
    }

    static final String NO_TASKS = "\"active\":[]";
    static String lastTasks = NO_TASKS;
    static long lastPoll = System.nanoTime();
    static boolean closed;

    static void pollTasks(KafkaStreams streams, long everyMs) {
        while (true) {
            long pollStart = System.nanoTime();
            try {
                TreeSet<String> active = new TreeSet<>();
                for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                    for (TaskMetadata task : thread.activeTasks()) {
                        active.add(task.taskId().toString());
                    }
                }
                observed("\"active\":" + strings(active), pollStart);
            } catch (RuntimeException e) {
                // Neither running nor rebalancing (closing, failed): no task the rehearsal could count on.
                observed(NO_TASKS, pollStart);
            }
            try {
                Thread.sleep(everyMs);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static synchronized void closedTasks() {
        observed(NO_TASKS, System.nanoTime());
        closed = true;
    }

    static synchronized void observed(String tasks, long pollStart) {
        if (closed) {
            return;
        }
        if (!tasks.equals(lastTasks)) {
            say("tasks", tasks + ",\"prev_t\":" + lastPoll);
            lastTasks = tasks;
        }
        lastPoll = pollStart;
    }

    static String strings(TreeSet<String> items) {
        List<String> quoted = new java.util.ArrayList<>();
        items.forEach(s -> quoted.add(q(s)));
        return "[" + String.join(",", quoted) + "]";
    }

    static String q(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static synchronized void say(String event, String fields) {
        System.out.println("{\"event\":" + q(event) + ",\"t\":" + System.nanoTime()
            + (fields.isEmpty() ? "" : "," + fields) + "}");
        System.out.flush();
    }
}
