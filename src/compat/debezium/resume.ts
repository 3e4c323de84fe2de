/**
 * The first stream after a cutover from Debezium (docs/migrating-from-debezium.md#cutover): the slot
 * resends from its confirmed position, which is at or before where Debezium stopped (it confirms
 * only what its flushed offsets cover), so the relay must skip what Debezium already published
 * and publish everything else — no gap, no duplicate. Debezium resumes the same way
 * (WalPositionLocator): after the change at lsn_proc, inside the transaction that holds it; and a
 * transaction that committed at or before lsn_commit was processed whole. Pure.
 *
 * Per transaction T (BEGIN carries its commit position C):
 *  - C <= lsnCommit: Debezium processed T whole → every event of T is skipped;
 *  - otherwise T may hold lsnProc: its events are held until one has lsnProc as its WAL
 *    position (it and the held ones before it were processed → dropped; the rest pass), or
 *    until T's COMMIT (T was not the one → all held events pass, in order).
 * LSNs only grow, so once a transaction passed the rule it is never needed again; it stays on
 * (one comparison per event) instead of keeping state across restarts.
 */
export class DebeziumResume<E> {
  readonly #lsnProc: bigint;
  readonly #lsnCommit: bigint;
  #processedTxn = false;
  /** Events of the open transaction not known to be after lsnProc yet; null: passing. */
  #held: E[] | null = null;
  /** Events skipped so far: Debezium had published them. */
  skipped = 0;

  constructor(lsnProc: bigint, lsnCommit: bigint) {
    this.#lsnProc = lsnProc;
    this.#lsnCommit = lsnCommit;
  }

  begin(commitLsn: bigint): void {
    this.#processedTxn = commitLsn <= this.#lsnCommit;
    // Only a transaction whose changes can reach lsnProc needs holding.
    this.#held = !this.#processedTxn && commitLsn > this.#lsnProc ? [] : null;
  }

  /** An event at WAL position `lsn`: the events to publish now (in order), possibly none. */
  event(e: E, lsn: bigint): E[] {
    if (this.#processedTxn) {
      this.skipped++;
      return [];
    }
    if (this.#held === null) return [e];
    if (lsn === this.#lsnProc) {
      // Debezium's last processed change: it and what came before it in T are done.
      this.skipped += this.#held.length + 1;
      this.#held = null;
      return [];
    }
    if (lsn > this.#lsnProc) {
      // Past it without meeting it: lsnProc is not in T (or T began after it).
      const out = [...this.#held, e];
      this.#held = null;
      return out;
    }
    this.#held.push(e);
    return [];
  }

  /** The transaction's COMMIT: whatever is still held passes (T did not hold lsnProc). */
  commit(): E[] {
    const out = this.#held ?? [];
    this.#held = null;
    this.#processedTxn = false;
    return out;
  }
}
