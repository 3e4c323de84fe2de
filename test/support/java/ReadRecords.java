import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka's own Java consumer reads every record of each TOPIC (COUNT of them, from the
 * beginning of each partition) and prints one line per record, in (partition, offset) order:
 * "topic<TAB>partition<TAB>offset<TAB>key<TAB>value<TAB>headers", keys, values, header names and
 * values hex-encoded ("-" for null), headers as name=value joined by ",". Then
 * "topic<TAB>bytes<TAB>N": the topic's size in the brokers' log directories (how much its
 * batches took once stored). Run as a single-file program:
 * java -cp 'libs/*' ReadRecords.java BOOTSTRAP COUNT TOPIC…
 */
public class ReadRecords {
  static String hex(byte[] b) {
    return b == null ? "-" : HexFormat.of().formatHex(b);
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    int count = Integer.parseInt(args[1]);
    StringBuilder out = new StringBuilder();
    for (int t = 2; t < args.length; t++) read(bootstrap, args[t], count, out);
    System.out.print(out);
  }

  static void read(String bootstrap, String topic, int count, StringBuilder out) throws Exception {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("enable.auto.commit", "false");
    p.put("key.deserializer", ByteArrayDeserializer.class.getName());
    p.put("value.deserializer", ByteArrayDeserializer.class.getName());
    p.put("check.crcs", "true");
    List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      List<TopicPartition> parts = new ArrayList<>();
      consumer.partitionsFor(topic).forEach(i -> parts.add(new TopicPartition(topic, i.partition())));
      consumer.assign(parts);
      consumer.seekToBeginning(parts);
      long deadline = System.currentTimeMillis() + 60_000;
      while (read.size() < count && System.currentTimeMillis() < deadline)
        consumer.poll(Duration.ofMillis(500)).forEach(read::add);
    }
    read.sort((a, b) -> a.partition() != b.partition() ? a.partition() - b.partition() : Long.compare(a.offset(), b.offset()));
    for (ConsumerRecord<byte[], byte[]> r : read) {
      List<String> hs = new ArrayList<>();
      for (Header h : r.headers()) hs.add(hex(h.key().getBytes(StandardCharsets.UTF_8)) + "=" + hex(h.value()));
      out.append(topic).append('\t').append(r.partition()).append('\t').append(r.offset()).append('\t').append(hex(r.key())).append('\t')
          .append(hex(r.value())).append('\t').append(String.join(",", hs)).append('\n');
    }
    long bytes = 0;
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      Set<Integer> nodes = new java.util.HashSet<>();
      admin.describeCluster().nodes().get().forEach(n -> nodes.add(n.id()));
      for (Map<String, LogDirDescription> dirs : admin.describeLogDirs(nodes).allDescriptions().get().values())
        for (LogDirDescription d : dirs.values())
          for (Map.Entry<TopicPartition, ReplicaInfo> e : d.replicaInfos().entrySet())
            if (e.getKey().topic().equals(topic)) bytes += e.getValue().size();
    }
    out.append(topic).append("\tbytes\t").append(bytes).append('\n');
  }
}
