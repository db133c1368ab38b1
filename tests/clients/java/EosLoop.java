import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A consume-transform-produce loop (kafka-clients 4.3) stepped by the test harness, one command
 * per stdin line, so the harness can check the group's offsets between the steps (issue 16).
 *
 * Rules: the offsets go into the transaction with
 * KafkaProducer.sendOffsetsToTransaction(offsets, consumer.groupMetadata()) (KIP-447: the
 * coordinator checks the member id, generation / member epoch and instance id of the
 * consumer that read the input); the consumer reads read_committed and never commits by
 * itself. Every command answers exactly one JSON line on stdout: {"ok": CMD, ...} or
 * {"error": CMD, "exception": SIMPLE_CLASS_NAME, "message": ...}, so a fenced producer
 * (ProducerFencedException) is an answer, not a crash. After a fatal producer error the harness
 * may still close the program.
 *
 * Commands:
 *   consume N   poll until N more records arrived (60 s bound); answers their offsets
 *   begin       beginTransaction()
 *   produce     send each record consumed since the last rewind/offsets, upper-cased, to --output
 *   offsets     sendOffsetsToTransaction(next offset per consumed partition, groupMetadata())
 *   commit      commitTransaction()          abort   abortTransaction()
 *   rewind      seek every assigned partition to its committed offset (or the beginning), as an
 *               application does after an abort, and forget the consumed records
 *   close       close producer and consumer, exit 0 (also on stdin EOF)
 *
 * Usage: EosLoop --bootstrap H:P --input T --output T --group G --txn-id ID
 *   [--group-protocol classic|consumer] [--txn-timeout-ms N] [--client-id ID]
 */
public class EosLoop {
    private final KafkaConsumer<String, String> consumer;
    private final KafkaProducer<String, String> producer;
    private final String output;
    private final List<ConsumerRecord<String, String>> pending = new ArrayList<>();
    private final Map<TopicPartition, OffsetAndMetadata> nextOffsets = new HashMap<>();

    EosLoop(Map<String, String> opts) {
        String bootstrap = opts.get("bootstrap");
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, opts.get("group"));
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, opts.getOrDefault("group-protocol", "classic"));
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, opts.getOrDefault("client-id", "eos-loop") + "-consumer");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (!"consumer".equals(opts.get("group-protocol"))) {
            // Classic only (KIP-848 moves these to the coordinator): short, like the other drivers.
            c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, opts.get("txn-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, opts.getOrDefault("txn-timeout-ms", "60000"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, opts.getOrDefault("client-id", "eos-loop") + "-producer");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        // Bounded blocking calls: a coordinator that never answers fails the command, not the test run.
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        consumer = new KafkaConsumer<>(c);
        producer = new KafkaProducer<>(p);
        output = opts.get("output");
        consumer.subscribe(List.of(opts.get("input")));
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            opts.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        EosLoop loop = new EosLoop(opts);
        try {
            loop.producer.initTransactions();
            answer("{\"ok\":\"init\"}");
        } catch (RuntimeException e) {
            answer(error("init", e));
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
            String[] words = line.trim().split("\\s+");
            try {
                answer(loop.run(words));
            } catch (RuntimeException e) {
                answer(error(words[0], e));
            }
        }
        loop.producer.close(Duration.ofSeconds(5));
        loop.consumer.close(Duration.ofSeconds(5));
        answer("{\"ok\":\"close\"}");
    }

    private String run(String[] words) {
        switch (words[0]) {
            case "consume": return consume(Integer.parseInt(words[1]));
            case "begin": producer.beginTransaction(); break;
            case "produce":
                for (ConsumerRecord<String, String> r : pending) {
                    producer.send(new ProducerRecord<>(output, r.key(), r.value().toUpperCase()));
                }
                producer.flush();
                pending.clear();
                break;
            case "offsets": {
                ConsumerGroupMetadata meta = consumer.groupMetadata();
                producer.sendOffsetsToTransaction(new HashMap<>(nextOffsets), meta);
                return "{\"ok\":\"offsets\",\"offsets\":" + json(nextOffsets) + ",\"generation\":"
                    + meta.generationId() + ",\"member\":\"" + meta.memberId() + "\"}";
            }
            case "commit": producer.commitTransaction(); break;
            case "abort": producer.abortTransaction(); break;
            case "rewind": {
                var assigned = consumer.assignment();
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(30));
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata o = committed.get(tp);
                    if (o == null) {
                        consumer.seekToBeginning(List.of(tp));
                    } else {
                        consumer.seek(tp, o.offset());
                    }
                }
                pending.clear();
                nextOffsets.clear();
                return "{\"ok\":\"rewind\",\"committed\":" + json(committed) + "}";
            }
            default: throw new IllegalArgumentException("unknown command " + words[0]);
        }
        return "{\"ok\":\"" + words[0] + "\"}";
    }

    private String consume(int n) {
        List<Long> offsets = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (offsets.size() < n) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("only " + offsets.size() + " of " + n + " records within 60 s");
            }
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                pending.add(r);
                offsets.add(r.offset());
                nextOffsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
        }
        return "{\"ok\":\"consume\",\"count\":" + offsets.size() + ",\"offsets\":" + offsets + "}";
    }

    private static String json(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Long> out = new LinkedHashMap<>();
        offsets.forEach((tp, o) -> out.put(String.valueOf(tp.partition()), o == null ? -1L : o.offset()));
        StringBuilder sb = new StringBuilder("{");
        out.forEach((k, v) -> sb.append(sb.length() > 1 ? "," : "").append('"').append(k).append("\":").append(v));
        return sb.append('}').toString();
    }

    private static String error(String cmd, Throwable e) {
        Throwable root = e;
        // Java wraps the broker's error (e.g. KafkaException caused by ProducerFencedException): name the cause.
        while (root.getCause() != null && root.getClass() == org.apache.kafka.common.KafkaException.class) {
            root = root.getCause();
        }
        String message = String.valueOf(e.getMessage()).replace("\\", "\\\\").replace("\"", "'").replace("\n", " ");
        return "{\"error\":\"" + cmd + "\",\"exception\":\"" + root.getClass().getSimpleName()
            + "\",\"outer\":\"" + e.getClass().getSimpleName() + "\",\"message\":\"" + message + "\"}";
    }

    private static void answer(String json) {
        System.out.println(json);
        System.out.flush();
    }
}
