import type pg from 'pg';
import { progressTable } from '../store/progress-table.ts';
import { qualified } from '../store/sql-ident.ts';
import { TIMELINE_SQL } from '../store/timeline.ts';
import { recordProgress } from './progress.ts';

export interface FailedRow {
  id: string;
  /** "class/reason: message", stored in last_error. */
  error: string;
  /** Delay before the sweeper retries it, ms. */
  retryInMs: number;
}

/** A row the stream decided an outcome for, and the transaction that inserted it (pgoutput BEGIN). */
export interface StreamedRow {
  id: string;
  /** 32-bit xid; 0 = unknown. */
  xid: number;
}

/**
 * The relay's runtime statements on the outbox table and its progress record: parameterised,
 * one statement per batch and outcome (on the happy path only the progress record: see
 * progress.ts). Every state change is guarded by the state it leaves, so a row re-streamed after
 * a crash cannot be moved twice (no second 'failed' record, no attempts counted twice).
 *
 * Every outcome statement returns its row count, and callers must check it (design.md §7):
 * WAL order is not visibility order, so a row the stream just delivered may not be visible to
 * this pool's snapshots yet (microseconds under load; the whole wait while a synchronous
 * standby holds the commit). A short count is then not a success: see unwritten().
 *
 * Every outcome statement takes `on`, the timeline its outcomes were observed on
 * (store/timeline.ts), and matches nothing on a server of another timeline: after a promotion an
 * id may name another row (the new primary reuses ids), so a short count may also mean that —
 * the caller tells the two apart with currentTimeline().
 */
export class OutboxStore {
  readonly db: pg.Pool;
  readonly table: string;
  /** The quoted progress table (progress.ts). */
  readonly progress: string;

  constructor(db: pg.Pool, schema: string, table: string) {
    this.db = db;
    this.table = qualified(schema, table);
    this.progress = progressTable(schema, table);
  }

  /**
   * Records the batch's settled ids in the slot's progress record: published ones, and those
   * whose failure outcome is already written on the row (the row's status wins). One statement;
   * 1 = written. Rows need not be visible yet: the record is about ids, and a row that becomes
   * visible later is read through it as published (WAL order is not visibility order).
   */
  async recordProgress(slot: string, ids: readonly string[], on: string): Promise<number> {
    if (ids.length === 0) return 1;
    return recordProgress(this.db, this.progress, slot, ids, on);
  }

  /** First permanent failure of events from the stream: attempts = 1, due again after retryInMs. */
  async recordFailed(rows: readonly FailedRow[], on: string): Promise<number> {
    if (rows.length === 0) return 0;
    const r = await this.db.query(
      `UPDATE ${this.table} AS o
          SET status = 'failed', attempts = 1, last_error = f.error,
              next_attempt_at = now() + f.retry_ms * interval '1 millisecond'
         FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, error, retry_ms)
        WHERE o.id = f.id AND o.status = 'pending' AND ${TIMELINE_SQL} = $4`,
      [rows.map((r) => r.id), rows.map((r) => r.error), rows.map((r) => r.retryInMs), on],
    );
    return r.rowCount ?? 0;
  }

  /**
   * After an outcome statement matched fewer rows than it named: which of `rows` still need
   * it, in one statement (one snapshot).
   *   - visible, status 'pending': still to write (it became visible since the statement);
   *   - visible, any other status: moved on (written by that statement, or by an earlier
   *     session before a crash, or by an operator): done;
   *   - not visible, its transaction not visible to this snapshot either: committed in the WAL
   *     but not visible yet: still to write (retry later, never settle past it);
   *   - not visible although its transaction is: the row was deleted: done.
   * The 32-bit xid is widened to the xid8 nearest the snapshot's xmax (within 2^31).
   */
  async unwritten(rows: readonly StreamedRow[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const r = await this.db.query<{ id: string }>(
      `SELECT r.id::text AS id
         FROM unnest($1::bigint[], $2::bigint[]) AS r(id, xid)
         CROSS JOIN LATERAL (SELECT pg_current_snapshot() AS snap) s
         CROSS JOIN LATERAL (SELECT pg_snapshot_xmax(s.snap)::text::bigint AS xmax) m
         CROSS JOIN LATERAL (SELECT m.xmax - m.xmax % 4294967296 + r.xid AS c) c
         CROSS JOIN LATERAL (SELECT CASE WHEN c.c > m.xmax + 2147483648 THEN c.c - 4294967296
                                         WHEN c.c < m.xmax - 2147483648 THEN c.c + 4294967296
                                         ELSE c.c END AS full) f
         LEFT JOIN ${this.table} AS o ON o.id = r.id
        WHERE CASE WHEN o.id IS NOT NULL THEN o.status = 'pending'
                   ELSE r.xid <> 0 AND f.full >= 0
                        AND NOT pg_visible_in_snapshot(f.full::text::xid8, s.snap) END`,
      [rows.map((x) => x.id), rows.map((x) => x.xid)],
    );
    return r.rows.map((x) => x.id);
  }

  /**
   * Rows whose failure PostgreSQL refuses to record (54000: their aggregate columns are too long
   * for the index of failed/dead/parked rows): 'discarded', the one unhealthy status outside
   * that index, with the reason — recorded and visible (events list --status discarded), so the
   * stream can confirm past them.
   */
  async recordUnrecordable(rows: readonly { id: string; error: string }[], on: string): Promise<number> {
    if (rows.length === 0) return 0;
    const r = await this.db.query(
      `UPDATE ${this.table} AS o SET status = 'discarded', attempts = 1, last_error = left(f.error, 2000), next_attempt_at = NULL
         FROM unnest($1::bigint[], $2::text[]) AS f(id, error)
        WHERE o.id = f.id AND o.status = 'pending' AND ${TIMELINE_SQL} = $3`,
      [rows.map((r) => r.id), rows.map((r) => r.error), on],
    );
    return r.rowCount ?? 0;
  }

  /** Events held behind a failed event of their aggregate (strict ordering). */
  async recordParked(ids: readonly string[], on: string): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.db.query(
      `UPDATE ${this.table} SET status = 'parked' WHERE id = ANY($1::bigint[]) AND status = 'pending' AND ${TIMELINE_SQL} = $2`,
      [ids, on],
    );
    return r.rowCount ?? 0;
  }
}
