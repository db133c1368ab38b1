import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/** The task of LineFileSourceConnector: polls the file every 100 ms for lines past its position. */
public class LineFileSourceTask extends SourceTask {
    private String file;
    private String topic;
    private Map<String, String> partition;
    private long position;

    @Override public void start(Map<String, String> props) {
        file = props.get("file");
        topic = props.get("topic");
        partition = Map.of("file", file);
        Map<String, Object> stored = context.offsetStorageReader().offset(partition);
        position = stored == null ? 0L : ((Number) stored.get("position")).longValue();
    }

    @Override public List<SourceRecord> poll() throws InterruptedException {
        List<SourceRecord> records = new ArrayList<>();
        try (RandomAccessFile in = new RandomAccessFile(file, "r")) {
            if (in.length() > position) {
                in.seek(position);
                byte[] rest = new byte[(int) Math.min(in.length() - position, 1 << 20)];
                in.readFully(rest);
                int start = 0;
                for (int i = 0; i < rest.length; i++) {
                    if (rest[i] != '\n') {
                        continue;
                    }
                    String line = new String(rest, start, i - start, StandardCharsets.UTF_8);
                    long next = position + i + 1;
                    records.add(new SourceRecord(partition, Map.of("position", next), topic, null,
                            null, null, Schema.STRING_SCHEMA, line));
                    start = i + 1;
                }
                position += start;  // an unfinished last line waits for its newline
            }
        } catch (IOException e) {
            throw new ConnectException("reading " + file + " at byte " + position, e);
        }
        if (records.isEmpty()) {
            Thread.sleep(100);  // Connect calls poll() in a loop: this paces it
            return null;
        }
        return records;
    }

    @Override public void stop() { }

    @Override public String version() { return "kcoord-test"; }
}
