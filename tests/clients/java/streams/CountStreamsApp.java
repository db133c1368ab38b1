import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.StreamsMetadata;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * A stateful Kafka Streams 4.4 application for the streams-group tests (KIP-1071,
 * group.protocol=streams by default): it counts the values of --input (String keys and
 * values) per value, with a repartition (groupBy the value) and a changelog (the "counts"
 * store), and writes "value -> count" (count as a decimal string) to --output. Two
 * subtopologies: 0 reads --input and writes the repartition topic, 1 counts and writes --output.
 * With --subtopologies 3 (the rebalance benchmark's workload), subtopology 1 also re-keys each
 * count by the count, and a third subtopology counts those ("count-frequencies" store, its own
 * repartition topic and changelog) and writes "count -> how many values have it" to --output.
 *
 * Rules:
 * - stdout carries one JSON object per line, each with "event" and "t" (System.nanoTime(),
 *   CLOCK_MONOTONIC on Linux: the harness compares times across processes); the log goes to stderr.
 *   The lines are printed by StreamsEvents, the helper kcoord ships with its Streams rehearsal
 *   (migration/rehearse/java/streams/StreamsEvents.java; support.java compiles it with this file).
 * - "active" lines ("phase" "open" or "close", "task") are an active task's own lifetime on this
 *   instance, printed by StreamsEvents.ActiveLife, one in each subtopology: StreamsEvents' rules
 *   say when each is printed and why the instance surely owned the task between the two.
 * - "tasks" lines say the instance's active and standby tasks as its stream threads see them
 *   (KafkaStreams.metadataForLocalThreads(), polled every --poll-ms, printed on change). A
 *   thread's metadata is refreshed only when the thread enters RUNNING
 *   (StreamThread.setState), so a revoked task stays in it until the next assignment is running:
 *   these lines say what the instance runs once stable, not when a task changed hands. "prev_t"
 *   is when the poll before this one started.
 * - "state" lines are KafkaStreams state transitions; "restore" lines are StateRestoreListener
 *   calls (start: the offsets the restore starts and ends at; end: records restored).
 * - stdin commands, one per line, each answered by one line: "metadata" (every client's
 *   interactive-query metadata, metadataForAllStreamsClients()), "key K" (queryMetadataForKey of
 *   the counts store), "describe" (Admin.describeStreamsGroups of the application id);
 *   "close", "close leave", "close remain" or EOF close the client (CloseOptions' DEFAULT,
 *   LEAVE_GROUP, REMAIN_IN_GROUP; 30 s bound), then print "closed" and exit 0.
 * - An uncaught exception in a stream thread prints "fatal" and shuts the client down.
 *
 * Usage: CountStreamsApp --bootstrap H:P --app-id ID --input T --output T --state-dir DIR
 *   [--protocol streams|classic] [--guarantee at_least_once|exactly_once_v2] [--instance-id ID]
 *   [--app-server HOST:PORT] [--standbys N] [--commit-ms MS] [--poll-ms MS] [--name NAME]
 *   [--batch-size BYTES] (the producer's batch.size) [--subtopologies 2|3] (2 by default)
 *   [--zone Z] (client.tag.zone: the instance's ClientTags, for zone-aware standbys)
 *   [--gap-ms MS] ("gap" lines for processing pauses over MS: StreamsEvents' rules)
 */
public class CountStreamsApp {
    static final String STORE = "counts";
    static final String FREQUENCIES = "count-frequencies";

    public static void main(String[] argv) throws Exception {
        StreamsEvents.TaskLines taskLines = new StreamsEvents.TaskLines(true);
        Map<String, String> opts = StreamsEvents.options(argv);
        String appId = opts.get("app-id");
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("protocol", "streams"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.getOrDefault("guarantee", "at_least_once"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        p.put(StreamsConfig.CLIENT_ID_CONFIG, opts.getOrDefault("name", appId));
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, opts.getOrDefault("commit-ms", "200"));
        // The classic protocol reads it; a streams group takes streams.num.standby.replicas from
        // the group's configuration (KIP-1071), which the harness sets.
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, opts.getOrDefault("standbys", "0"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (opts.containsKey("app-server")) {
            p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, opts.get("app-server"));
        }
        if (opts.containsKey("instance-id")) {
            p.put(StreamsConfig.consumerPrefix("group.instance.id"), opts.get("instance-id"));
        }
        if (opts.containsKey("zone")) {
            p.put(StreamsConfig.clientTagPrefix("zone"), opts.get("zone"));
        }
        if (opts.containsKey("batch-size")) {
            // 0: one record per batch (Tansu's ListOffsets LATEST is the last batch's base
            // offset + 1, so a changelog restore would stop short of multi-record batches).
            p.put(StreamsConfig.producerPrefix("batch.size"), opts.get("batch-size"));
        }
        if (opts.getOrDefault("guarantee", "").startsWith("exactly_once")) {
            // A killed instance's open transaction is aborted by the coordinator's timeout.
            p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");
        }

        if (opts.containsKey("gap-ms")) {
            StreamsEvents.gapNs = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(opts.get("gap-ms")));
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, Long> counted = builder.<String, String>stream(opts.get("input"))
            .processValues(StreamsEvents.ActiveLife<String, String>::new)
            .groupBy((key, value) -> value, Grouped.as("by-value"))
            .count(Materialized.as(STORE))
            .toStream()
            .processValues(StreamsEvents.ActiveLife<String, Long>::new);
        counted.mapValues(String::valueOf).to(opts.get("output"));
        if (opts.getOrDefault("subtopologies", "2").equals("3")) {
            // The benchmark's third subtopology (bench/bench_streams_rebalance.py): the counts
            // re-keyed by their value and counted again ("how many values have this count"),
            // through a second repartition topic and changelog; written to --output too.
            counted.selectKey((value, count) -> String.valueOf(count))
                // the counts are Longs: the repartition needs their serde, not the default String one
                .groupByKey(Grouped.<String, Long>as("by-count").withValueSerde(Serdes.Long()))
                .count(Materialized.as(FREQUENCIES))
                .toStream()
                .processValues(StreamsEvents.ActiveLife<String, Long>::new)
                .mapValues(String::valueOf)
                .to(opts.get("output"));
        } else if (opts.containsKey("subtopologies") && !opts.get("subtopologies").equals("2")) {
            throw new IllegalArgumentException("--subtopologies must be 2 or 3, not " + opts.get("subtopologies"));
        }
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        StreamsEvents.watch(streams);
        streams.setGlobalStateRestoreListener(new Restores());
        streams.start();
        say("ready", "\"app\":" + q(appId));
        taskLines.start(streams, Long.parseLong(opts.getOrDefault("poll-ms", "50")));

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        try (Admin admin = Admin.create(ap)) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null && !line.trim().startsWith("close")) {
                answer(line.trim(), streams, admin, appId);
            }
            String how = line == null ? "close" : line.trim();
            CloseOptions.GroupMembershipOperation op = how.equals("close leave")
                ? CloseOptions.GroupMembershipOperation.LEAVE_GROUP
                : how.equals("close remain") ? CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP
                : CloseOptions.GroupMembershipOperation.DEFAULT;
            streams.close(CloseOptions.groupMembershipOperation(op).withTimeout(Duration.ofSeconds(30)));
        }
        taskLines.closed();
        say("closed", "\"state\":" + q(streams.state().name()));
    }

    static void answer(String command, KafkaStreams streams, Admin admin, String appId) {
        try {
            if (command.equals("metadata")) {
                say("metadata", "\"clients\":" + clients(streams.metadataForAllStreamsClients()));
            } else if (command.startsWith("key ")) {
                KeyQueryMetadata m = streams.queryMetadataForKey(STORE, command.substring(4),
                    Serdes.String().serializer());
                List<String> standbys = new ArrayList<>();
                m.standbyHosts().forEach(h -> standbys.add(h.host() + ":" + h.port()));
                say("key", "\"key\":" + q(command.substring(4)) + ",\"partition\":" + m.partition()
                    + ",\"active\":" + q(m.activeHost().host() + ":" + m.activeHost().port())
                    + ",\"standby\":" + strings(new TreeSet<>(standbys)));
            } else if (command.equals("describe")) {
                StreamsGroupDescription d = admin.describeStreamsGroups(List.of(appId)).all()
                    .get(15, TimeUnit.SECONDS).get(appId);
                say("describe", describe(d));
            } else {
                say("error", "\"command\":" + q(command) + ",\"message\":\"unknown command\"");
            }
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            say("error", "\"command\":" + q(command) + ",\"error\":" + q(cause.getClass().getName())
                + ",\"message\":" + q(String.valueOf(cause.getMessage())));
        }
    }

    static String clients(Collection<StreamsMetadata> all) {
        List<String> out = new ArrayList<>();
        for (StreamsMetadata m : all) {
            out.add("{\"host\":" + q(m.host() + ":" + m.port()) + ",\"stores\":" + strings(new TreeSet<>(m.stateStoreNames()))
                + ",\"active\":" + partitions(m.topicPartitions()) + ",\"standby\":" + partitions(m.standbyTopicPartitions())
                + "}");
        }
        return "[" + String.join(",", out) + "]";
    }

    static String describe(StreamsGroupDescription d) {
        List<String> members = new ArrayList<>();
        for (StreamsGroupMemberDescription m : d.members()) {
            String endpoint = m.userEndpoint().map(e -> q(e.host() + ":" + e.port())).orElse("null");
            members.add("{\"member\":" + q(m.memberId()) + ",\"epoch\":" + m.memberEpoch()
                + ",\"instance\":" + m.instanceId().map(CountStreamsApp::q).orElse("null")
                + ",\"process\":" + q(m.processId()) + ",\"client\":" + q(m.clientId())
                + ",\"endpoint\":" + endpoint
                + ",\"active\":" + tasks(m.assignment().activeTasks())
                + ",\"standby\":" + tasks(m.assignment().standbyTasks())
                + ",\"warmup\":" + tasks(m.assignment().warmupTasks())
                + ",\"target_active\":" + tasks(m.targetAssignment().activeTasks())
                + ",\"target_standby\":" + tasks(m.targetAssignment().standbyTasks()) + "}");
        }
        return "\"group\":" + q(d.groupId()) + ",\"state\":" + q(d.groupState().name())
            + ",\"epoch\":" + d.groupEpoch() + ",\"target_epoch\":" + d.targetAssignmentEpoch()
            + ",\"topology_epoch\":" + d.topologyEpoch() + ",\"members\":[" + String.join(",", members) + "]";
    }

    /** Task ids as Streams prints them: "<subtopology>_<partition>". */
    static String tasks(List<StreamsGroupMemberAssignment.TaskIds> ids) {
        TreeSet<String> out = new TreeSet<>();
        for (StreamsGroupMemberAssignment.TaskIds t : ids) {
            for (int partition : t.partitions()) {
                out.add(t.subtopologyId() + "_" + partition);
            }
        }
        return strings(out);
    }

    static String partitions(Collection<TopicPartition> tps) {
        TreeSet<String> out = new TreeSet<>();
        tps.forEach(tp -> out.add(tp.topic() + ":" + tp.partition()));
        return strings(out);
    }

    static String strings(Collection<String> items) {
        return StreamsEvents.strings(items);
    }

    static String q(String s) {
        return StreamsEvents.q(s);
    }

    static void say(String event, String fields) {
        StreamsEvents.say(event, fields);
    }

    static final class Restores implements StateRestoreListener {
        @Override
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
            say("restore", "\"phase\":\"start\",\"store\":" + q(store) + ",\"partition\":" + q(tp.topic() + ":" + tp.partition())
                + ",\"from\":" + start + ",\"to\":" + end);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long restored) {
        }

        @Override
        public void onRestoreEnd(TopicPartition tp, String store, long restored) {
            say("restore", "\"phase\":\"end\",\"store\":" + q(store) + ",\"partition\":" + q(tp.topic() + ":" + tp.partition())
                + ",\"restored\":" + restored);
        }
    }
}
