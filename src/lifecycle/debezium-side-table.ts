import type pg from 'pg';
import { RESOLVABLE, sqlStatuses, UNHEALTHY } from './statuses.ts';

/**
 * Every statement on the Debezium preset's side table (`<table>_relay_failed`,
 * sql/debezium/000001_side_tables.sql): the events of a Debezium outbox that could not be
 * published, as the WAL carried them. The stream inserts them (debezium-side-store.ts); the side
 * sweeper retries, kills and releases them; operators resend and discard them (their reads:
 * debezium-side-events.ts). Statuses:
 *   failed  → published (a retry went through) | failed (again, later) | dead (max attempts)
 *           | failed (`events resend`, due now) | discarded (`events discard`)
 *   parked  → published (released in WAL order once its key has no failed or dead event before it)
 *   dead    → failed (`events resend`, due now) | discarded (`events discard`)
 * A discarded or published head releases its key's parked events on the sweeper's next round.
 */
export interface SideRow {
  walPosition: string;
  columns: Record<string, string | null>;
  status: string;
  attempts: number;
  lastError: string | null;
  nextAttemptAt: Date | null;
  createdAt: Date;
}

function toRow(r: Record<string, unknown>): SideRow {
  return {
    walPosition: String(r.wal_position),
    columns: r.columns as Record<string, string | null>,
    status: r.status as string,
    attempts: r.attempts as number,
    lastError: (r.last_error as string | null) ?? null,
    nextAttemptAt: (r.next_attempt_at as Date | null) ?? null,
    createdAt: r.created_at as Date,
  };
}

/**
 * Due work in WAL order: failed rows whose time has come, and parked rows whose key (the
 * `keyColumn` value) has no failed or dead row before them.
 */
export async function dueSideRows(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  keyColumn: string,
  limit: number,
): Promise<SideRow[]> {
  const r = await db.query(
    `SELECT * FROM ${table} AS f
      WHERE f.slot_name = $1
        AND ((f.status = 'failed' AND f.next_attempt_at <= clock_timestamp())
          OR (f.status = 'parked' AND NOT EXISTS (
                SELECT 1 FROM ${table} AS h
                 WHERE h.slot_name = f.slot_name AND h.status IN ('failed', 'dead')
                   AND h.wal_position < f.wal_position
                   AND h.columns ->> $2 IS NOT DISTINCT FROM f.columns ->> $2)))
      ORDER BY f.wal_position
      LIMIT $3`,
    [slot, keyColumn, limit],
  );
  return r.rows.map(toRow);
}

/**
 * Strict ordering after a restart: the aggregates that a failed, dead or parked row of the side
 * table holds, as the stream names them (replication/columns-tuple.ts columnsEvent: the
 * route.by.field column's text and the table.field.event.key column's, each '' when absent), so
 * the stream parks their next events behind them instead of publishing them first.
 */
export async function heldSideAggregates(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  routeByColumn: string,
  keyColumn: string | null,
): Promise<[string, string][]> {
  const r = await db.query<{ t: string; k: string }>(
    `SELECT DISTINCT COALESCE(columns ->> $2, '') AS t, COALESCE(columns ->> $3::text, '') AS k
       FROM ${table} WHERE slot_name = $1 AND status IN ${sqlStatuses(UNHEALTHY)}`,
    [slot, routeByColumn, keyColumn],
  );
  return r.rows.map((row) => [row.t, row.k]);
}

export async function markSidePublished(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  walPosition: string,
): Promise<void> {
  await db.query(
    `UPDATE ${table} SET status = 'published', published_at = clock_timestamp(), next_attempt_at = NULL
      WHERE slot_name = $1 AND wal_position = $2 AND status IN ('failed', 'parked')`,
    [slot, walPosition],
  );
}

/** A retry refused again: due after `retryInMs`, or dead (retryInMs null). */
export async function markSideFailed(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  walPosition: string,
  error: string,
  retryInMs: number | null,
): Promise<void> {
  await db.query(
    `UPDATE ${table}
        SET attempts = attempts + 1, last_error = $3,
            status = CASE WHEN $4::float8 IS NULL THEN 'dead' ELSE 'failed' END,
            next_attempt_at = CASE WHEN $4::float8 IS NULL THEN NULL
                                   ELSE clock_timestamp() + $4::float8 * interval '1 millisecond' END
      WHERE slot_name = $1 AND wal_position = $2 AND status IN ('failed', 'parked')`,
    [slot, walPosition, error, retryInMs],
  );
}

/** `events resend` (or the console) in the preset: failed and dead rows due now; the number changed. */
export async function resendSideRows(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  walPositions: readonly string[],
  resetAttempts: boolean,
): Promise<number> {
  if (walPositions.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table}
        SET status = 'failed', next_attempt_at = clock_timestamp(),
            attempts = CASE WHEN $3::boolean THEN 0 ELSE attempts END
      WHERE slot_name = $1 AND wal_position = ANY($2::bigint[]) AND status IN ${sqlStatuses(RESOLVABLE)}`,
    [slot, walPositions, resetAttempts],
  );
  return r.rowCount ?? 0;
}

/** `events discard` (or the console) in the preset: failed and dead rows discarded; the number changed. */
export async function discardSideRows(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
  walPositions: readonly string[],
): Promise<number> {
  if (walPositions.length === 0) return 0;
  const r = await db.query(
    `UPDATE ${table} SET status = 'discarded', next_attempt_at = NULL
      WHERE slot_name = $1 AND wal_position = ANY($2::bigint[]) AND status IN ${sqlStatuses(RESOLVABLE)}`,
    [slot, walPositions],
  );
  return r.rowCount ?? 0;
}

/** The relay's gauges (outbox_events{status}): failed, dead and parked rows of the slot, with ages. */
export async function sideUnhealthyCounts(
  db: pg.Pool | pg.ClientBase,
  table: string,
  slot: string,
): Promise<Map<string, { status: string; n: string; oldest: string | null }>> {
  const r = await db.query<{ status: string; n: string; oldest: string | null }>(
    `SELECT status, count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest
       FROM ${table} WHERE slot_name = $1 AND status IN ${sqlStatuses(UNHEALTHY)} GROUP BY status`,
    [slot],
  );
  return new Map(r.rows.map((x) => [x.status, x]));
}
