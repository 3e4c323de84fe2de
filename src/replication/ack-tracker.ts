import type { Lsn } from './lsn.ts';

/**
 * Decides which LSN may be confirmed to the server (design.md §3).
 *
 * The server resumes a slot at its confirmed_flush_lsn and re-sends everything
 * after it, so a position may be confirmed only when every outbox row of every
 * transaction up to it is settled (acknowledged by the broker, or durably
 * recorded as failed). Transactions are kept in commit order; a transaction's
 * position is its commit end LSN; the confirmable position is the end of the
 * longest settled prefix.
 *
 * Idle advancement: a keepalive's WAL end received while no transaction is
 * open becomes a settled entry of its own, so the slot moves on when the outbox
 * is quiet but other tables churn. It still waits behind unsettled entries.
 */
export interface TxnEntry {
  /** Commit end LSN; 0n until the commit arrives. */
  endLsn: Lsn;
  /** Events added but not settled yet. */
  pending: number;
  committed: boolean;
}

export class AckTracker {
  #queue: TxnEntry[] = [];
  #head = 0;
  #open: TxnEntry | null = null;
  #confirmable: Lsn;
  #unsettled = 0;

  constructor(startLsn: Lsn) {
    this.#confirmable = startLsn;
  }

  /** The highest LSN whose transaction and all earlier ones are settled. */
  get confirmable(): Lsn {
    return this.#confirmable;
  }

  /** Events handed to the pipeline and not settled yet, across all transactions. */
  get unsettled(): number {
    return this.#unsettled;
  }

  get inTransaction(): boolean {
    return this.#open !== null;
  }

  /** Transactions (and idle marks) still queued behind the confirmable position. */
  get queued(): number {
    return this.#queue.length - this.#head;
  }

  begin(): TxnEntry {
    if (this.#open)
      throw new Error('AckTracker.begin: previous transaction has no commit (protocol violation)');
    const entry: TxnEntry = { endLsn: 0n, pending: 0, committed: false };
    this.#open = entry;
    this.#queue.push(entry);
    return entry;
  }

  /** Registers one event of the open transaction; settle it later with settle(entry). */
  addEvent(): TxnEntry {
    const entry = this.#open;
    if (!entry) throw new Error('AckTracker.addEvent: row outside a transaction (protocol violation)');
    entry.pending++;
    this.#unsettled++;
    return entry;
  }

  commit(endLsn: Lsn): void {
    const entry = this.#open;
    if (!entry) throw new Error('AckTracker.commit: no open transaction (protocol violation)');
    entry.endLsn = endLsn;
    entry.committed = true;
    this.#open = null;
    this.#advance();
  }

  settle(entry: TxnEntry, count = 1): void {
    if (entry.pending < count) throw new Error('AckTracker.settle: more settlements than events');
    entry.pending -= count;
    this.#unsettled -= count;
    if (entry.pending === 0) this.#advance();
  }

  /**
   * A keepalive (or any server report of its WAL end) while no transaction is open:
   * everything before walEnd that we were sent has been seen, so walEnd may be confirmed
   * once the entries ahead of it settle.
   */
  noteServerPosition(walEnd: Lsn): void {
    if (this.#open) return;
    if (this.queued === 0) {
      if (walEnd > this.#confirmable) this.#confirmable = walEnd;
      return;
    }
    const tail = this.#queue[this.#queue.length - 1]!;
    if (walEnd <= tail.endLsn) return;
    // Merge consecutive idle marks so a long outage does not grow the queue.
    if (tail.committed && tail.pending === 0) tail.endLsn = walEnd;
    else this.#queue.push({ endLsn: walEnd, pending: 0, committed: true });
  }

  #advance(): void {
    const q = this.#queue;
    let h = this.#head;
    while (h < q.length) {
      const e = q[h]!;
      if (!e.committed || e.pending > 0) break;
      if (e.endLsn > this.#confirmable) this.#confirmable = e.endLsn;
      h++;
    }
    if (h === q.length) {
      this.#queue = [];
      this.#head = 0;
    } else if (h > 1024 && h * 2 > q.length) {
      this.#queue = q.slice(h);
      this.#head = 0;
    } else {
      this.#head = h;
    }
  }
}
