import type { Outcome } from '../outcome/outcome.ts';
import type { AckTracker, TxnEntry } from '../replication/ack-tracker.ts';
import { sleep } from '../retry/backoff.ts';
import type { Pending } from './message-queue.ts';

export interface RecordBehindOptions {
  batchSize: number;
  /** Aborted: no more lingering (the last batches are still handed to `record`). */
  signal: AbortSignal;
  /** Reading is paused: only settling lifts it, so nothing waits for more. */
  paused(): boolean;
  /** Records a batch's outcomes, then settles it (only what is durable is confirmed). */
  record(batch: Pending[], outcomes: Outcome[]): Promise<void>;
  /** The recorder cannot go on (e.g. the timeline changed under it): ends the session. */
  fail(e: unknown): void;
}

/**
 * Published batches whose outcomes wait for the recorder, recorded in stream order while the next
 * batches are published. Batches published meanwhile are recorded together: one progress
 * statement for all of them.
 */
export class RecordBehind {
  readonly #o: RecordBehindOptions;
  readonly #published: { batch: Pending[]; outcomes: Outcome[] }[] = [];
  #running: Promise<void> | null = null;

  constructor(o: RecordBehindOptions) {
    this.#o = o;
  }

  push(batch: Pending[], outcomes: Outcome[]): void {
    this.#published.push({ batch, outcomes });
    this.#running ??= this.#run().catch((e: unknown) => {
      this.#running = null;
      this.#o.fail(e);
    });
  }

  /** Resolves once every batch pushed so far was handed to `record`. */
  async done(): Promise<void> {
    await this.#running;
  }

  async #run(): Promise<void> {
    const o = this.#o;
    const published = this.#published;
    // Also when aborted: `record` then writes nothing but gives up the batch's decisions.
    while (published.length > 0) {
      // Small batches (a live stream's, an event or two each): wait a moment for more, so that
      // one statement records many. Only the slot's confirmation waits for it (the broker has
      // the events); not while reading is paused, which only settling lifts.
      if (!o.signal.aborted && !o.paused() && eventCount(published) * 2 < o.batchSize)
        await sleep(PROGRESS_LINGER_MS, o.signal);
      const ready = published.splice(0, published.length);
      const batch = ready.length === 1 ? ready[0]!.batch : ready.flatMap((r) => r.batch);
      const outcomes = ready.length === 1 ? ready[0]!.outcomes : ready.flatMap((r) => r.outcomes);
      await o.record(batch, outcomes);
    }
    this.#running = null;
  }
}

/**
 * Settles a recorded batch's events in the tracker, a transaction's events together (they are
 * consecutive in a batch). Returns the batch's bytes.
 */
export function settleBatch(tracker: AckTracker, batch: readonly Pending[]): number {
  let txn: TxnEntry | null = null;
  let ofTxn = 0;
  let bytes = 0;
  for (const p of batch) {
    if (p.txn !== txn) {
      if (txn) tracker.settle(txn, ofTxn);
      txn = p.txn;
      ofTxn = 0;
    }
    ofTxn++;
    bytes += p.message.bytes;
  }
  if (txn) tracker.settle(txn, ofTxn);
  return bytes;
}

function eventCount(batches: readonly { batch: readonly Pending[] }[]): number {
  let n = 0;
  for (const b of batches) n += b.batch.length;
  return n;
}

/**
 * How long the recorder waits for more small batches before it writes their progress: at 2,000
 * single-row commits/s, one progress statement per 100 events instead of per event (a statement
 * cost ~130 µs of the relay's CPU: docs/benchmarks.md, issue 39 item 2). The slot is confirmed at
 * most this much later; nothing reaches the broker later, and nothing is confirmed before the
 * record holds it. A stop does not wait for it (the abort ends the wait; the last batches are
 * still recorded).
 */
export const PROGRESS_LINGER_MS = 50;
