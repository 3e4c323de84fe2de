import type { Config } from '../config/load.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { readProgress, recordProgressRanges } from '../lifecycle/progress.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { OutcomeDeps } from '../outcome/outcome.ts';
import type { ExactlyOnceProgress, Sink } from '../sinks/sink.ts';
import { currentTimeline, timelineChanged } from '../store/timeline.ts';
import { streamPublishes } from './at-least-once.ts';
import type { BatchQueue, DeliveryMode, Queued, StreamState, TimelineObserver } from './mode.ts';

/** Marks the messages the sweeper publishes under exactly-once (retries, dead letters), which stay at-least-once. */
export const DELIVERY_HEADER = 'x-outbox-delivery';

type EoConfig = Pick<
  Config,
  | 'batchSize'
  | 'batchBytes'
  | 'kafkaTransactionBatches'
  | 'maxInflightEvents'
  | 'maxInflightBytes'
  | 'slot'
  | 'kafkaProgressTopic'
>;

/**
 * Exactly-once (Kafka transactions, docs/delivery.md): a batch holds whole PostgreSQL
 * transactions and goes out as one Kafka transaction that also carries the slot's progress
 * record (the ids Kafka holds that PostgreSQL may not have recorded yet). At each round's start
 * Kafka's committed record joins PostgreSQL's (sync), so events committed to Kafka before a crash
 * are skipped, not published again.
 */
export class ExactlyOnce implements DeliveryMode {
  readonly name = 'exactly-once';
  // Exactly-once covers the stream only: a retry is at-least-once, and says so (docs/delivery.md).
  readonly retryHeaders = { [DELIVERY_HEADER]: 'at-least-once' };
  readonly #eo: ExactlyOnceProgress;
  readonly #c: EoConfig;
  readonly #log: Logger;
  readonly #timelines: TimelineObserver;
  /** The timeline Kafka's progress was synced on this round (sync). */
  #syncedOn: string | null = null;

  constructor(
    eo: ExactlyOnceProgress,
    c: EoConfig,
    log: Logger,
    metrics: RelayMetrics,
    timelines: TimelineObserver,
  ) {
    this.#eo = eo;
    this.#c = c;
    this.#log = log;
    this.#timelines = timelines;
    metrics.watchExactlyOnce(() => eo.counts());
  }

  streamSink(sink: Sink): OutcomeDeps['sink'] {
    // The stream's batches join the slot's Kafka progress.
    return streamPublishes(sink, { progress: true, stream: true });
  }

  /** The rest of a transaction may be on its way: a commit wakes the batch waiting for it. */
  committed(queue: BatchQueue<Queued>): void {
    queue.nudge();
  }

  /**
   * The next batch, of whole PostgreSQL transactions (MessageQueue.takeTransactions). A
   * transaction still arriving is waited for — its commit, or enough of it to fill a batch — but
   * never wedges the stream: it is split when reading is paused (nothing more arrives until a
   * batch settles), when stopping, or once it has been waited for OPEN_TRANSACTION_WAIT_MS.
   */
  async nextBatch<T extends Queued>(
    queue: BatchQueue<T>,
    stream: StreamState,
    signal: AbortSignal,
  ): Promise<T[]> {
    const c = this.#c;
    const deadline = performance.now() + OPEN_TRANSACTION_WAIT_MS;
    for (;;) {
      const late = performance.now() >= deadline;
      const split = late || stream.paused || stream.draining;
      // One Kafka transaction of up to --kafka-transaction-batches batches (the sink sends each
      // batch's worth as one produce request inside it), and at most half the in-flight window:
      // the next transaction is read while this one is in flight (a transaction filling the
      // window would pause reading, and the next one would be only what fitted beside it).
      const k = c.kafkaTransactionBatches;
      const size = Math.max(c.batchSize, Math.min(c.batchSize * k, Math.floor(c.maxInflightEvents / 2)));
      const bytes = Math.max(c.batchBytes, Math.min(c.batchBytes * k, Math.floor(c.maxInflightBytes / 2)));
      const batch = queue.takeTransactions(size, bytes, split);
      if (batch.length > 0 || split || signal.aborted) return batch;
      await queue.waitForMore(deadline - performance.now(), signal);
      // The timer can fire before data already on the socket is read (a stalled event loop runs
      // timers first): one turn of the loop reads it before the transaction is called late.
      if (performance.now() >= deadline) await new Promise((r) => setImmediate(r));
    }
  }

