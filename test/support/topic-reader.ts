/**
 * Reads topics back from the beginning with a consumer of its own (a group of its own, no
 * commits), for tests and the chaos suite: every record up to given high watermarks.
 *
 * It must survive what the tests do to brokers. After a kill -9 and restart, a kafkajs group
 * consumer can sit for a long time in its rejoin/backoff cycle (seen: "not caught up after 30000
 * ms (partition 2: at 26 of 31)" while the records were there). So:
 *   - a consumer that makes no progress for `stallMs` while records are outstanding, or that
 *     crashed for good, is replaced by a fresh one (new group, from the beginning; what was read
 *     already is skipped by offset); each replacement gets twice the time of the one before, so a
 *     group join slowed by load is not cut off again and again;
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
  /** Consumers replaced so far (for the error message). */
  restarts = 0;

  constructor(kafka: Kafka, topics: string[], groupPrefix = 'test-read') {
    this.#kafka = kafka;
    this.#topics = topics;
    this.#groupPrefix = groupPrefix;
  }

  /** Starts consuming (readUpTo starts it too). */
  async start(): Promise<void> {
    const generation = ++this.#generation;
    this.#crashed = null;
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

  async #restart(): Promise<void> {
    const old = this.#consumer;
    this.#generation++;
    this.#consumer = null;
    this.restarts++;
    if (old) await bounded(old.disconnect(), 5000);
    await this.start();
  }

  /**
   * Every record below `high` (high watermark by tp()), in (topic, partition, offset) order, once
   * the reader got that far.
   */
  async readUpTo(high: Map<string, number>, opts: ReadUpToOptions = {}): Promise<RawRecord[]> {
    let stallMs = opts.stallMs ?? 5000;
    const deadline = new ProgressDeadline({ idleMs: opts.idleMs ?? 60_000, capMs: opts.capMs ?? 240_000 });
    const behind = () => [...high].filter(([key, h]) => h > 0 && (this.#position.get(key) ?? 0) < h);
    let lastError = '';
    let sinceRestart = new ProgressDeadline({ idleMs: stallMs });
    while (behind().length > 0) {
      const progress = [...this.#position.values()].reduce((a, b) => a + b, 0);
      deadline.note(progress);
      sinceRestart.note(progress);
      if (deadline.expired()) {
        const lag = behind()
          .map(([key, h]) => `${key}: at ${this.#position.get(key) ?? 0} of ${h}`)
          .join(', ');
        throw new Error(
          `read of ${this.#topics.join(',')}: ${deadline.why()} (${lag}; consumers replaced: ${this.restarts}${lastError})`,
        );
      }
      if (this.#consumer === null || this.#crashed || sinceRestart.expired()) {
        if (this.#crashed) lastError = `; last crash: ${this.#crashed.message}`;
        if (this.#consumer !== null) stallMs *= 2;
        try {
          await (this.#consumer === null ? this.start() : this.#restart());
        } catch (e) {
          // The broker may still be on its way back: try again after the stall time.
          lastError = `; last error: ${(e as Error).message}`;
          this.#consumer = null;
        }
        sinceRestart = new ProgressDeadline({ idleMs: stallMs });
        sinceRestart.note(progress);
        continue;
      }
      await sleep(50);
    }
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
