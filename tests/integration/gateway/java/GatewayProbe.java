// Java kafka-clients 4.3 through the gateway: ApiVersions (with features) parsed by the
// Java client, admin calls, and an idempotent producer. Prints one line per fact.
// Usage: java -cp 'jars/*' GatewayProbe.java BOOTSTRAP TOPIC
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.StringSerializer;

public class GatewayProbe {
    public static void main(String[] a) throws Exception {
        String bs = a[0], topic = a[1];
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bs))) {
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            System.out.println("finalized=" + f.finalizedFeatures());
            System.out.println("supported=" + f.supportedFeatures());
            System.out.println("nodes=" + admin.describeCluster().nodes().get());
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            System.out.println("describe=" + admin.describeTopics(List.of(topic)).allTopicNames().get());
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            for (int i = 0; i < 5; i++) System.out.println("sent " + pr.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get());
        }
    }
}
