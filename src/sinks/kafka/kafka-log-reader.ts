import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kafka } from 'kafkajs';

/**
 * Reads a topic's records straight from its partitions' leaders, READ_COMMITTED, without a
 * consumer group: kafkajs' consumer needs a group join (seconds, and a group left behind) and
 * resolves an empty read_committed fetch to the high watermark (past an open transaction). Fetch
 * requests go up to the last stable offset, through kafkajs' own aborted-transaction filter.
 * Used for the exactly-once progress record (kafka-progress.ts) and Kafka Connect's offsets topic
 * (compat/debezium/offsets-topic.ts).
 */

const require = createRequire(import.meta.url);
/** kafkajs' own filter of a fetch's aborted transactions and control records (consumer/batch.js). */
const Batch = require('kafkajs/src/consumer/batch.js') as new (
  topic: string,
  fetchedOffset: string,
  partitionData: unknown,
) => {
  messages: LogRecord[];
  lastOffset(): string;
  isEmptyIncludingFiltered(): boolean;
};

const READ_UNCOMMITTED = 0;
const READ_COMMITTED = 1;
const LATEST = -1;
const EARLIEST = -2;

export interface LogRecord {
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
}

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
 * A read that must see every transaction decided: what it finds is then the latest record, not
 * the latest one visible yet (TopicLog.decidedBounds).
 */
export interface WholeRead {
  /** How long to wait for the open transactions to end; then an error. */
  timeoutMs: number;
  /** Called once when the read has to wait: `stable` is the last stable offset, `end` the high watermark. */
  onWait?: (stable: number, end: number) => void;
}

const DECIDED_POLL_MS = 100;

/**
 * A transaction stayed open on a partition longer than a WholeRead waits. Its message names the
 * partition, the offset the transaction starts at (the last stable offset) and the Kafka tool
 * that finds and aborts a hanging one: a transaction its coordinator no longer knows (so never
 * ends by itself), which keeps every read_committed reader of the partition at that offset.
 */
export class OpenTransactionError extends Error {
  readonly topic: string;
  readonly partition: number;
  /** The last stable offset: the first record of the oldest open transaction. */
  readonly startOffset: number;
  readonly end: number;
  readonly waitedMs: number;

  constructor(
    topic: string,
    partition: number,
    leader: number | undefined,
    stable: number,
    end: number,
    waitedMs: number,
  ) {
    const broker = leader === undefined ? '' : ` --broker-id ${leader}`;
    super(
      `the last stable offset of ${topic} partition ${partition} stayed at ${stable}, below its end ${end}, for ${waitedMs} ms: a transaction on it is still open (its coordinator aborts it at the producer's transaction timeout). ` +
        `If it stays past the brokers' transaction.max.timeout.ms it is hanging and only an abort ends it: ` +
        `\`kafka-transactions.sh --bootstrap-server <broker> find-hanging${broker}\` lists it, ` +
        `\`kafka-transactions.sh --bootstrap-server <broker> abort --topic ${topic} --partition ${partition} --start-offset ${stable}\` aborts it`,
    );
    this.name = 'OpenTransactionError';
    this.topic = topic;
    this.partition = partition;
    this.startOffset = stable;
    this.end = end;
    this.waitedMs = waitedMs;
  }
}

export class TopicLog {
  readonly topic: string;
  /** Partition ids and their leaders, from the metadata read at open. */
  readonly partitions: readonly { partitionId: number; leader: number }[];
  readonly #cluster: ClusterLike;

  private constructor(
    cluster: ClusterLike,
    topic: string,
    partitions: readonly { partitionId: number; leader: number }[],
  ) {
    this.#cluster = cluster;
    this.topic = topic;
    this.partitions = partitions;
  }

  /** Connects and reads the topic's metadata; throws kafkajs' error when the topic does not exist. */
  static async open(kafka: Kafka, topic: string): Promise<TopicLog> {
    const sym = Object.getOwnPropertySymbols(kafka).find(
      (s) => s.description === 'private:Kafka:createCluster',
    );
    if (!sym) throw new Error(`this kafkajs does not look as expected: cannot read topic ${topic}`);
    const createCluster = (kafka as unknown as Record<symbol, (o: object) => ClusterLike>)[sym]!;
    const cluster = createCluster({ isolationLevel: READ_COMMITTED, allowAutoTopicCreation: false });
    await cluster.connect();
    try {
      await cluster.addTargetTopic(topic);
      await cluster.refreshMetadata();
      return new TopicLog(cluster, topic, cluster.findTopicPartitionMetadata(topic));
    } catch (e) {
      await cluster.disconnect().catch(() => {});
      throw e;
    }
  }

