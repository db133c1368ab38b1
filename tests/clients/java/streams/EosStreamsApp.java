import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

/**
 * A Kafka Streams 4.3 application with processing.guarantee=exactly_once_v2 (KIP-447): it
 * upper-cases every record of --input into --output. Each commit is one producer transaction
 * holding the outputs and, through sendOffsetsToTransaction with the consumer's group
 * metadata, the input offsets (TxnOffsetCommit, issue 16).
 *
 * Rules: stdout carries one line per state change ("state RUNNING", ...) and "closed" at the
 * end; stdin EOF or the line "close" closes the application (30 s bound) and exits 0. An
 * uncaught exception in a stream thread prints "fatal CLASS MESSAGE" and shuts the client
 * down, so the harness sees the error instead of a silent stall.
 *
 * Usage: EosStreamsApp --bootstrap H:P --app-id ID --input T --output T [--state-dir DIR]
 */
public class EosStreamsApp {
    public static void main(String[] argv) throws Exception {
        java.util.Map<String, String> opts = new java.util.HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        // Commit (one transaction) every 200 ms (EOS default 100 ms) and keep the group
        // settling fast: the test's input is small.
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATE_DIR_CONFIG, opts.getOrDefault("state-dir", System.getProperty("java.io.tmpdir")));
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // A producer whose kcoord restarts must not time its transaction out meanwhile.
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "30000");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(opts.get("input"))
            .mapValues(v -> v == null ? null : v.toUpperCase())
            .to(opts.get("output"));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> say("state " + now));
        streams.setUncaughtExceptionHandler(e -> {
            say("fatal " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
            // nothing else to do: the harness only closes
        }
        streams.close(Duration.ofSeconds(30));
        say("closed");
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
