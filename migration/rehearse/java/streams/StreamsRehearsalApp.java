import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
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
 * - "active" lines ("phase" "open" or "close", "task"): each active task's own lifetime on this
 *   instance, from StreamsEvents.ActiveLife, one in each subtopology; between its "open" and its
 *   "close" the instance surely owned the task (StreamsEvents' rules say why). The rehearsal's
 *   "no task active twice" check is made of them.
 * - "tasks" lines: the instance's active tasks as its stream threads see them, polled every
 *   --poll-ms and printed on change ("prev_t": when the previous poll started). They lag a
 *   handover (StreamsEvents' rules), so the rehearsal uses them only to see a phase settled.
 * - "state" lines: KafkaStreams state transitions; "fatal": an uncaught exception (the client
 *   shuts down).
 * - stdin: "close leave" (CloseOptions LEAVE_GROUP: the member leaves at once) or "close remain"
 *   (REMAIN_IN_GROUP: the coordinator removes it when its session expires); EOF is "close leave".
 *   Each closes with a 30 s bound, then prints "closed" and exits 0.
 *
 * The JSON-line output, the task lifetimes and the task polling are StreamsEvents'
 * (StreamsEvents.java), which the test suite's Streams application
 * (tests/clients/java/streams/CountStreamsApp.java) compiles with and uses too, so both print
 * the same lines the same way.
 *
 * Usage: StreamsRehearsalApp --bootstrap H:P --app-id ID --input T --output T --state-dir DIR
 *   --protocol classic|streams [--guarantee at_least_once|exactly_once_v2] [--name NAME] [--commit-ms MS]
 *   [--poll-ms MS] [--session-timeout-ms MS]
 * Under exactly_once_v2 every commit is one producer transaction carrying the outputs, the
 * changelog and repartition records and the input offsets (TxnOffsetCommit, KIP-447); "input"
 * lines are printed when a record is processed, so a record of an aborted transaction is
 * printed again when Streams reprocesses it.
 */
public class StreamsRehearsalApp {
    public static void main(String[] argv) throws Exception {
        StreamsEvents.TaskLines taskLines = new StreamsEvents.TaskLines(false);
        Map<String, String> opts = StreamsEvents.options(argv);
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.get("protocol"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.getOrDefault("guarantee", "at_least_once"));
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
        if (opts.getOrDefault("guarantee", "").startsWith("exactly_once")) {
            // A killed instance's open transaction is aborted by the transaction coordinator
            // after this timeout (Kafka's default is 60 s), so the next phase is not held up
            // by it: read_committed consumers and EOS restores stop at its first record.
            p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");
        }

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(opts.get("input"))
            .processValues(StreamsEvents.ActiveLife<String, String>::new)
            .processValues(InputRecorder::new)
            .groupBy((key, value) -> value, Grouped.as("by-value"))
            .count(Materialized.as("counts"))
            .toStream()
            .processValues(StreamsEvents.ActiveLife<String, Long>::new)
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
