// The Kafka floor of the live run (bench/kafka-floor.ts): Kafka's own Java producer, doing nothing
// but send, at a fixed rate, records shaped like the relay's (key agg-N, a 500-byte value, the
// relay's five headers), acks=all, idempotent, linger.ms=0. One long-lived process (a warm JVM,
// as the relay is a warm process): each "start" line on stdin begins a pass, paced from then on;
// "stop" ends it: flush, then one line per acked record, "<send time, ms since the epoch> <send
// → ack, ms>", then "end". EOF exits. Run with the broker's jars on the class path:
//   java -cp '<kafka libs>/*' bench/KafkaFloor.java BOOTSTRAP TOPIC RATE VALUE_BYTES
// Why not kafka-producer-perf-test: kafka-tools is not among the broker's jars (.cache/kafka), and
// it prints percentiles of the whole run, warm-up included; the live run's warm-up rule needs
// each record's time.
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class KafkaFloor {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    double rate = Double.parseDouble(args[2]);
    int valueBytes = Integer.parseInt(args[3]);
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    p.put("acks", "all");
    p.put("enable.idempotence", "true");
    p.put("linger.ms", "0");
    p.put("key.serializer", ByteArraySerializer.class.getName());
    p.put("value.serializer", ByteArraySerializer.class.getName());
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
    // stdin: "start" begins a pass, "stop" ends it (then its report and "end"); EOF exits.
    LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
    Thread stdin = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
        for (String line; (line = in.readLine()) != null; ) commands.put(line.trim());
      } catch (Exception e) {
        // closed either way
      }
      commands.add("eof");
    });
    stdin.setDaemon(true);
    stdin.start();
    int cap = 1 << 22;
    long[] sent = new long[cap];
    long[] acked = new long[cap];
    long interval = (long) (1e9 / rate);
    byte[] type = "BenchEvent".getBytes(StandardCharsets.UTF_8);
    byte[] aggType = "Floor".getBytes(StandardCharsets.UTF_8);
    byte[] contentType = "application/octet-stream".getBytes(StandardCharsets.UTF_8);
    PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false);
    out.println("ready");
    out.flush();
    for (String cmd = commands.take(); !cmd.equals("eof"); cmd = commands.take()) {
      // "start" paces at the rate given at launch; "start RATE" at RATE (the rate the relay's
      // pass achieved: a floor at a heavier load than the relay carried is no floor).
      if (!cmd.equals("start") && !cmd.startsWith("start ")) continue;
      long pace = cmd.equals("start") ? interval : (long) (1e9 / Double.parseDouble(cmd.substring(6)));
      long originMs = System.currentTimeMillis();
      long start = System.nanoTime();
      int n = 0;
      for (; commands.isEmpty() && n < cap; n++) {
        long wait = start + n * pace - System.nanoTime();
        if (wait > 50_000) LockSupport.parkNanos(wait);
        byte[] key = ("agg-" + (n % 1000)).getBytes(StandardCharsets.UTF_8);
        byte[] value = new byte[valueBytes];
        Arrays.fill(value, (byte) 'x');
        byte[] digits = Integer.toString(n).getBytes(StandardCharsets.UTF_8);
        System.arraycopy(digits, 0, value, 0, Math.min(digits.length, valueBytes));
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, null, key, value);
        r.headers()
            .add("id", UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8))
            .add("event_type", type)
            .add("aggregate_type", aggType)
            .add("aggregate_id", key)
            .add("content-type", contentType);
        final int seq = n;
        acked[seq] = 0;
        sent[seq] = System.nanoTime();
        producer.send(r, (md, e) -> {
          if (e == null) acked[seq] = System.nanoTime();
        });
      }
      producer.flush();
      StringBuilder line = new StringBuilder(48);
      for (int i = 0; i < n; i++) {
        if (acked[i] == 0) continue;
        line.setLength(0);
        line.append(originMs + (sent[i] - start) / 1e6).append(' ').append((acked[i] - sent[i]) / 1e6).append('\n');
        out.append(line);
      }
      out.println("end");
      out.flush();
      if (commands.take().equals("eof")) break; // the "stop" that ended the pass
    }
    producer.close();
  }
}
