import { createRequire, Module } from 'node:module';
import type { Kafka, Message, PartitionerArgs } from 'kafkajs';

/**
 * kafkajs' producer groups a batch by partition with `[...current, message]` for every message
 * (src/producer/groupMessagesPerPartition.js): quadratic in the messages of a partition — at
 * the relay's 1,300-event batches over 3 partitions, 1.3 µs/record and ~1.7 kB of garbage per
 * event. kafkajs offers no option for it and its modules capture the function when they load.
 *
 * kafkaWithLinearGrouping() loads a second copy of kafkajs' client class whose producer chain
 * (src/index.js → producer/index.js → producer/messageProducer.js → producer/sendMessages.js)
 * sees the linear grouping below; every other module (cluster, protocol, errors, consumer,
 * admin) is the one already loaded, so errors keep their classes. kafkajs' module cache is
 * restored right after: everyone else who requires kafkajs gets it unchanged. When anything
 * is not as expected (another kafkajs layout), it returns null and the caller uses kafkajs'
 * own class.
 */

type Partitioner = (args: PartitionerArgs) => number;

/** kafkajs' groupMessagesPerPartition, same result (partition → messages in batch order), linear. */
export function groupMessagesPerPartition({
  topic,
  partitionMetadata,
  messages,
  partitioner,
}: {
  topic: string;
  partitionMetadata: PartitionerArgs['partitionMetadata'];
  messages: Message[];
  partitioner: Partitioner;
}): Record<string, Message[]> {
  if (partitionMetadata.length === 0) return {};
  const result: Record<string, Message[]> = {};
  // An indexed loop: once per batch, too seldom for V8 to optimize an iterator away.
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    const partition = partitioner({ topic, partitionMetadata, message });
    const list = result[partition];
    if (list) list.push(message);
    else result[partition] = [message];
  }
  groupedBatches++;
  return result;
}

/** Batches grouped by the linear version (tests check the producer really uses it). */
export let groupedBatches = 0;

const require = createRequire(import.meta.url);
let loaded: typeof Kafka | null | undefined;

export function kafkaWithLinearGrouping(): typeof Kafka | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  try {
    const group = require.resolve('kafkajs/src/producer/groupMessagesPerPartition.js');
    const chain = [
      'kafkajs/src/producer/sendMessages.js',
      'kafkajs/src/producer/messageProducer.js',
      'kafkajs/src/producer/index.js',
      'kafkajs/src/index.js',
    ].map((p) => require.resolve(p));
    if (typeof require(group) !== 'function') return null;
    for (const p of chain) require(p);
    const cache = require.cache;
    const saved = [group, ...chain].map((p) => cache[p]);
    try {
      const replacement = new Module(group);
      replacement.filename = group;
      replacement.loaded = true;
      replacement.exports = groupMessagesPerPartition;
      cache[group] = replacement;
      for (const p of chain) delete cache[p];
      const Fresh = require('kafkajs/src/index.js') as typeof Kafka;
      if (typeof Fresh === 'function' && typeof Fresh.prototype.producer === 'function') loaded = Fresh;
    } finally {
      [group, ...chain].forEach((p, i) => {
        cache[p] = saved[i];
      });
    }
  } catch {
    loaded = null;
  }
  return loaded;
}
