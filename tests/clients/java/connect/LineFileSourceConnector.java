import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.source.SourceConnector;

/**
 * A test source connector: every complete line appended to --file becomes one record (a
 * string value) on --topic, in order. Kafka 4.4 no longer ships a plain source/sink pair that
 * runs on its own runtime (connect-file 4.4.0 is not served here, and connect-file 4.3.x calls
 * org.apache.kafka.common.utils.AppInfoParser, which kafka-clients 4.4 moved), so the Connect
 * tests bring their own: found on the worker's classpath, no plugin.path.
 *
 * Rules: one task whatever tasks.max says (one file, one reader); the task's source offset is
 * the byte position after the last line it emitted, so a restarted task resumes after it.
 */
public class LineFileSourceConnector extends SourceConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to read lines from")
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic to write them to");

    private Map<String, String> props;

    @Override public void start(Map<String, String> props) {
        CONFIG.parse(props);  // a missing file or topic fails the connector, not its task
        this.props = props;
    }

    @Override public Class<? extends Task> taskClass() { return LineFileSourceTask.class; }

    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }

    @Override public void stop() { }

    @Override public ConfigDef config() { return CONFIG; }

    @Override public String version() { return "kcoord-test"; }
}
