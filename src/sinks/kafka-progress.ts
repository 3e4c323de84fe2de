import { createRequire } from 'node:module';
import { type Kafka, Partitioners } from 'kafkajs';

/**
 * The exactly-once progress record in Kafka (docs/delivery.md): one record per Kafka
 * transaction on a compacted topic, keyed by the relay's transactional id, written in the SAME
 * transaction as the events. Its `published` is the int8multirange text of every outbox id this
 * slot published to Kafka that PostgreSQL's progress record (lifecycle/progress.ts) may not hold
 * yet; `token` names the transaction that wrote it.
 *
 * Reading it back `read_committed` tells, after a crash, a fencing or a commit of unknown
 * outcome, exactly which events Kafka holds: PostgreSQL's record only follows Kafka's commit.
 */
export interface KafkaProgress {
  v: 1;
  /** The relay's transactional id (= the record's key). */
  id: string;
  /** int8multirange text, e.g. '{[1,5),[7,9)}'. */
  published: string;
  /** `<producer instance>:<transaction number>`: which transaction wrote it. */
  token: string;
}

export function encodeProgress(p: KafkaProgress): string {
  return JSON.stringify(p);
}

export function decodeProgress(value: Buffer | null): KafkaProgress | null {
  if (!value) return null;
  try {
    const p = JSON.parse(value.toString('utf8')) as Partial<KafkaProgress>;
    if (p.v !== 1 || typeof p.published !== 'string' || typeof p.token !== 'string') return null;
    return p as KafkaProgress;
  } catch {
    return null;
  }
}

const require = createRequire(import.meta.url);
/** kafkajs' own filter of a fetch's aborted transactions and control records (consumer/batch.js). */
const Batch = require('kafkajs/src/consumer/batch.js') as new (
  topic: string,
  fetchedOffset: string,
  partitionData: unknown,
) => {
  messages: { offset: string; key: Buffer | null; value: Buffer | null }[];
  lastOffset(): string;
  isEmptyIncludingFiltered(): boolean;
};

const READ_COMMITTED = 1;
const LATEST = -1;
const EARLIEST = -2;

interface ClusterLike {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  refreshMetadata(): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number; leader: number }[];
  findBroker(args: { nodeId: string }): Promise<BrokerLike>;
}

interface BrokerLike {
  listOffsets(args: unknown): Promise<{
    responses: { topic: string; partitions: { partition: number; offset: string; errorCode: number }[] }[];
  }>;
  fetch(args: unknown): Promise<{
    responses: { topicName: string; partitions: { partition: number; errorCode: number }[] }[];
  }>;
}

/**
 * Reads the latest committed progress record of one key. kafkajs' consumer needs a group join
 * and resolves an empty read_committed fetch to the high watermark (past an open transaction);
 * this reads the key's partition directly with Fetch at READ_COMMITTED up to the last stable
 * offset, through kafkajs' own aborted-transaction filter, scanning back from the end in
 * growing windows until the key is found (the active segment is not compacted yet).
 */
export async function readLatestProgress(
  kafka: Kafka,
  topic: string,
  key: string,
): Promise<KafkaProgress | null> {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  );
  if (!sym) throw new Error('this kafkajs does not look as expected: cannot read the progress topic');
  const createCluster = (kafka as unknown as Record<symbol, (o: object) => ClusterLike>)[sym]!;
  const cluster = createCluster({ isolationLevel: READ_COMMITTED, allowAutoTopicCreation: false });
  await cluster.connect();
  try {
    await cluster.addTargetTopic(topic);
    await cluster.refreshMetadata();
    const partitionMetadata = cluster.findTopicPartitionMetadata(topic);
    if (partitionMetadata.length === 0) throw new Error(`the progress topic ${topic} has no partitions`);
    const partition = Partitioners.DefaultPartitioner()({
      topic,
      partitionMetadata: partitionMetadata as never,
      message: { key, value: null },
    });
    const leader = partitionMetadata.find((p) => p.partitionId === partition)!.leader;
    const broker = await cluster.findBroker({ nodeId: String(leader) });
    const offset = async (timestamp: number): Promise<number> => {
      const r = await broker.listOffsets({
        replicaId: -1,
        isolationLevel: READ_COMMITTED,
        topics: [{ topic, partitions: [{ partition, timestamp }] }],
      });
      const p = r.responses[0]!.partitions[0]!;
      return Number(p.offset);
    };
    const stable = await offset(LATEST);
    const earliest = await offset(EARLIEST);
    let end = stable;
    let window = 64;
    while (end > earliest) {
      const start = Math.max(earliest, end - window);
      let latest: KafkaProgress | null = null;
      let at = start;
      while (at < end) {
        const r = await broker.fetch({
          replicaId: -1,
          isolationLevel: READ_COMMITTED,
          maxWaitTime: 50,
          minBytes: 1,
          maxBytes: 4 << 20,
          topics: [{ topic, partitions: [{ partition, fetchOffset: String(at), maxBytes: 4 << 20 }] }],
        });
        const data = r.responses[0]!.partitions[0]!;
        const batch = new Batch(topic, String(at), data);
        if (batch.isEmptyIncludingFiltered()) break; // nothing more below the last stable offset
        for (const m of batch.messages) {
          if (Number(m.offset) >= end) break;
          if (m.key?.toString('utf8') === key) latest = decodeProgress(m.value) ?? latest;
        }
        at = Number(batch.lastOffset()) + 1;
      }
      if (latest) return latest;
      end = start;
      window *= 8;
    }
    return null;
  } finally {
    await cluster.disconnect().catch(() => {});
  }
}
