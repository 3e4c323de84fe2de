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
  #waiter: { atLeast: number; wake: () => void } | null = null;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(p: Pending): void {
    this.#items.push(p);
    if (this.#waiter && this.length >= this.#waiter.atLeast) {
      const w = this.#waiter;
      this.#waiter = null;
      w.wake();
    }
  }

  /** Up to maxCount messages and about maxBytes (at least one message), in order. */
  take(maxCount: number, maxBytes: number): Pending[] {
    const start = this.#head;
    let end = start;
    let bytes = 0;
    while (end < this.#items.length && end - start < maxCount) {
      const b = this.#items[end]!.message.bytes;
      if (end > start && bytes + b > maxBytes) break;
      bytes += b;
      end++;
    }
    const out = this.#items.slice(start, end);
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

  /** Resolves once at least `atLeast` messages are queued, when ms pass, or on abort. */
  wait(atLeast: number, ms: number, signal: AbortSignal): Promise<void> {
    if (this.length >= atLeast || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = {
        atLeast,
        wake: () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', waiter.wake);
          if (this.#waiter === waiter) this.#waiter = null;
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, ms);
      signal.addEventListener('abort', waiter.wake, { once: true });
      this.#waiter = waiter;
    });
  }
}
