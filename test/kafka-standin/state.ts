// Everything the API handlers share: configuration, topics, producer ids, groups, injected faults and
// counters. The server owns sockets; this owns data, and survives down()/up() like a broker's disk.
import { errorName, KafkaErrorCode } from './errors.ts';
import { GroupCoordinator } from './groups.ts';
import { newTopicLog, type PartitionLog, type TopicLog, topicNameError } from './log.ts';

export interface StandInOptions {
  /** 0 (default) picks a free port; up() after down() reuses whatever port was bound first. */
  port?: number;
  /** Interface to bind and to advertise in Metadata. Default 127.0.0.1. */
  host?: string;
  /** auto.create.topics.enable: create unknown topics named in Metadata requests. Default false. */
  autoCreateTopics?: boolean;
  /** num.partitions for auto-created topics and createTopic/CreateTopics without a count. Default 1. */
  defaultPartitions?: number;
  /** message.max.bytes: largest accepted record batch, 12-byte log overhead included. */
  maxMessageBytes?: number;
  /** group.initial.rebalance.delay.ms. Default 0 (the usual test-broker setting). */
  groupInitialRebalanceDelayMs?: number;
  /** group.min.session.timeout.ms / group.max.session.timeout.ms. Defaults 6000 / 1800000 as in Kafka. */
  groupMinSessionTimeoutMs?: number;
  groupMaxSessionTimeoutMs?: number;
  /** Receives one line per protocol problem or rejected batch; silent by default. */
  log?: (line: string) => void;
}

/** Kafka's default message.max.bytes: 1 MiB of batch plus the 12-byte log overhead. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

export interface ResolvedOptions {
  readonly host: string;
  readonly autoCreateTopics: boolean;
  readonly defaultPartitions: number;
  readonly maxMessageBytes: number;
  readonly log: (line: string) => void;
}

export interface StandInStats {
  connectionsAccepted: number;
  openConnections: number;
  /** Requests received, by API name. */
  requests: Record<string, number>;
  produceRequests: number;
  producedBatches: number;
  producedRecords: number;
  producedBytes: number;
  /** Appended batches by compression codec name (none, gzip, snappy, lz4, zstd). */
  producedBatchesByCompression: Record<string, number>;
  /** Retried batches recognised by sequence number and acknowledged without a second append. */
  duplicateBatches: number;
  /** Batches answered with an error, by error name. */
  rejectedBatches: Record<string, number>;
  fetchRequests: number;
  fetchedBatches: number;
  /** Requests closed on because they could not be parsed or named an unsupported API/version. */
  protocolErrors: number;
}

/** Which error codes a real broker also reports outside Produce for a topic it refuses or lacks. */
const METADATA_VISIBLE = new Set<number>([
  KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  KafkaErrorCode.LEADER_NOT_AVAILABLE,
  KafkaErrorCode.INVALID_TOPIC_EXCEPTION,
  KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED,
]);
const READ_VISIBLE = new Set<number>([
  KafkaErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
  KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED,
]);

export type TopicErrorScope = 'produce' | 'metadata' | 'read';

export class BrokerState {
  readonly options: ResolvedOptions;
  port = 0;
  readonly clusterId = 'kafka-standin';
  readonly nodeId = 0;
  readonly topics = new Map<string, TopicLog>();
  readonly topicErrors = new Map<string, number>();
  readonly groups: GroupCoordinator;
  latencyMs = 0;
  readonly stats: StandInStats = {
    connectionsAccepted: 0,
    openConnections: 0,
    requests: {},
    produceRequests: 0,
    producedBatches: 0,
    producedRecords: 0,
    producedBytes: 0,
    producedBatchesByCompression: {},
    duplicateBatches: 0,
    rejectedBatches: {},
    fetchRequests: 0,
    fetchedBatches: 0,
    protocolErrors: 0,
  };
  private nextProducerId = 1000;
  private readonly transactionalIds = new Map<string, { producerId: number; epoch: number }>();
  private readonly appendListeners = new Set<() => void>();

  constructor(opts: StandInOptions) {
    const defaultPartitions = opts.defaultPartitions ?? 1;
    if (!Number.isInteger(defaultPartitions) || defaultPartitions < 1) {
      throw new RangeError(`defaultPartitions must be a positive integer, got ${defaultPartitions}`);
    }
    this.options = {
      host: opts.host ?? '127.0.0.1',
      autoCreateTopics: opts.autoCreateTopics ?? false,
      defaultPartitions,
      maxMessageBytes: opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
      log: opts.log ?? (() => {}),
    };
    this.groups = new GroupCoordinator({
      initialRebalanceDelayMs: opts.groupInitialRebalanceDelayMs ?? 0,
      minSessionTimeoutMs: opts.groupMinSessionTimeoutMs ?? 6000,
      maxSessionTimeoutMs: opts.groupMaxSessionTimeoutMs ?? 1_800_000,
    });
  }

  createTopic(name: string, partitions: number, maxMessageBytes?: number): TopicLog {
    const invalid = topicNameError(name);
    if (invalid) throw new Error(invalid);
    if (!Number.isInteger(partitions) || partitions < 1) {
      throw new RangeError(`topic "${name}": partitions must be a positive integer, got ${partitions}`);
    }
    if (this.topics.has(name)) throw new Error(`topic "${name}" already exists`);
    const topic = newTopicLog(name, partitions, maxMessageBytes);
    this.topics.set(name, topic);
    return topic;
  }

  deleteTopic(name: string): boolean {
    if (!this.topics.delete(name)) return false;
    this.groups.forgetTopic(name);
    return true;
  }

  partition(topic: string, partition: number): PartitionLog | undefined {
    return this.topics.get(topic)?.partitions[partition];
  }

  maxMessageBytes(topic: TopicLog): number {
    return topic.maxMessageBytes ?? this.options.maxMessageBytes;
  }

  /** The injected error for `topic` as seen by one kind of API, or 0. */
  topicError(topic: string, scope: TopicErrorScope): number {
    const code = this.topicErrors.get(topic);
    if (code === undefined) return 0;
    if (scope === 'produce') return code;
    if (scope === 'metadata') return METADATA_VISIBLE.has(code) ? code : 0;
    return READ_VISIBLE.has(code) ? code : 0;
  }

  initProducerId(transactionalId: string | null): { producerId: number; epoch: number } {
    if (transactionalId === null) return { producerId: this.nextProducerId++, epoch: 0 };
    // Same transactional id, same producer id with a bumped epoch: how a broker fences zombies.
    const prev = this.transactionalIds.get(transactionalId);
    const next = prev
      ? { producerId: prev.producerId, epoch: prev.epoch + 1 }
      : { producerId: this.nextProducerId++, epoch: 0 };
    this.transactionalIds.set(transactionalId, next);
    return next;
  }

  onAppend(listener: () => void): () => void {
    this.appendListeners.add(listener);
    return () => this.appendListeners.delete(listener);
  }

  notifyAppend(): void {
    for (const l of [...this.appendListeners]) l();
  }

  countRecords(topic?: string): number {
    let n = 0;
    for (const t of this.topics.values()) {
      if (topic !== undefined && t.name !== topic) continue;
      for (const p of t.partitions) n += p.recordCount;
    }
    return n;
  }

  countRejected(code: number): void {
    const name = errorName(code);
    this.stats.rejectedBatches[name] = (this.stats.rejectedBatches[name] ?? 0) + 1;
  }
}
