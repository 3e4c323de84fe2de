import type pg from 'pg';
import { qualified } from './sql-ident.ts';

export interface FailedRow {
  id: string;
  /** "class/reason: message", stored in last_error. */
  error: string;
  /** Delay before the sweeper retries it, ms. */
  retryInMs: number;
}

/**
 * The relay's runtime statements on the outbox table: parameterised, one statement per
 * batch. Every state change is guarded by the state it leaves, so a row re-streamed after
 * a crash cannot be moved twice (no second 'failed' record, no attempts counted twice).
 */
export class OutboxStore {
  readonly db: pg.Pool;
  readonly table: string;

  constructor(db: pg.Pool, schema: string, table: string) {
    this.db = db;
    this.table = qualified(schema, table);
  }

  async markPublished(ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    // Only 'pending' rows: rows the failure lifecycle owns change state only through it.
    const r = await this.db.query(
      `UPDATE ${this.table} SET status = 'published', published_at = now()
        WHERE id = ANY($1::bigint[]) AND status = 'pending'`,
      [ids],
    );
    return r.rowCount ?? 0;
  }

  /** First permanent failure of events from the stream: attempts = 1, due again after retryInMs. */
  async recordFailed(rows: readonly FailedRow[]): Promise<number> {
    if (rows.length === 0) return 0;
    const r = await this.db.query(
      `UPDATE ${this.table} AS o
          SET status = 'failed', attempts = 1, last_error = f.error,
              next_attempt_at = now() + f.retry_ms * interval '1 millisecond'
         FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, error, retry_ms)
        WHERE o.id = f.id AND o.status = 'pending'`,
      [rows.map((r) => r.id), rows.map((r) => r.error), rows.map((r) => r.retryInMs)],
    );
    return r.rowCount ?? 0;
  }

  /** Events held behind a failed event of their aggregate (strict ordering). */
  async recordParked(ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const r = await this.db.query(
      `UPDATE ${this.table} SET status = 'parked' WHERE id = ANY($1::bigint[]) AND status = 'pending'`,
      [ids],
    );
    return r.rowCount ?? 0;
  }
}
