import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { isSqlState, isTransientSqlState, SqlState } from '../store/pg-errors.ts';

/**
 * How many times in a row the stream must fail with the same server error at the same
 * position, with no progress in between, before the relay calls it a poison position.
 */
export const POISON_REPEATS = 5;

/**
 * SQLSTATEs after which the stream can succeed again on its own: the transient ones of the error
 * table (connection loss, resources, operator intervention, serialization, lock and I/O trouble,
 * the slot active for another process), and the slot dropped under the stream (42704: the next
 * session recreates it and recovers from the table).
 */
function streamRecovers(sqlstate: string): boolean {
  return isTransientSqlState(sqlstate) || sqlstate === SqlState.UNDEFINED_OBJECT;
}

/**
 * A stream error that can be a poison position: the server itself refused (it has a SQLSTATE)
 * for a reason that does not go away by waiting — e.g. a row filter failing on one row (22012),
 * XX000 from the decoder, or 22021 `invalid byte sequence` where a conversion still happens
 * (connection.ts streams a SQL_ASCII database unconverted for that reason).
 * Network errors and the transient classes above never are.
 */
export function canBePoison(sqlstate: string | undefined): boolean {
  return sqlstate !== undefined && isSqlState(sqlstate) && !streamRecovers(sqlstate);
}

export interface StreamFailure {
  /** The slot position the session had confirmed when it failed (where the server resumes). */
  confirmedLsn: Lsn;
  sqlstate: string;
  message: string;
  /** Commit LSN of the last transaction the session began to receive (pgoutput BEGIN), if any. */
  transactionLsn: Lsn | null;
}

export interface Poison {
  /** Where the server resumes: the poisoned transaction commits after it. */
  confirmedLsn: string;
  /** Commit LSN of the transaction being received when the error came, when the server sent its BEGIN. */
  transactionLsn: string | null;
  sqlstate: string;
  message: string;
  repeats: number;
  /** When the first of the repeated failures happened (ms since the epoch). */
  sinceMs: number;
}

/**
 * Recognises a poison position: the same server error (SQLSTATE and message) recurring at the
 * same confirmed position POISON_REPEATS times with no progress in between. Progress (the
 * confirmed position moved) clears it; so does a different error or position, which starts a
 * new count. Pure: the relay feeds it failures and progress.
 */
export class PoisonDetector {
  readonly #repeats: number;
  #streak: { key: string; count: number; sinceMs: number } | null = null;
  #poison: Poison | null = null;

  constructor(repeats = POISON_REPEATS) {
    this.#repeats = repeats;
  }

  get poison(): Poison | null {
    return this.#poison;
  }

  /** The confirmed position moved: whatever failed before was not a poison position. */
  progressed(): void {
    this.#streak = null;
    this.#poison = null;
  }

  /** Counts one failure; returns the poison once the streak is long enough (and while it lasts). */
  failed(f: StreamFailure, nowMs = Date.now()): Poison | null {
    const key = `${f.confirmedLsn}|${f.sqlstate}|${f.message}`;
    if (this.#streak?.key === key) this.#streak.count++;
    else {
      this.#streak = { key, count: 1, sinceMs: nowMs };
      this.#poison = null;
    }
    if (this.#streak.count >= this.#repeats) {
      this.#poison = {
        confirmedLsn: formatLsn(f.confirmedLsn),
        transactionLsn: f.transactionLsn == null ? null : formatLsn(f.transactionLsn),
        sqlstate: f.sqlstate,
        message: f.message,
        repeats: this.#streak.count,
        sinceMs: this.#streak.sinceMs,
      };
    }
    return this.#poison;
  }
}

/** The poison in one line, for logs, /readyz and status. */
export function describePoison(p: Poison): string {
  const txn = p.transactionLsn ? `, in the transaction committed at ${p.transactionLsn}` : '';
  return `poison position after ${p.confirmedLsn}${txn}: the stream failed ${p.repeats} times in a row with [${p.sqlstate}] ${p.message}`;
}
