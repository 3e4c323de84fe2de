import type { RelayError } from '../errors.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import type { OutcomeDeps } from '../outcome/outcome.ts';
import type { Sink } from '../sinks/sink.ts';

/**
 * How the stream's batches are cut and committed: at-least-once (any sink) or exactly-once
 * (Kafka transactions, docs/delivery.md). Chosen once, at start, from the sink (deliveryModeOf
 * in choose.ts); the stream (stream/session.ts) and the relay's rounds (supervisor/) call it and
 * never ask which mode runs.
 *
 * A mode's points in a batch's life, in order:
 *  - start of every round, before recovery and the stream: `sync` (exactly-once: Kafka's
 *    committed progress joins PostgreSQL's record, so the stream skips what Kafka holds);
 *  - the stream started on a timeline: `streamStarted` (exactly-once: a promotion since the sync
 *    ends the round);
 *  - a commit arrived: `committed`; a batch is wanted: `nextBatch` (exactly-once: whole
 *    PostgreSQL transactions, one Kafka transaction each);
 *  - the batch is published through `streamSink` (exactly-once: with the slot's progress);
 *  - its outcomes are recorded in PostgreSQL: `recorded`;
 *  - a round failed: `fatal` says whether the relay must end instead of retrying.
 */
export interface DeliveryMode {
  readonly name: 'at-least-once' | 'exactly-once';
  /** The sink as the stream publishes through it (its first attempts of the events). */
  streamSink(sink: Sink): OutcomeDeps['sink'];
  /** The next batch to publish (may be empty: the caller waits for more and asks again). */
  nextBatch<T extends Queued>(queue: BatchQueue<T>, stream: StreamState, signal: AbortSignal): Promise<T[]>;
  /** A PostgreSQL transaction's commit arrived in the stream. */
  committed(queue: BatchQueue<Queued>): void;
  /** PostgreSQL's progress record now holds these events. */
  recorded(batch: readonly Queued[]): void;
  /** Before each round's recovery and stream, once the sink has started. */
  sync(store: Pick<OutboxStore, 'db' | 'progress'>): Promise<void>;
  /** The stream started on `timeline` (store/timeline.ts): an error ends the round. */
  streamStarted(timeline: string): RelayError | null;
  /** After a failed round: an error that ends the relay (exactly-once: this producer was fenced). */
  fatal(): Error | null;
  /**
   * Headers on what is published outside the mode's protocol — the sweeper's retries and
   * dead-letter copies, a lost slot's table recovery (supervisor/slot-recovery.ts): exactly-once
   * marks them at-least-once (DELIVERY_HEADER); at-least-once adds none.
   */
  readonly retryHeaders: Readonly<Record<string, string>>;
}

/** What the stream tells the mode about itself when a batch is cut. */
export interface StreamState {
  /** Reading is paused (backpressure): nothing more arrives until a batch settles. */
  readonly paused: boolean;
  /** Stopping: a transaction still arriving is not waited for. */
  readonly draining: boolean;
}

/** Hears the database timelines seen (supervisor/timeline-watch.ts): Kafka's record names one. */
export interface TimelineObserver {
  /** The timeline last observed (null before the first). */
  readonly current: string | null;
  observe(key: string): void;
}

/** An event waiting in the stream's queue (stream/message-queue.ts Pending). */
export interface Queued {
  readonly message: { readonly event: { readonly id: string } };
}

/** The stream's queue as a mode cuts batches from it (stream/message-queue.ts MessageQueue). */
export interface BatchQueue<T extends Queued> {
  /** Up to maxCount events and about maxBytes (at least one), in stream order. */
  take(maxCount: number, maxBytes: number): T[];
  /** Like take, ending at a PostgreSQL commit unless `split` (MessageQueue.takeTransactions). */
  takeTransactions(maxCount: number, maxBytes: number, split: boolean): T[];
  /** Resolves at the next push or nudge, when ms pass, or on abort. */
  waitForMore(ms: number, signal: AbortSignal): Promise<void>;
  /** Wakes a waitForMore. */
  nudge(): void;
}
