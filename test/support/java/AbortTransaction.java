import java.util.List;
import java.util.OptionalInt;
import java.util.Properties;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.common.TopicPartition;

/**
 * What `kafka-transactions.sh --bootstrap-server B abort --topic T --partition P --start-offset S`
 * does (Kafka's TransactionsCommand, in the kafka-tools artifact the broker's jars do not bring):
 * DescribeProducers on the partition, the producer whose open transaction starts at S, then
 * Admin.abortTransaction (WriteTxnMarkers to the partition's leader). Prints the producer aborted.
 * Run as a single-file program: java -cp 'libs/*' AbortTransaction.java B T P S
 */
public class AbortTransaction {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1];
    int partition = Integer.parseInt(args[2]);
    long startOffset = Long.parseLong(args[3]);
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    TopicPartition tp = new TopicPartition(topic, partition);
    try (Admin admin = Admin.create(p)) {
      List<ProducerState> producers =
          admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
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
