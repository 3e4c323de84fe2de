// The RabbitMQ ceiling of the bulk drain (bench/trivial-producers.ts): RabbitMQ's own Java client
// (com.rabbitmq:amqp-client) doing nothing but publish relay-shaped messages (a VALUE_BYTES body,
// the relay's five headers, message_id, content type, type and timestamp) with the relay's
// acknowledgement rule — publisher confirms, persistent (delivery mode 2), mandatory, a returned
// message counting as a failure — and at most WINDOW unconfirmed, as --rabbitmq-max-unconfirmed.
// No database, no routing, no per-key order: what the broker allows on this machine.
// One long-lived process (a warm JVM for every round): "run N" on stdin publishes N messages and
// waits for every confirm, then prints "done <seconds>" (or "failed <why>"); EOF exits.
//   java -cp '<amqp-client libs>/*' bench/RabbitTrivialProducer.java URI EXCHANGE ROUTING_KEY WINDOW VALUE_BYTES
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Date;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

public class RabbitTrivialProducer {
  public static void main(String[] args) throws Exception {
    ConnectionFactory f = new ConnectionFactory();
    f.setUri(args[0]);
    String exchange = args[1];
    String routingKey = args[2];
    int window = Integer.parseInt(args[3]);
    int valueBytes = Integer.parseInt(args[4]);
    Connection conn = f.newConnection("rabbit-trivial-producer");
    Channel ch = conn.createChannel();
    ch.confirmSelect();
    Semaphore slots = new Semaphore(window);
    // Delivery tags awaiting their confirm (an ack or nack may cover every tag up to it).
    ConcurrentSkipListSet<Long> unconfirmed = new ConcurrentSkipListSet<>();
    AtomicReference<String> failure = new AtomicReference<>();
    AtomicLong returned = new AtomicLong();
    ch.addReturnListener(r -> returned.incrementAndGet());
    ch.addConfirmListener(
        (tag, multiple) -> release(unconfirmed, slots, tag, multiple),
        (tag, multiple) -> {
          failure.compareAndSet(null, "nacked " + tag);
          release(unconfirmed, slots, tag, multiple);
        });
    byte[] value = new byte[valueBytes];
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    System.out.println("ready");
    System.out.flush();
    for (String line; (line = in.readLine()) != null; ) {
      if (!line.startsWith("run ")) continue;
      int n = Integer.parseInt(line.substring(4).trim());
      returned.set(0);
      long start = System.nanoTime();
      for (int i = 0; i < n && failure.get() == null; i++) {
        Arrays.fill(value, (byte) 'x');
        byte[] digits = Integer.toString(i).getBytes(StandardCharsets.UTF_8);
        System.arraycopy(digits, 0, value, 0, Math.min(digits.length, valueBytes));
        String id = UUID.randomUUID().toString();
        Map<String, Object> headers = new HashMap<>();
        headers.put("id", id);
        headers.put("event_type", "BenchEvent");
        headers.put("aggregate_type", "Bulk");
        headers.put("aggregate_id", "agg-" + (i % 1000));
        headers.put("content-type", "application/octet-stream");
        AMQP.BasicProperties props =
            new AMQP.BasicProperties.Builder()
                .deliveryMode(2)
                .messageId(id)
                .contentType("application/octet-stream")
                .type("BenchEvent")
                .timestamp(new Date())
                .headers(headers)
                .build();
        slots.acquire();
        unconfirmed.add(ch.getNextPublishSeqNo());
        ch.basicPublish(exchange, routingKey, true, props, value);
      }
      slots.acquire(window); // every confirm is in
      slots.release(window);
      double seconds = (System.nanoTime() - start) / 1e9;
      if (failure.get() != null) System.out.println("failed " + failure.get());
      else if (returned.get() > 0) System.out.println("failed " + returned.get() + " returned (unroutable)");
      else System.out.println("done " + seconds);
      System.out.flush();
    }
    conn.close();
  }

  private static void release(ConcurrentSkipListSet<Long> unconfirmed, Semaphore slots, long tag, boolean multiple) {
    int n = 0;
    if (multiple) {
      for (Long t = unconfirmed.pollFirst(); t != null; t = unconfirmed.pollFirst()) {
        if (t > tag) {
          unconfirmed.add(t);
          break;
        }
        n++;
      }
    } else if (unconfirmed.remove(tag)) n = 1;
    slots.release(n);
  }
}
