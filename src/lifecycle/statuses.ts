/**
 * The outbox row's statuses (sql/000001_outbox.sql's CHECK constraint) and what each means now
 * that the stream records what it published in the slot's progress record (progress.ts) instead
 * of on the row. The column as stored vs the truthful status:
 *
 *  - pending   — stored by the producer's INSERT, and kept by the stream when it publishes. Truthful
 *                only outside every progress record's ranges: still to be streamed (or, after a
 *                lost slot, to be published from the table: supervisor/slot-recovery.ts).
 *  - published — truthful when the row says 'pending' and a progress record covers its id (the
 *                stream published it), or when the row itself says 'published' (a sweeper retry
 *                or release, or an older relay that marked rows).
 *  - failed    — refused for good once; the sweeper retries it at next_attempt_at (attempts, last_error).
 *  - dead      — failed --max-attempts times; copied to the dead-letter topic if one is set. Stays until
 *                an operator resends or discards it (or --retention-dead-ms prunes it).
 *  - parked    — strict ordering: held behind a failed or dead event of its aggregate; released in id
 *                order by the sweeper once nothing is ahead of it.
 *  - discarded — an operator gave up on a failed or dead event, PostgreSQL refused to record its
 *                failure (54000: aggregate columns too long for the failure index), or its text is
 *                not UTF-8 (a SQL_ASCII database: no message can carry it, and no UTF8 connection
 *                can read it back to retry). Kept for audit until retention.
 *
 * The truthful status of every row: the view `<table>_with_status` (sql/000003); for counts, the
 * cheaper sources in queries.ts. No status ever goes back to 'pending'.
 */
export const STATUSES = ['pending', 'published', 'failed', 'dead', 'parked', 'discarded'] as const;
export type Status = (typeof STATUSES)[number];

/**
 * Statuses that hold an aggregate in strict ordering (and that `events list` shows by default):
 * the predicate of the table's partial indexes (sql/000001_outbox.sql), which queries on them
 * spell the same way (sqlStatuses) so the planner can use them.
 */
export const UNHEALTHY: readonly Status[] = ['failed', 'dead', 'parked'];

/**
 * Statuses an operator may resend or discard — and the unresolved head of an aggregate: its
 * parked events wait while one of these is ahead of them.
 */
export const RESOLVABLE: readonly Status[] = ['failed', 'dead'];

/** Settled for good: retention prunes these after --retention-published-ms. */
export const PRUNABLE: readonly Status[] = ['published', 'discarded'];

/** Statuses outside the partial indexes of UNHEALTHY rows: counting them scans the table. */
export const SCANNED: readonly Status[] = STATUSES.filter((s) => !UNHEALTHY.includes(s));

/** A status set as SQL, for `status IN ${sqlStatuses(…)}`: ('failed', 'dead'). */
export function sqlStatuses(statuses: readonly Status[]): string {
  return `(${statuses.map((s) => `'${s}'`).join(', ')})`;
}
