// The test-facing handle: start/stop, crash/restart, fault injection and read-back of stored data.
import type { ApiName } from './apis/types.ts';
import { decodedRecords } from './log.ts';
import type { RecordHeader } from './record-batch.ts';
import { type Fault, StandInServer } from './server.ts';
import { BrokerState, type StandInOptions, type StandInStats } from './state.ts';

export interface StoredRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** Last value per header key; headers with a null value are only in `headerList`. */
  readonly headers: Record<string, Buffer>;
  /** Every header in wire order, duplicates and null values included. */
  readonly headerList: readonly RecordHeader[];
  /** Milliseconds since the epoch (producer CreateTime). */
  readonly timestamp: number;
  /** -1 for non-idempotent producers. */
  readonly producerId: number;
}

export interface CommittedOffsetInfo {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly metadata: string | null;
}

export interface StandInStatsSnapshot extends StandInStats {
  /** Exceptions thrown by the stand-in's own code while serving requests: should stay 0. */
  readonly internalErrors: number;
  readonly topics: number;
  readonly storedRecords: number;
}

/** Code-unit order, the same as records() and topics() use: locale-independent. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface CountWaiter {
  readonly check: () => boolean;
  readonly resolve: () => void;
  readonly reject: (e: Error) => void;
  readonly timer: NodeJS.Timeout;
}

export class KafkaStandIn {
  private readonly state: BrokerState;
  private readonly server: StandInServer;
  private readonly waiters = new Set<CountWaiter>();
  private stopped = false;

  private constructor(opts: StandInOptions) {
    this.state = new BrokerState(opts);
    this.server = new StandInServer(this.state);
    this.state.onAppend(() => {
      for (const w of [...this.waiters]) {
        if (w.check()) this.settle(w);
      }
    });
  }

  static async start(opts: StandInOptions = {}): Promise<KafkaStandIn> {
    const broker = new KafkaStandIn(opts);
    broker.state.port = await broker.server.listen(opts.port ?? 0);
    return broker;
  }

  /** Bootstrap list for kafkajs. */
  get brokers(): string[] {
    return [`${this.state.options.host}:${this.state.port}`];
  }

  get port(): number {
    return this.state.port;
  }

  get isUp(): boolean {
    return this.server.listening;
  }

  /** Idempotent for an existing topic with the same partition count; throws on a different one. */
  createTopic(name: string, opts: { partitions?: number; maxMessageBytes?: number } = {}): void {
    const partitions = opts.partitions ?? this.state.options.defaultPartitions;
    const existing = this.state.topics.get(name);
    if (existing) {
      if (existing.partitions.length !== partitions) {
        throw new Error(
          `topic "${name}" exists with ${existing.partitions.length} partitions, not ${partitions}`,
        );
      }
      return;
    }
    this.state.createTopic(name, partitions, opts.maxMessageBytes);
  }

  deleteTopic(name: string): boolean {
    return this.state.deleteTopic(name);
  }

  topics(): string[] {
    return [...this.state.topics.keys()].sort();
  }

  /** Decodes on demand (and caches per batch); ordered by topic name, partition, offset. */
  records(topic?: string): StoredRecord[] {
    const out: StoredRecord[] = [];
    const names = topic === undefined ? this.topics() : this.state.topics.has(topic) ? [topic] : [];
    for (const name of names) {
      for (const log of this.state.topics.get(name)!.partitions) {
        for (const batch of log.batches) {
          for (const rec of decodedRecords(batch)) {
            const headers: Record<string, Buffer> = {};
            for (const h of rec.headers) {
              // defineProperty: a header named "__proto__" must stay data, not become a prototype.
              if (h.value !== null)
                Object.defineProperty(headers, h.key, {
                  value: h.value,
                  enumerable: true,
                  writable: true,
                  configurable: true,
                });
            }
            out.push({
              topic: name,
              partition: log.partition,
              offset: rec.offset,
              key: rec.key,
              value: rec.value,
              headers,
              headerList: rec.headers,
              timestamp: rec.timestamp,
              producerId: batch.producerId,
            });
          }
        }
      }
    }
    return out;
  }

  /** Number of stored records, from batch headers only. */
  count(topic?: string): number {
    return this.state.countRecords(topic);
  }

  /** Resolves once at least `n` records are stored (in `topic`, or overall). */
  waitForCount(n: number, opts: { topic?: string; timeoutMs?: number } = {}): Promise<void> {
    const { topic, timeoutMs = 10_000 } = opts;
    const check = () => this.count(topic) >= n;
    if (check()) return Promise.resolve();
    if (this.stopped) return Promise.reject(new Error('KafkaStandIn.waitForCount: the stand-in is stopped'));
    return new Promise((resolve, reject) => {
      const where = topic === undefined ? '' : ` in topic "${topic}"`;
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(
          new Error(
            `KafkaStandIn.waitForCount: timed out after ${timeoutMs} ms waiting for ${n} records${where}; ` +
              `${this.count(topic)} stored`,
          ),
        );
      }, timeoutMs);
      const waiter: CountWaiter = { check, resolve, reject, timer };
      this.waiters.add(waiter);
    });
  }

  /** Crash: stop listening and cut every open connection. Stored data and group state survive. */
  async down(): Promise<void> {
    await this.server.close();
  }

  /** Restart on the same port. */
  async up(): Promise<void> {
    if (this.stopped) throw new Error('KafkaStandIn.up: the stand-in is stopped');
    if (this.server.listening) return;
    await this.server.listen(this.state.port);
  }

  /**
   * Answer Produce for `topic` with `code` until cleared with null. Metadata, Fetch and ListOffsets
   * report it too when a real broker would (3 UNKNOWN_TOPIC_OR_PARTITION, 29 TOPIC_AUTHORIZATION_FAILED;
   * Metadata also 5 and 17).
   */
  setTopicError(topic: string, code: number | null): void {
    if (code === null || code === 0) this.state.topicErrors.delete(topic);
    else this.state.topicErrors.set(topic, code);
  }

  /** Hold back every response by `ms` (after the request took effect). */
  setLatency(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`latency must be >= 0, got ${ms}`);
    this.state.latencyMs = ms;
  }

  /** Apply `fault` to the next `times` requests of one API, in injection order. */
  injectFault(api: ApiName, fault: Fault, times = 1): void {
    this.server.addFault(api, fault, times);
  }

  clearFaults(): void {
    this.server.clearFaults();
  }

  committedOffsets(groupId: string): CommittedOffsetInfo[] {
    const out: CommittedOffsetInfo[] = [];
    for (const [topic, byPartition] of this.state.groups.committed(groupId)) {
      for (const [partition, c] of byPartition) out.push({ topic, partition, ...c });
    }
    return out.sort((a, b) => compareNames(a.topic, b.topic) || a.partition - b.partition);
  }

  groupState(groupId: string): { state: string; generationId: number; members: string[] } | undefined {
    return this.state.groups.describe(groupId);
  }

  stats(): StandInStatsSnapshot {
    const s = this.state.stats;
    return {
      ...s,
      requests: { ...s.requests },
      rejectedBatches: { ...s.rejectedBatches },
      producedBatchesByCompression: { ...s.producedBatchesByCompression },
      internalErrors: this.server.internalErrors,
      topics: this.state.topics.size,
      storedRecords: this.count(),
    };
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.server.close();
    this.state.groups.close();
    for (const w of [...this.waiters]) {
      this.waiters.delete(w);
      clearTimeout(w.timer);
      w.reject(new Error('KafkaStandIn.waitForCount: the stand-in was stopped'));
    }
  }

  private settle(w: CountWaiter): void {
    this.waiters.delete(w);
    clearTimeout(w.timer);
    w.resolve();
  }
}
