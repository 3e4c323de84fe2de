import { Kafka } from 'kafkajs';
import type { Logger } from '../../observability/logger.ts';
import { OpenTransactionError, TopicLog } from '../../sinks/kafka/kafka-log-reader.ts';
import { type KafkaClientSettings, kafkaClientConfig } from '../../sinks/kafka/kafka-sink.ts';
import { oauthTokens } from '../../sinks/kafka/oauth-token.ts';
import { type OffsetsEntry, parseOffsetsKey } from './offsets.ts';

/**
 * The records of a distributed Kafka Connect worker's offsets topic (offset.storage.topic,
 * `connect-offsets` by default: compacted, 25 partitions), read whole with the relay's Kafka
 * connection options: for each Debezium key, its latest record (all records of a key are in one
 * partition, so the highest offset is the latest); a null value is a tombstone (the offsets were
 * reset). Keys that are not a Debezium source partition (other connectors) are left out.
 *
 * Each partition is read once every transaction written to it is decided (TopicLog.decidedBounds):
 * a worker with exactly-once source support writes its offsets in transactions, and one left open
 * (a worker killed mid-transaction, until its coordinator aborts it) holds the last stable offset
 * below records committed after it — a read up to it would take an older offset for the latest,
 * and the cutover would publish again events Debezium had published.
 */
/**
 * How long a read waits for an open transaction on the offsets topic: Kafka Connect's producers
 * keep the client default transaction.timeout.ms (60 s), and a broker checks for timed-out
 * transactions every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms).
 */
export const OPEN_TRANSACTION_WAIT_MS = 75_000;

export async function readOffsetsTopic(
  c: KafkaClientSettings,
  topic: string,
  log: Logger,
): Promise<OffsetsEntry[]> {
  const kafka = new Kafka(kafkaClientConfig(c, oauthTokens(c), log));
  let reader: TopicLog;
  try {
    reader = await TopicLog.open(kafka, topic);
  } catch (e) {
    throw new Error(
      `cannot read the offsets topic ${topic} (the distributed worker's offset.storage.topic): ${(e as Error).message}`,
      { cause: e },
    );
  }
  try {
    const latest = new Map<string, OffsetsEntry>();
    for (const { partitionId } of reader.partitions) {
      const { earliest, stable } = await reader.decidedBounds(partitionId, {
        timeoutMs: OPEN_TRANSACTION_WAIT_MS,
        onWait: (at, end) =>
          log.info(
            { topic, partition: partitionId, stable: at, end },
            'the offsets topic has an open transaction (a Kafka Connect worker writing offsets, or one killed mid-transaction); waiting for it to end before reading the offsets',
          ),
      });
      await reader.scan(partitionId, earliest, stable, (r) => {
        const key = r.key?.toString('utf8') ?? '';
        const parts = parseOffsetsKey(key);
        if (!parts) return;
        latest.set(key, {
          ...parts,
          value: r.value === null ? null : r.value.toString('utf8'),
          where: `topic ${topic} partition ${partitionId} offset ${r.offset}`,
        });
      });
    }
    return [...latest.values()];
  } catch (e) {
    if (e instanceof OpenTransactionError)
      throw new Error(
        `${e.message}. Stop the Kafka Connect connector (and any worker still writing to ${topic}), then run migrate again`,
      );
    throw e;
  } finally {
    await reader.close();
  }
}
