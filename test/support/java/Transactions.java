import java.util.List;
import java.util.OptionalInt;
import java.util.Properties;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.common.TopicPartition;

/**
 * Two of `kafka-transactions.sh`'s commands (Kafka's TransactionsCommand, in the kafka-tools
 * artifact the broker's jars do not bring), through Kafka's own admin client:
 *
 *   describe B T P     DescribeProducers on partition P of topic T: one line per active producer
 *                      (id, epoch, the offset its open transaction starts at or -1, coordinator epoch)
 *   abort B T P S      what `abort --topic T --partition P --start-offset S` does: the producer whose
 *                      open transaction starts at S, then Admin.abortTransaction (WriteTxnMarkers to
 *                      the partition's leader); prints the producer aborted
 *
 * Run as a single-file program: java -cp 'libs/*' Transactions.java abort B T P S
 */
public class Transactions {
  public static void main(String[] args) throws Exception {
    String command = args[0], bootstrap = args[1], topic = args[2];
    TopicPartition tp = new TopicPartition(topic, Integer.parseInt(args[3]));
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    try (Admin admin = Admin.create(p)) {
      List<ProducerState> producers =
          admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
      if (command.equals("describe")) {
        for (ProducerState s : producers) {
          System.out.println(
              "producer " + s.producerId() + " epoch " + s.producerEpoch()
                  + " transaction start " + s.currentTransactionStartOffset().orElse(-1L)
                  + " coordinator epoch " + s.coordinatorEpoch().orElse(-1)
                  + " last sequence " + s.lastSequence() + " last timestamp " + s.lastTimestamp());
        }
        return;
      }
      long startOffset = Long.parseLong(args[4]);
      ProducerState open = null;
      for (ProducerState s : producers) {
        if (s.currentTransactionStartOffset().orElse(-1L) == startOffset) open = s;
      }
      if (open == null) {
        System.err.println("no transaction starts at offset " + startOffset + " of " + tp + ": " + producers);
        System.exit(2);
      }
      OptionalInt coordinatorEpoch = open.coordinatorEpoch();
      admin
          .abortTransaction(
              new AbortTransactionSpec(tp, open.producerId(), (short) open.producerEpoch(), coordinatorEpoch.orElse(0)))
          .all()
          .get();
      System.out.println("aborted producer " + open.producerId() + " epoch " + open.producerEpoch());
    }
  }
}