  /** PostgreSQL holds these ids now; Kafka's progress record may drop them. */
  recorded(batch: readonly Queued[]): void {
    this.#eo.recorded(batch.map((p) => p.message.event.id));
  }

  /**
   * Kafka's latest committed progress record (the ids of every transaction this slot committed
   * that PostgreSQL may not have recorded: a crash or a fencing between the Kafka commit and the
   * progress statement) is added to PostgreSQL's record, so the stream skips those events. Kafka's
   * record can then forget them. A record another relay wrote since this one's last commit ends
   * the relay (PRODUCER_FENCED).
   */
  async sync(store: Pick<OutboxStore, 'db' | 'progress'>): Promise<void> {
    const eo = this.#eo;
    const { db } = store;
    // Before Kafka's record is read: its ids are recorded only on this timeline (store/timeline.ts).
    const on = await currentTimeline(db);
    this.#syncedOn = on;
    eo.timeline(on);
    const committed = await eo.committed().catch((e: unknown) => {
      if (isRelayError(e) && !e.retriable) throw e;
      throw new RelayError(
        ErrorCode.BROKER_UNAVAILABLE,
        `cannot read the exactly-once progress topic: ${errorMessage(e)}`,
        { retriable: true, cause: e },
      );
    });
    const ranges = committed.published;
    if (committed.timeline !== null && committed.timeline !== on) {
      // A promotion since Kafka's last commit: its ids name rows of the old primary, some of
      // which the new one reuses for other rows. Not recorded: the new primary's own record and
      // the table recovery decide (those events may be published again: duplicates).
      // Seen already when the slot was opened (in-process, or the progress record's stored key).
      if (this.#timelines.current === null) this.#timelines.observe(committed.timeline);
      this.#timelines.observe(on);
      this.#log.warn(
        { kafkaTimeline: committed.timeline, timeline: on, published: ranges.slice(0, 200) },
        "exactly-once: Kafka's committed progress was written on another database timeline (a promotion): its ids are not added to this primary's progress record; events of it that this primary has are published again (duplicates for a read_committed consumer)",
      );
    } else if (ranges === '{}') {
      // Right at a first start; after one, the progress topic was deleted (or is another cluster).
      const recorded = await readProgress(db, store.progress, this.#c.slot);
      if (recorded && recorded !== '{}')
        this.#log.warn(
          { topic: this.#c.kafkaProgressTopic },
          "exactly-once: Kafka holds no committed progress for this slot although it published before (the progress topic was deleted, or the brokers are another cluster): PostgreSQL's progress record alone says what was published, and events committed to Kafka but not yet recorded there are sent again (at-least-once for them)",
        );
    } else {
      const n = await recordProgressRanges(db, store.progress, this.#c.slot, ranges, on);
      if (n !== 1) {
        const now = await currentTimeline(db);
        if (now !== on) throw timelineChanged(on, now, 0);
        throw new Error(`the progress record of slot ${this.#c.slot} was not written (${n} rows)`);
      }
      this.#log.info(
        { published: ranges.length > 200 ? `${ranges.slice(0, 200)}…` : ranges },
        "Kafka's committed progress added to the progress record",
      );
    }
    eo.recorded('all');
  }

  /**
   * Kafka's progress was synced on another timeline (a promotion in between): this round's ids
   * would be taken for the old one's. The round starts over.
   */
  streamStarted(timeline: string): RelayError | null {
    const changed =
      this.#syncedOn !== timeline ? timelineChanged(this.#syncedOn ?? 'unknown', timeline, 0) : null;
    this.#eo.timeline(timeline);
    return changed;
  }

  /**
   * Fenced while the round ended for another reason (a zombie resumed after a takeover sees its
   * database sessions terminated too, often first): the relay exits 75 rather than wait as a
   * standby whose producer can never publish again.
   */
  fatal(): Error | null {
    return this.#eo.fenced();
  }
}

/**
 * How long a batch waits for the rest of a PostgreSQL transaction whose first events arrived (its
 * commit, or enough events to fill the batch) before that part goes out as a Kafka transaction of
 * its own. pgoutput sends a transaction only once it committed, so the rest is normally
 * milliseconds behind; only the server's decoding of a large transaction with other tables'
 * changes between its outbox rows takes longer.
 */
const OPEN_TRANSACTION_WAIT_MS = 1000;
