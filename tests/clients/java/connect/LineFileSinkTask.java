import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collection;
import java.util.Map;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/** The task of LineFileSinkConnector: each put() appends its records' values in one write. */
public class LineFileSinkTask extends SinkTask {
    private Path file;

    @Override public void start(Map<String, String> props) { file = Path.of(props.get("file")); }

    @Override public void put(Collection<SinkRecord> records) {
        if (records.isEmpty()) {
            return;
        }
        StringBuilder lines = new StringBuilder();
        for (SinkRecord r : records) {
            lines.append(r.value()).append('\n');
        }
        try {
            // Written before put() returns, so the offsets Connect commits after it cover only
            // lines already in the file.
            Files.writeString(file, lines, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new ConnectException("appending to " + file, e);
        }
    }

    @Override public void stop() { }

    @Override public String version() { return "kcoord-test"; }
}
