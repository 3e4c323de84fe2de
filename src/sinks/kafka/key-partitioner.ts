import { type ICustomPartitioner, type PartitionerArgs, Partitioners } from 'kafkajs';

/** Keys remembered per partition count; past it the memory starts over (aggregate ids repeat far less). */
const MAX_KEYS = 10_000;

/**
 * kafkajs' DefaultPartitioner (murmur2 of the key, as the Java client partitions), remembering
 * each key's partition. kafkajs computes murmur2 with a 64-bit Long object per step and filters
 * the partition list for every message; a key's partition depends only on the key and the
 * topic's partition count, and an outbox sends many events per aggregate. Messages without a
 * string key, or with a partition set, go to kafkajs' partitioner unchanged. A test checks that
 * the partition is kafkajs' own choice.
 */
export const CachedDefaultPartitioner: ICustomPartitioner = () => {
  const partition = Partitioners.DefaultPartitioner();
  const byCount = new Map<number, Map<string, number>>();
  return (args: PartitionerArgs) => {
    const { message, partitionMetadata } = args;
    const key = message.key;
    if (typeof key !== 'string' || (message.partition !== undefined && message.partition !== null))
      return partition(args);
    const count = partitionMetadata.length;
    let known = byCount.get(count);
    if (!known) byCount.set(count, (known = new Map()));
    let p = known.get(key);
    if (p === undefined) {
      p = partition(args);
      if (known.size >= MAX_KEYS) known.clear();
      known.set(key, p);
    }
    return p;
  };
};
