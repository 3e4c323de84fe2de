/** Creating the bench's topics on a busy machine. */
import type { Admin } from 'kafkajs';

/**
 * A topic, once every partition has a leader. Not kafkajs' waitForLeaders: on a busy machine its
 * first metadata request can come before the broker knows the topic (UNKNOWN_TOPIC_OR_PARTITION),
 * which it does not retry.
 */
export async function createTopic(
  admin: Admin,
  topic: string,
  partitions = 3,
  configEntries: { name: string; value: string }[] = [],
): Promise<void> {
  await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, configEntries }],
    waitForLeaders: false,
  });
  for (let i = 0; ; i++) {
    const md = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => null);
    const parts = md?.topics[0]?.partitions ?? [];
    if (parts.length === partitions && parts.every((p) => p.leader >= 0)) return;
    if (i > 300) throw new Error(`topic ${topic}: no leaders after 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A topic whose records the broker stamps when it appends them (live latency's ack time). */
export function createLogAppendTopic(admin: Admin, topic: string, partitions = 3): Promise<void> {
  return createTopic(admin, topic, partitions, [{ name: 'message.timestamp.type', value: 'LogAppendTime' }]);
}
