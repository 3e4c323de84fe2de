import type pg from 'pg';
import { RESOLVABLE, sqlStatuses, UNHEALTHY } from '../../lifecycle/statuses.ts';
import { withinBytes } from '../../lifecycle/transitions.ts';

/**
 * Every statement on the Debezium preset's side table (`<table>_relay_failed`,
 * sql/debezium/000001_side_tables.sql): the events of a Debezium outbox that could not be
 * published, as the WAL carried them. The stream inserts them (side-store.ts); the
 * sweeper retries, kills and releases them (side-table-rows.ts); operators resend and discard them (their reads:
 * side-events.ts). Statuses:
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

type Db = pg.Pool | pg.ClientBase;

/**
 * An aggregate of the side table as the stream names it (replication/columns-tuple.ts
 * columnsEvent): the route.by.field column's text and the table.field.event.key column's, each ''
 * when absent. `$2` and `$3` are the two column names.
 */
const AGGREGATE = (alias: string) =>
  `COALESCE(${alias}.columns ->> $2, '') = $4 AND COALESCE(${alias}.columns ->> $3::text, '') = $5`;

/** Failed rows whose time has come, in WAL order, FOR UPDATE SKIP LOCKED (in the retry's transaction). */
export async function claimDueSide(
  db: Db,
  table: string,
  slot: string,
  limit: number,
  maxBytes = Number.MAX_SAFE_INTEGER,
): Promise<SideRow[]> {
  // As claimDueFailed (lifecycle/transitions.ts): up to `limit` locked, only those within
  // `maxBytes` of their columns read (the first always); the rest wait for the next round.
  const r = await db.query(
    `${withinBytes(
      `SELECT wal_position, octet_length(columns::text) AS bytes FROM ${table}
        WHERE slot_name = $1 AND status = 'failed' AND next_attempt_at <= clock_timestamp()
        ORDER BY wal_position LIMIT $2 FOR UPDATE SKIP LOCKED`,
      'wal_position',
      '$3',
    )}
     SELECT f.* FROM ${table} AS f JOIN taken USING (wal_position)
      WHERE f.slot_name = $1 AND taken.in_budget
      ORDER BY f.wal_position`,
    [slot, limit, maxBytes],
  );
  return r.rows.map(toRow);
}

/** The aggregate's parked rows in WAL order, FOR UPDATE SKIP LOCKED (in the release's transaction). */
export async function claimSideParked(
  db: Db,
  table: string,
  slot: string,
  columns: { routeBy: string; key: string | null },
  aggregate: [type: string, id: string],
  limit: number,
): Promise<SideRow[]> {
  const r = await db.query(
    `SELECT * FROM ${table} AS f
      WHERE f.slot_name = $1 AND f.status = 'parked' AND ${AGGREGATE('f')}
      ORDER BY f.wal_position LIMIT $6 FOR UPDATE SKIP LOCKED`,
    [slot, columns.routeBy, columns.key, aggregate[0], aggregate[1], limit],
  );
  return r.rows.map(toRow);
}

/** Whether the aggregate has a failed or dead row (its parked rows must wait). */
export async function sideHasUnresolvedHead(
  db: Db,
  table: string,
  slot: string,
  columns: { routeBy: string; key: string | null },
  aggregate: [type: string, id: string],
): Promise<boolean> {
  const r = await db.query(
    `SELECT 1 FROM ${table} AS f
      WHERE f.slot_name = $1 AND f.status IN ${sqlStatuses(RESOLVABLE)} AND ${AGGREGATE('f')} LIMIT 1`,
    [slot, columns.routeBy, columns.key, aggregate[0], aggregate[1]],
  );
  return !!r.rowCount;
}

/** Aggregates with parked rows and no failed or dead row before them (at most 100). */
export async function releasableSideAggregates(
  db: Db,
  table: string,
  slot: string,
  columns: { routeBy: string; key: string | null },
): Promise<[string, string][]> {
  const r = await db.query<{ t: string; k: string }>(
    `SELECT DISTINCT COALESCE(p.columns ->> $2, '') AS t, COALESCE(p.columns ->> $3::text, '') AS k
       FROM ${table} AS p
      WHERE p.slot_name = $1 AND p.status = 'parked' AND NOT EXISTS (
        SELECT 1 FROM ${table} AS h
         WHERE h.slot_name = p.slot_name AND h.status IN ${sqlStatuses(RESOLVABLE)}
           AND h.wal_position < p.wal_position
           AND h.columns ->> $2 IS NOT DISTINCT FROM p.columns ->> $2
           AND h.columns ->> $3::text IS NOT DISTINCT FROM p.columns ->> $3::text)
      LIMIT 100`,
    [slot, columns.routeBy, columns.key],
  );
  return r.rows.map((row) => [row.t, row.k]);
}

/**
 * The sweeper's move of a failed or parked row: published (published_at now), failed (due after
 * `retryInMs`) or dead; `attempts` as counted, `error` kept when null.
 */
export async function settleSideRow(
  db: Db,
  table: string,
  slot: string,
  walPosition: string,
  to: { status: 'published' | 'failed' | 'dead'; attempts: number; error?: string; retryInMs?: number },
): Promise<void> {
  await db.query(
    `UPDATE ${table}
        SET status = $3, attempts = $4, last_error = COALESCE($5, last_error),
            next_attempt_at = CASE WHEN $6::float8 IS NULL THEN NULL
                                   ELSE clock_timestamp() + $6::float8 * interval '1 millisecond' END,
            published_at = CASE WHEN $3 = 'published' THEN clock_timestamp() ELSE published_at END
      WHERE slot_name = $1 AND wal_position = $2 AND status IN ('failed', 'parked')`,
    [slot, walPosition, to.status, to.attempts, to.error ?? null, to.retryInMs ?? null],
  );
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

/**
 * Retention of the side table (SweepStore.pruneSettled): at most `limit` of the slot's settled
 * rows past their window — published (published_at) and discarded (created_at) after
 * `publishedMs`; dead (created_at) after `deadMs` when set, unless parked rows of its aggregate
 * come after it (they wait for it to be resent or discarded). Deleted rows by status.
 */
export async function pruneSideSettled(
  db: Db,
  table: string,
  slot: string,
  columns: { routeBy: string; key: string | null },
  window: { publishedMs: number; deadMs?: number },
  limit: number,
): Promise<Record<string, number>> {
  const r = await db.query<{ status: string; n: string }>(
    `WITH gone AS (
       DELETE FROM ${table} WHERE (slot_name, wal_position) IN (
         SELECT o.slot_name, o.wal_position FROM ${table} AS o
          WHERE o.slot_name = $1
            AND ((o.status IN ('published', 'discarded')
                  AND COALESCE(o.published_at, o.created_at) < now() - $2::bigint * interval '1 millisecond')
              OR ($3::bigint IS NOT NULL AND o.status = 'dead'
                  AND o.created_at < now() - $3::bigint * interval '1 millisecond'
                  AND NOT EXISTS (SELECT 1 FROM ${table} AS f
                                   WHERE f.slot_name = o.slot_name AND f.status = 'parked'
                                     AND f.wal_position > o.wal_position
                                     AND f.columns ->> $4 IS NOT DISTINCT FROM o.columns ->> $4
                                     AND f.columns ->> $5::text IS NOT DISTINCT FROM o.columns ->> $5::text)))
          LIMIT $6)
       RETURNING status)
     SELECT status, count(*)::text AS n FROM gone GROUP BY status`,
    [slot, window.publishedMs, window.deadMs ?? null, columns.routeBy, columns.key, limit],
  );
  return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
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
