/**
 * Reads topics back from the beginning with a consumer of its own (a group of its own, no
 * commits), for tests and the chaos suite: every record up to given high watermarks.
 *
 * It must survive what the tests do to brokers. After a kill -9 and restart, a kafkajs group
 * consumer can sit for a long time in its rejoin/backoff cycle (seen: "not caught up after 30000
 * ms (partition 2: at 26 of 31)" while the records were there). So:
 *   - a consumer that makes no progress for `stallMs` while records are outstanding, or that
 *     crashed for good, is replaced by a fresh one (new group, from the beginning; what was read
 *     already is skipped by offset); a consumer gets 3 × stallMs for its group join, and each
 *     replacement twice the time of the one before, so a join slowed by load is not cut off again
 *     and again;
 *   - the wait is bounded by progress (test/support/progress.ts): it fails after `idleMs` without
 *     a new record, or `capMs` in all, never merely because a loaded machine is slow.
 */
import { randomUUID } from 'node:crypto';
import type { Consumer, Kafka, KafkaMessage } from 'kafkajs';
import { ProgressDeadline } from './progress.ts';

export interface RawRecord {
  topic: string;
  partition: number;
  message: KafkaMessage;
}

export interface ReadUpToOptions {
  /** Give up after this long without a new record. Default 60 s. */
  idleMs?: number;
  /** Give up after this long in all. Default 240 s. */
  capMs?: number;
  /** Replace the consumer after this long without a new record (doubling per replacement). Default 5 s. */
  stallMs?: number;
}

