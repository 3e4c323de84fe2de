import type pg from 'pg';
import { type FailedRow, OutboxStore, type StreamedRow } from '../../lifecycle/outbox-store.ts';
import type { OutboxEvent } from '../../route/event.ts';
import { qualified } from '../../store/sql-ident.ts';
import { TIMELINE_SQL } from '../../store/timeline.ts';

/**
 * The Debezium preset's store (--compat debezium): the application's table is Debezium's and is
 * never written. Progress is the slot's confirmed position alone (no progress record: the rows
 * may not even exist, with insert-then-delete). An event that cannot be published goes to the
 * side table `<table>_relay_failed` with its reason, as the WAL carried it (each column's text),
 * keyed by the slot and the insert's WAL position (the event's id in this mode), so a replay
 * after a crash finds it there already.
 */
export class DebeziumSideStore extends OutboxStore {
  readonly failedTable: string;
  readonly #slot: string;
  /** The batch's events, by id: the recorder names rows by id, the side table needs their columns. */
  readonly #events = new Map<string, OutboxEvent>();

  constructor(db: pg.Pool, schema: string, table: string, slot: string) {
    super(db, schema, table);
    this.failedTable = qualified(schema, `${table}_relay_failed`);
    this.#slot = slot;
  }

  /** Remembers a streamed event until its outcome is recorded (only failures need it). */
  remember(event: OutboxEvent): void {
    this.#events.set(event.id, event);
  }

  override async recordProgress(_slot: string, ids: readonly string[]): Promise<number> {
    for (const id of ids) this.#events.delete(id);
    return 1;
  }

  override async recordFailed(rows: readonly FailedRow[], on: string): Promise<number> {
    return this.#insert(
      rows.map((r) => ({ id: r.id, status: 'failed', error: r.error, retryInMs: r.retryInMs })),
      on,
    );
  }

  override async recordUnrecordable(
    rows: readonly { id: string; error: string }[],
    on: string,
  ): Promise<number> {
    return this.#insert(
      rows.map((r) => ({ id: r.id, status: 'discarded', error: r.error, retryInMs: null })),
      on,
    );
  }

  override async recordParked(ids: readonly string[], on: string): Promise<number> {
    return this.#insert(
      ids.map((id) => ({
        id,
        status: 'parked',
        error: 'parked behind a failed event of its aggregate',
        retryInMs: null,
      })),
      on,
    );
  }

  /** Every row named is in the side table after this (inserted now, or by an earlier replay). */
  override async unwritten(_rows: readonly StreamedRow[]): Promise<string[]> {
    return [];
  }

  /** 0 when the server is not on timeline `on` (WAL positions, like ids, name events of one timeline). */
  async #insert(
    rows: readonly { id: string; status: string; error: string; retryInMs: number | null }[],
    on: string,
  ): Promise<number> {
    if (rows.length === 0) return 0;
    const columns = rows.map((r) => {
      const e = this.#events.get(r.id);
      if (!e?.columns) throw new Error(`event at WAL position ${r.id} is not in this batch`);
      return e.columns;
    });
    const r = await this.db.query<{ ok: boolean }>(
      `WITH g AS (SELECT ${TIMELINE_SQL} = $7 AS ok),
       ins AS (INSERT INTO ${this.failedTable} (slot_name, wal_position, columns, status, last_error, next_attempt_at)
       SELECT $1, f.id, f.columns, f.status, f.error,
              CASE WHEN f.retry_ms IS NULL THEN NULL ELSE clock_timestamp() + f.retry_ms * interval '1 millisecond' END
         FROM unnest($2::bigint[], $3::jsonb[], $4::text[], $5::text[], $6::float8[])
              AS f(id, columns, status, error, retry_ms), g
        WHERE g.ok
       ON CONFLICT (slot_name, wal_position) DO NOTHING RETURNING 1)
       SELECT ok FROM g`,
      [
        this.#slot,
        rows.map((r) => r.id),
        columns.map((c) => JSON.stringify(c)),
        rows.map((r) => r.status),
        rows.map((r) => r.error),
        rows.map((r) => r.retryInMs),
        on,
      ],
    );
    return r.rows[0]?.ok ? rows.length : 0;
  }
}
