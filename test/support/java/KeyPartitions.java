import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own Java producer (default partitioner, as every Java service beside the relay uses
 * it) sends one record per key to TOPIC and prints "index<TAB>partition" for each, the partition
 * being the one the broker acknowledged. Keys: one per line of KEYS_FILE, hex-encoded UTF-8 (so
 * any key survives the file). Run as a single-file program: java -cp 'libs/*' KeyPartitions.java …
 */
public class KeyPartitions {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1];
    List<String> lines = Files.readAllLines(Path.of(args[2]), StandardCharsets.US_ASCII);
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("acks", "all");
    p.put("enable.idempotence", "true");
    p.put("linger.ms", "5");
    p.put("key.serializer", ByteArraySerializer.class.getName());
    p.put("value.serializer", ByteArraySerializer.class.getName());
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      List<Future<RecordMetadata>> sent = new ArrayList<>();
      for (String hex : lines) {
        byte[] key = java.util.HexFormat.of().parseHex(hex);
        sent.add(producer.send(new ProducerRecord<>(topic, key, key)));
      }
      StringBuilder out = new StringBuilder();
      for (int i = 0; i < sent.size(); i++) out.append(i).append('\t').append(sent.get(i).get().partition()).append('\n');
      System.out.print(out);
    }
  }
}
