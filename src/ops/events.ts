import type pg from 'pg';
import type { StoredRow } from '../store/outbox-row.ts';
import { unpublishedRowsSql } from '../store/progress.ts';
import { companion } from '../store/sql-ident.ts';
import { type EventFilter, filterSql, type Status } from './event-filter.ts';
import { OpsInputError } from './input-error.ts';

/** One outbox row with every column, as the operator commands read it. */
export interface EventRecord extends StoredRow {
  next_attempt_at: Date | null;
  last_error: string | null;
  published_at: Date | null;
}

/**
 * Operator commands read each row's truthful status (docs/outbox-table.md, "Status"), from the
 * cheapest source that has it:
 *  - only 'pending': the rows outside the progress record's ranges, found by id ranges (never a
 *    scan of the published rows);
 *  - neither 'pending' nor 'published' (failed, dead, parked, discarded): the table itself — the
 *    row's own status is the truthful one there, and its partial indexes serve;
 *  - otherwise the view `<table>_with_status`.
 */
function source(table: string, f: EventFilter): string {
  if (f.statuses.length === 1 && f.statuses[0] === 'pending')
    return unpublishedRowsSql(table, companion(table, '_relay_progress'));
  if (!f.statuses.some((s) => s === 'pending' || s === 'published')) return `${table} AS o`;
  return `${companion(table, '_with_status')} AS o`;
}
/**
 * Every column of an event as [name, text] pairs, in table order (headers and payload apart: each
 * reader renders them its own way). `none` stands for NULL. For `events show` and the console.
 */
export function eventColumns(e: EventRecord, none: string): [string, string][] {
  const iso = (d: Date | null) => d?.toISOString() ?? none;
  return [
    ['id', e.id],
    ['event_id', e.event_id],
    ['aggregate_type', e.aggregate_type],
    ['aggregate_id', e.aggregate_id],
    ['event_type', e.event_type],
    ['content_type', e.content_type],
    ['traceparent', e.traceparent ?? none],
    ['created_at', iso(e.created_at)],
    ['status', e.status],
    ['attempts', String(e.attempts)],
    ['next_attempt_at', iso(e.next_attempt_at)],
    ['published_at', iso(e.published_at)],
    ['last_error', e.last_error ?? none],
  ];
}

const view = (table: string) => companion(table, '_with_status');

const COLUMNS = `id::text AS id, event_id::text AS event_id, aggregate_type, aggregate_id, event_type, payload,
  content_type, headers, traceparent, created_at, status, attempts, next_attempt_at, last_error, published_at`;

/** Rows matching the filter in id order (stable paging: pass the last id as --after-id). */
export async function listEvents(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  limit: number,
): Promise<EventRecord[]> {
  const w = filterSql(f);
  const r = await db.query<EventRecord>(
    `SELECT ${COLUMNS} FROM ${source(table, f)} WHERE ${w.sql} ORDER BY o.id LIMIT $${w.params.length + 1}`,
    [...w.params, limit],
  );
  return r.rows;
}

export async function countEvents(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const others = f.statuses.filter((s) => s !== 'pending');
  if (others.length < f.statuses.length) {
    // Outside the progress record's ranges a row's own 'pending' is its truthful status.
    const p: EventFilter = { ...f, statuses: ['pending'] };
    const w = filterSql(p);
    const r = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM ${source(table, p)} WHERE ${w.sql}`,
      w.params,
    );
    if (Number(r.rows[0]!.n) > 0) out.pending = Number(r.rows[0]!.n);
  }
  if (others.length > 0) {
    const o: EventFilter = { ...f, statuses: others };
    const w = filterSql(o);
    const r = await db.query<{ status: string; n: string }>(
      `SELECT status, count(*)::text AS n FROM ${source(table, o)} WHERE ${w.sql} GROUP BY status`,
      w.params,
    );
    for (const x of r.rows) out[x.status] = Number(x.n);
  }
  return out;
}

export async function showEvent(db: pg.ClientBase, table: string, id: string): Promise<EventRecord> {
  const r = await db.query<EventRecord>(`SELECT ${COLUMNS} FROM ${view(table)} WHERE id = $1::bigint`, [id]);
  if (!r.rows[0]) throw new OpsInputError(`event ${id} does not exist in ${table}`);
  return r.rows[0];
}

/**
 * The rows an action applies to: the named ids — every one must exist and be in an allowed
 * status, else nothing changes — or the filter's matches. The action's UPDATE re-checks the status.
 */
export async function selectTargets(
  db: pg.ClientBase,
  table: string,
  target: { ids: string[] } | { filter: EventFilter },
  allowed: readonly Status[],
): Promise<string[]> {
  if ('ids' in target) {
    const r = await db.query<{ id: string; status: string }>(
      `SELECT id::text AS id, status FROM ${view(table)} AS o WHERE id = ANY($1::bigint[]) ORDER BY o.id`,
      [target.ids],
    );
    const found = new Map(r.rows.map((x) => [x.id, x.status]));
    const missing = target.ids.filter((id) => !found.has(id));
    if (missing.length) throw new OpsInputError(`no such event: ${missing.join(', ')} (nothing changed)`);
    const wrong = r.rows.filter((x) => !allowed.includes(x.status as Status));
    if (wrong.length) {
      throw new OpsInputError(
        `${wrong.map((x) => `event ${x.id} is ${x.status}`).join(', ')}; only ${allowed.join('/')} events qualify (nothing changed)`,
      );
    }
    return r.rows.map((x) => x.id);
  }
  const w = filterSql(target.filter);
  const r = await db.query<{ id: string }>(
    `SELECT id::text AS id FROM ${source(table, target.filter)} WHERE ${w.sql} ORDER BY o.id`,
    w.params,
  );
  return r.rows.map((x) => x.id);
}

/**
 * Failed/dead → failed and due now; the sweeper publishes it on its next round and, in strict
 * ordering, then releases the aggregate's parked events in order.
 */
export async function resendEvents(
  db: pg.ClientBase,
  table: string,
  ids: readonly string[],
  resetAttempts: boolean,
): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table} SET status = 'failed', next_attempt_at = now(),
            attempts = CASE WHEN $2::boolean THEN 0 ELSE attempts END
      WHERE id = ANY($1::bigint[]) AND status IN ('failed', 'dead')`,
    [ids, resetAttempts],
  );
  return r.rowCount ?? 0;
}

/**
 * Failed/dead → discarded (kept for audit until retention). The sweeper releases parked events
 * that no longer have a failed or dead event ahead of them, so a discarded head frees its
 * aggregate's followers on its next round.
 */
export async function discardEvents(
  db: pg.ClientBase,
  table: string,
  ids: readonly string[],
): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table} SET status = 'discarded', next_attempt_at = NULL
      WHERE id = ANY($1::bigint[]) AND status IN ('failed', 'dead')`,
    [ids],
  );
  return r.rowCount ?? 0;
}
