import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
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
 * The JSON-line output and the task polling are StreamsEvents' (below in this file), which the
 * test suite's Streams application (tests/clients/java/streams/CountStreamsApp.java) compiles
 * with and uses too, so both print the same lines the same way.
 *
 * Usage: StreamsRehearsalApp --bootstrap H:P --app-id ID --input T --output T --state-dir DIR
 *   --protocol classic|streams [--name NAME] [--commit-ms MS] [--poll-ms MS] [--session-timeout-ms MS]
 */
public class StreamsRehearsalApp {
    public static void main(String[] argv) throws Exception {
        StreamsEvents.TaskLines taskLines = new StreamsEvents.TaskLines(false);
        Map<String, String> opts = StreamsEvents.options(argv);
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
        StreamsEvents.watch(streams);
        streams.start();
        StreamsEvents.say("ready", "\"protocol\":" + StreamsEvents.q(opts.get("protocol")));
        taskLines.start(streams, Long.parseLong(opts.getOrDefault("poll-ms", "50")));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().startsWith("close")) {
            StreamsEvents.say("error", "\"command\":" + StreamsEvents.q(line.trim()) + ",\"message\":\"unknown command\"");
        }
        CloseOptions.GroupMembershipOperation op = line != null && line.trim().equals("close remain")
            ? CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP
            : CloseOptions.GroupMembershipOperation.LEAVE_GROUP;
        streams.close(CloseOptions.groupMembershipOperation(op).withTimeout(Duration.ofSeconds(30)));
        taskLines.closed();
        StreamsEvents.say("closed", "\"state\":" + StreamsEvents.q(streams.state().name()) + ",\"how\":"
            + StreamsEvents.q(op.name()));
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
                StreamsEvents.say("input", "\"partition\":" + m.partition() + ",\"offset\":" + m.offset()
                    + ",\"task\":" + StreamsEvents.q(context.taskId().toString())));
            context.forward(record);
        }
    }
}

/**
 * The JSON lines a Kafka Streams application prints for the one that drives it (this file's
 * StreamsRehearsalApp, and the test suite's CountStreamsApp, which is compiled with this file).
 *
 * Rules:
 * - one JSON object per line on stdout, each with "event" and "t" (System.nanoTime(),
 *   CLOCK_MONOTONIC on Linux: the driver compares times across processes), flushed at once;
 *   lines never interleave (say is synchronized);
 * - "state" lines are KafkaStreams state transitions; "fatal" an uncaught exception in a stream
 *   thread, after which the client shuts down (watch);
 * - "tasks" lines (TaskLines): the instance's active tasks (and standby tasks, when asked) as
 *   its stream threads see them, polled and printed on change; "prev_t" is when the poll
 *   before started, the last instant the previous line's sets were seen whole. None is
 *   printed once the client is closed.
 */
final class StreamsEvents {
    private StreamsEvents() {
    }

    /** "--name value" pairs, without the dashes. */
    static Map<String, String> options(String[] argv) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        return opts;
    }

    /** "state" lines for the client's transitions; "fatal" and SHUTDOWN_CLIENT for an uncaught exception. */
    static void watch(KafkaStreams streams) {
        streams.setStateListener((now, before) ->
            say("state", "\"state\":" + q(now.name()) + ",\"from\":" + q(before.name())));
        streams.setUncaughtExceptionHandler(e -> {
            say("fatal", "\"error\":" + q(e.getClass().getName()) + ",\"message\":" + q(String.valueOf(e.getMessage())));
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    }

    /** The local threads' task sets, printed as "tasks" lines whenever they change. */
    static final class TaskLines {
        private final boolean withStandby;
        private final String none;
        private String last;
        private long lastPoll = System.nanoTime();
        private boolean closed;

        TaskLines(boolean withStandby) {
            this.withStandby = withStandby;
            this.none = withStandby ? "\"active\":[],\"standby\":[]" : "\"active\":[]";
            this.last = none;
        }

        /** Poll every ``everyMs`` on a daemon thread. */
        void start(KafkaStreams streams, long everyMs) {
            Thread poller = new Thread(() -> poll(streams, everyMs), "task-poller");
            poller.setDaemon(true);
            poller.start();
        }

        private void poll(KafkaStreams streams, long everyMs) {
            while (true) {
                long pollStart = System.nanoTime();
                try {
                    TreeSet<String> active = new TreeSet<>();
                    TreeSet<String> standby = new TreeSet<>();
                    for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                        for (TaskMetadata task : thread.activeTasks()) {
                            active.add(task.taskId().toString());
                        }
                        for (TaskMetadata task : thread.standbyTasks()) {
                            standby.add(task.taskId().toString());
                        }
                    }
                    observed("\"active\":" + strings(active) + (withStandby ? ",\"standby\":" + strings(standby) : ""),
                        pollStart);
                } catch (RuntimeException e) {
                    // metadataForLocalThreads() throws once the client is neither running nor
                    // rebalancing (closing, failed): it holds no task the driver could count on.
                    observed(none, pollStart);
                }
                try {
                    Thread.sleep(everyMs);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /** The client is closed: its last poll was the last sight of its tasks; no poll counts after. */
        synchronized void closed() {
            observed(none, System.nanoTime());
            closed = true;
        }

        /** One poll's sets: a "tasks" line if they changed; prev_t is the previous poll's start. */
        private synchronized void observed(String tasks, long pollStart) {
            if (closed) {
                return;
            }
            if (!tasks.equals(last)) {
                say("tasks", tasks + ",\"prev_t\":" + lastPoll);
                last = tasks;
            }
            lastPoll = pollStart;
        }
    }

    /** A JSON array of the strings, in the collection's order. */
    static String strings(Collection<String> items) {
        List<String> quoted = new ArrayList<>();
        items.forEach(s -> quoted.add(q(s)));
        return "[" + String.join(",", quoted) + "]";
    }

    /** A JSON string. */
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
