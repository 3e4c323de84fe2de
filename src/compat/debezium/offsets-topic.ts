import { Kafka } from 'kafkajs';
import type { Logger } from '../../observability/logger.ts';
import { TopicLog } from '../../sinks/kafka/kafka-log-reader.ts';
import { type KafkaClientSettings, kafkaClientConfig } from '../../sinks/kafka/kafka-sink.ts';
import { oauthTokens } from '../../sinks/kafka/oauth-token.ts';
import { type OffsetsEntry, parseOffsetsKey } from './offsets.ts';

/**
 * The records of a distributed Kafka Connect worker's offsets topic (offset.storage.topic,
 * `connect-offsets` by default: compacted, 25 partitions), read whole with the relay's Kafka
 * connection options: for each Debezium key, its latest record (all records of a key are in one
 * partition, so the highest offset is the latest); a null value is a tombstone (the offsets were
 * reset). Keys that are not a Debezium source partition (other connectors) are left out.
 */
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
      const { earliest, stable } = await reader.bounds(partitionId);
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
  } finally {
    await reader.close();
  }
}
