import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * A test sink connector: appends each record's value, one line per record, to --file. Its
 * task consumes `topics` in a classic consumer group "connect-<connector name>" (Connect's
 * default), which is what the Connect tests look at. See LineFileSourceConnector for why the
 * tests bring their own connectors. One task whatever tasks.max says (one file, one writer).
 */
public class LineFileSinkConnector extends SinkConnector {
    static final ConfigDef CONFIG = new ConfigDef()
            .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to append lines to");

    private Map<String, String> props;

    @Override public void start(Map<String, String> props) {
        CONFIG.parse(props);
        this.props = props;
    }

    @Override public Class<? extends Task> taskClass() { return LineFileSinkTask.class; }

    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }

    @Override public void stop() { }

    @Override public ConfigDef config() { return CONFIG; }

    @Override public String version() { return "kcoord-test"; }
}
