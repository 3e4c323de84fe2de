import type { BatchItem } from '../outcome/outcome.ts';
import type { TxnEntry } from '../replication/ack-tracker.ts';

/** An event waiting to be published, with the transaction it settles (routeError: see BatchItem). */
export interface Pending extends BatchItem {
  txn: TxnEntry;
}

/**
 * Routed messages waiting to be published, in stream order. The stream pushes
 * synchronously; the publisher takes batches and waits when there is nothing to take.
 */
export class MessageQueue {
  #items: Pending[] = [];
  #head = 0;
  #waiter: Waiter | null = null;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(p: Pending): void {
    this.#items.push(p);
    if (this.#waiter && this.length >= this.#waiter.atLeast) this.#waiter.wake();
  }

  /** Wakes a waitForMore (a transaction's commit arrived, reading paused): not a plain wait. */
  nudge(): void {
    if (this.#waiter?.onNudge) this.#waiter.wake();
  }

  /** Up to maxCount messages and about maxBytes (at least one message), in order. */
  take(maxCount: number, maxBytes: number): Pending[] {
    return this.#takeTo(this.#boundedEnd(maxCount, maxBytes));
  }

  /**
   * Exactly-once (docs/delivery.md point 4): like take, but the batch ends at a PostgreSQL commit
   * — whole transactions, as many as fit the bounds. A transaction is split only when it does not
   * fit the bounds alone (its first part goes out; the rest in the next batches), or when it is
   * still arriving and `split` says not to wait for the rest (reading paused, the wait too long,
   * stopping). Otherwise a batch holding only part of a transaction still arriving waits: [] (then
   * waitForMore).
   *
   * The cases at the end of the bounded batch [head, end):
   *  - the next queued event belongs to another transaction, or none is queued and the last
   *    transaction's commit arrived: the batch ends at a commit — taken whole;
   *  - otherwise the last transaction goes on past `end` (or may): cut after the last commit in
   *    the batch, if there is one;
   *  - none (the batch is part of a single transaction): split when the bounds stopped it (the
   *    transaction is larger than a batch) or `split`, else [].
   */
  takeTransactions(maxCount: number, maxBytes: number, split: boolean): Pending[] {
    const items = this.#items;
    const start = this.#head;
    const end = this.#boundedEnd(maxCount, maxBytes);
    if (end === start) return [];
    const last = items[end - 1]!.txn;
    const whole = end < items.length ? items[end]!.txn !== last : last.committed;
    if (whole) return this.#takeTo(end);
    let cut = end - 1;
    while (cut > start && items[cut - 1]!.txn === last) cut--;
    if (cut > start) return this.#takeTo(cut);
    const bounded = end < items.length || end - start >= maxCount;
    return bounded || split ? this.#takeTo(end) : [];
  }

  /** Where a batch from the head ends: maxCount messages, about maxBytes, at least one message. */
  #boundedEnd(maxCount: number, maxBytes: number): number {
    const start = this.#head;
    let end = start;
    let bytes = 0;
    while (end < this.#items.length && end - start < maxCount) {
      const b = this.#items[end]!.message.bytes;
      if (end > start && bytes + b > maxBytes) break;
      bytes += b;
      end++;
    }
    return end;
  }

  #takeTo(end: number): Pending[] {
    const out = this.#items.slice(this.#head, end);
    this.#head = end;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 4096 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }

  /** Resolves once at least `atLeast` messages are queued, when ms pass (never: Infinity), or on abort. */
  wait(atLeast: number, ms: number, signal: AbortSignal): Promise<void> {
    if (this.length >= atLeast || signal.aborted) return Promise.resolve();
    return this.#wait(atLeast, false, ms, signal);
  }

  /** Resolves at the next push or nudge, when ms pass, or on abort. */
  waitForMore(ms: number, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return this.#wait(this.length + 1, true, ms, signal);
  }

  /**
   * One waiter at a time. A live stream waits once per commit: the abort listener is added once
   * per signal (#listen), not per wait — an EventTarget listener added and removed per commit
   * was a measurable part of the live path (docs/benchmarks.md, "Live mode: where the CPU per
   * commit went").
   */
  #wait(atLeast: number, onNudge: boolean, ms: number, signal: AbortSignal): Promise<void> {
    this.#listen(signal);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        atLeast,
        onNudge,
        signal,
        wake: () => {
          if (timer) clearTimeout(timer);
          if (this.#waiter === waiter) this.#waiter = null;
          resolve();
        },
      };
      const timer = ms === Number.POSITIVE_INFINITY ? null : setTimeout(waiter.wake, Math.max(0, ms));
      this.#waiter = waiter;
    });
  }

  /** Signals already listened to: their abort wakes the waiter that waits with them. */
  readonly #listening = new WeakSet<AbortSignal>();

  #listen(signal: AbortSignal): void {
    if (this.#listening.has(signal)) return;
    this.#listening.add(signal);
    signal.addEventListener(
      'abort',
      () => {
        if (this.#waiter?.signal === signal) this.#waiter.wake();
      },
      { once: true },
    );
  }
}

interface Waiter {
  atLeast: number;
  onNudge: boolean;
  signal: AbortSignal;
  wake: () => void;
}