  async #broker(partition: number): Promise<BrokerLike> {
    const leader = this.partitions.find((p) => p.partitionId === partition)?.leader;
    if (leader === undefined) throw new Error(`topic ${this.topic} has no partition ${partition}`);
    return this.#cluster.findBroker({ nodeId: String(leader) });
  }

  /** The partition's earliest offset and its last stable offset (the end of what is committed). */
  async bounds(partition: number): Promise<{ earliest: number; stable: number }> {
    const broker = await this.#broker(partition);
    const offset = async (timestamp: number): Promise<number> => {
      const r = await broker.listOffsets({
        replicaId: -1,
        isolationLevel: READ_COMMITTED,
        topics: [{ topic: this.topic, partitions: [{ partition, timestamp }] }],
      });
      return Number(r.responses[0]!.partitions[0]!.offset);
    };
    return { earliest: await offset(EARLIEST), stable: await offset(LATEST) };
  }

  /**
   * The partition's high watermark: the end of every record written, committed or not. The last
   * stable offset stays below the first record of any transaction still open there (another
   * producer's, or one whose commit markers are not written yet); once it reaches this offset,
   * every transaction that wrote below it is decided, and a read_committed read up to it is whole.
   */
  async highWatermark(partition: number): Promise<number> {
    const broker = await this.#broker(partition);
    const r = await broker.listOffsets({
      replicaId: -1,
      isolationLevel: READ_UNCOMMITTED,
      topics: [{ topic: this.topic, partitions: [{ partition, timestamp: LATEST }] }],
    });
    return Number(r.responses[0]!.partitions[0]!.offset);
  }

  /**
   * The partition's bounds once every transaction written to it before this call is decided: the
   * last stable offset stops at the first record of a transaction still open (another producer's,
   * or one whose commit markers are not written yet), so a read_committed read up to it can miss
   * committed records written after that one. Waits until the last stable offset reaches the high
   * watermark read at the start; past `whole.timeoutMs`, an error naming the open transaction.
   */
  async decidedBounds(partition: number, whole: WholeRead): Promise<{ earliest: number; stable: number }> {
    const end = await this.highWatermark(partition);
    return (
      (await this.#decided(partition, end, whole.timeoutMs, whole.onWait)) ?? (await this.bounds(partition))
    );
  }

  /**
   * Whether the record at `offset` is committed: first waits until every transaction up to it is
   * decided (the last stable offset past it; past `timeoutMs`, an OpenTransactionError naming the
   * transaction still open there), then reads it read_committed, which leaves an aborted record
   * out. null: the offset is not in the log (retention, or the topic was recreated), so the log
   * cannot tell.
   */
  async isCommitted(partition: number, offset: number, timeoutMs: number): Promise<boolean | null> {
    const bounds = await this.#decided(partition, offset + 1, timeoutMs);
    if (bounds === null || offset < bounds.earliest) return null;
    let found = false;
    await this.scan(partition, offset, offset + 1, (m) => {
      if (Number(m.offset) === offset) found = true;
    });
    return found;
  }

  /**
   * The partition's bounds once its last stable offset reached `end` (every transaction below it
   * decided); past `timeoutMs`, an OpenTransactionError. null: the log ends before `end` (the
   * topic was recreated, or the log truncated), so nothing there will ever be decided.
   */
  async #decided(
    partition: number,
    end: number,
    timeoutMs: number,
    onWait?: WholeRead['onWait'],
  ): Promise<{ earliest: number; stable: number } | null> {
    let bounds = await this.bounds(partition);
    const deadline = performance.now() + timeoutMs;
    let waited = false;
    while (bounds.stable < end) {
      if ((await this.highWatermark(partition)) < end) return null;
      if (performance.now() >= deadline)
        throw new OpenTransactionError(
          this.topic,
          partition,
          this.partitions.find((p) => p.partitionId === partition)?.leader,
          bounds.stable,
          end,
          timeoutMs,
        );
      if (!waited) onWait?.(bounds.stable, end);
      waited = true;
      await sleep(DECIDED_POLL_MS);
      bounds = await this.bounds(partition);
    }
    return bounds;
  }

  /** Calls `each` for every committed record of the partition in [from, end), in offset order. */
  async scan(partition: number, from: number, end: number, each: (r: LogRecord) => void): Promise<void> {
    const broker = await this.#broker(partition);
    let at = from;
    while (at < end) {
      const r = await broker.fetch({
        replicaId: -1,
        isolationLevel: READ_COMMITTED,
        maxWaitTime: 50,
        minBytes: 1,
        maxBytes: 4 << 20,
        topics: [
          { topic: this.topic, partitions: [{ partition, fetchOffset: String(at), maxBytes: 4 << 20 }] },
        ],
      });
      const batch = new Batch(this.topic, String(at), r.responses[0]!.partitions[0]!);
      if (batch.isEmptyIncludingFiltered()) return; // nothing more below the last stable offset
      for (const m of batch.messages) {
        if (Number(m.offset) >= end) return;
        each(m);
      }
      at = Number(batch.lastOffset()) + 1;
    }
  }

  async close(): Promise<void> {
    await this.#cluster.disconnect().catch(() => {});
  }
}