/** "topic/partition". */
export const tp = (topic: string, partition: number) => `${topic}/${partition}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves when `p` settles or after `ms`: a disconnect from a dead broker must not hang a test. */
const bounded = (p: Promise<unknown>, ms: number) =>
  Promise.race([p.catch(() => {}), sleep(ms)]).then(() => {});

export class TopicReader {
  readonly #kafka: Kafka;
  readonly #topics: string[];
  readonly #groupPrefix: string;
  readonly #records = new Map<string, RawRecord[]>();
  /** Next offset to read, by tp(). */
  readonly #position = new Map<string, number>();
  #consumer: Consumer | null = null;
  #generation = 0;
  #crashed: Error | null = null;
  /** Group joins of the current consumer (a sign of life for the stall detector). */
  #joins = 0;
  /** Consumers replaced so far (for the error message). */
  restarts = 0;

  constructor(kafka: Kafka, topics: string[], groupPrefix = 'test-read') {
    this.#kafka = kafka;
    this.#topics = topics;
    this.#groupPrefix = groupPrefix;
  }

  /** Starts a consumer (readUpTo starts one when there is none). */
  async start(): Promise<void> {
    const generation = ++this.#generation;
    this.#crashed = null;
    this.#joins = 0;
    const consumer = this.#kafka.consumer({
      groupId: `${this.#groupPrefix}-${randomUUID()}`,
      maxWaitTimeInMs: 100,
      // A fresh consumer replaces a stuck one sooner than kafkajs' own restart would.
      retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 },
    });
    this.#consumer = consumer;
    consumer.on(consumer.events.CRASH, (e) => {
      if (!e.payload.restart && generation === this.#generation) this.#crashed = e.payload.error;
    });
    // read_committed (kafkajs' default): a fetch of only aborted records or transaction markers
    // reaches no eachBatch; its end still moves the position (exactly-once topics end in markers).
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      if (generation !== this.#generation) return;
      const { topic, partition, lastOffset } = e.payload;
      const key = tp(topic, partition);
      const next = Number(lastOffset) + 1;
      if (next > (this.#position.get(key) ?? 0)) this.#position.set(key, next);
    });
    consumer.on(consumer.events.GROUP_JOIN, () => {
      if (generation === this.#generation) this.#joins++;
    });
    await consumer.connect();
    await consumer.subscribe({ topics: this.#topics, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (generation !== this.#generation) return; // a replaced consumer's last fetch
        const key = tp(batch.topic, batch.partition);
        const list = this.#records.get(key) ?? [];
        this.#records.set(key, list);
        for (const message of batch.messages) {
          const offset = Number(message.offset);
          // A rebalance, a retry or a fresh consumer hands records again: keep each offset once.
          if (offset < (this.#position.get(key) ?? 0)) continue;
          list.push({ topic: batch.topic, partition: batch.partition, message });
          this.#position.set(key, offset + 1);
        }
      },
    });
  }

  /** Replaces the consumer by a fresh one; a failed start leaves none (the next replacement tries again). */
  async #replace(): Promise<string> {
    const old = this.#consumer;
    this.#generation++;
    this.#consumer = null;
    if (old) {
      this.restarts++;
      await bounded(old.disconnect(), 5000);
    }
    try {
      await this.start();
      return '';
    } catch (e) {
      // The broker may still be on its way back.
      const failed = this.#consumer as Consumer | null;
      this.#consumer = null;
      if (failed) await bounded(failed.disconnect(), 5000);
      return `; last error: ${(e as Error).message}`;
    }
  }

  /**
   * Every record below `high` (high watermark by tp()), in (topic, partition, offset) order, once
   * the reader got that far.
   */
  async readUpTo(high: Map<string, number>, opts: ReadUpToOptions = {}): Promise<RawRecord[]> {
    const behind = () => [...high].filter(([key, h]) => h > 0 && (this.#position.get(key) ?? 0) < h);
    if (behind().length === 0) return this.#upTo(high);
    const deadline = new ProgressDeadline({ idleMs: opts.idleMs ?? 60_000, capMs: opts.capMs ?? 240_000 });
    let stallMs = opts.stallMs ?? 5000;
    let lastError = this.#consumer === null ? await this.#replace() : '';
    // Until its group join, a consumer gets 3 × stallMs (a join is slow on a loaded machine); a
    // join restarts the clock, then stallMs without a new record means stuck.
    const stallFor = () => new ProgressDeadline({ idleMs: this.#joins > 0 ? stallMs : 3 * stallMs });
    let stall = stallFor();
    let joins = this.#joins;
    while (behind().length > 0) {
      const progress = [...this.#position.values()].reduce((a, b) => a + b, 0);
      deadline.note(progress);
      if (deadline.expired()) {
        const lag = behind()
          .map(([key, h]) => `${key}: at ${this.#position.get(key) ?? 0} of ${h}`)
          .join(', ');
        throw new Error(
          `read of ${this.#topics.join(',')}: ${deadline.why()} (${lag}; consumers replaced: ${this.restarts}${lastError})`,
        );
      }
      if (this.#joins !== joins) {
        joins = this.#joins;
        stall = stallFor();
      }
      stall.note(progress);
      if (this.#crashed || stall.expired()) {
        if (this.#crashed) lastError = `; last crash: ${this.#crashed.message}`;
        lastError = (await this.#replace()) || lastError;
        // Each replacement gets twice the time of the one before: never cut off again and again.
        stallMs *= 2;
        joins = this.#joins;
        stall = stallFor();
        continue;
      }
      await sleep(50);
    }
    return this.#upTo(high);
  }

  #upTo(high: Map<string, number>): RawRecord[] {
    const out: RawRecord[] = [];
    for (const key of [...this.#records.keys()].sort(byTopicPartition)) {
      const h = high.get(key) ?? Number.POSITIVE_INFINITY;
      for (const r of this.#records.get(key)!) if (Number(r.message.offset) < h) out.push(r);
    }
    return out;
  }

  async stop(): Promise<void> {
    this.#generation++;
    const c = this.#consumer;
    this.#consumer = null;
    if (c) await bounded(c.disconnect(), 10_000);
  }
}

function byTopicPartition(a: string, b: string): number {
  const [ta, pa] = [a.slice(0, a.lastIndexOf('/')), Number(a.slice(a.lastIndexOf('/') + 1))];
  const [tb, pb] = [b.slice(0, b.lastIndexOf('/')), Number(b.slice(b.lastIndexOf('/') + 1))];
  return ta === tb ? pa - pb : ta < tb ? -1 : 1;
}
