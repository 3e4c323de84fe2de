import type pg from 'pg';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { progressTable } from '../store/progress-table.ts';
import { companion, qualified } from '../store/sql-ident.ts';
import { LAST_ERROR_PREFIX } from './failure-policy.ts';
import { type EventFilter, filterSql } from './filter.ts';
import { ROW_COLUMNS, type StoredRow } from './outbox-row.ts';
import { unpublishedRowsSql } from './progress.ts';
import { RESOLVABLE, SCANNED, sqlStatuses, UNHEALTHY } from './statuses.ts';

/**
 * The statements that read outbox rows by status: the operator commands' lists, counts and
 * single rows (events, status, the console), the sweeper's gauges, the demo's wait. Each reads
 * the truthful status (statuses.ts) from the cheapest source that has it.
 */

type Db = pg.Pool | pg.ClientBase;

/** One outbox row with every column, as the operator commands read it. */
export interface EventRecord extends StoredRow {
  next_attempt_at: Date | null;
  last_error: string | null;
  published_at: Date | null;
  /** The Debezium preset's side table: every column of the Debezium row as the WAL carried it. */
  columns?: Record<string, string | null>;
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
  return `${view(table)} AS o`;
}

/** The view with each row's truthful status, beside a quoted table. */
const view = (table: string) => companion(table, '_with_status');

const COLUMNS = `${ROW_COLUMNS}, next_attempt_at, last_error, published_at`;

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

/** Rows matching the filter, by truthful status (statuses with no row are absent). */
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

/** One row with every column and its truthful status; null when it does not exist. */
export async function readEvent(db: pg.ClientBase, table: string, id: string): Promise<EventRecord | null> {
  const r = await db.query<EventRecord>(`SELECT ${COLUMNS} FROM ${view(table)} WHERE id = $1::bigint`, [id]);
  return r.rows[0] ?? null;
}

/** The truthful status of each named row that exists, in id order. */
export async function statusesOf(
  db: pg.ClientBase,
  table: string,
  ids: readonly string[],
): Promise<{ id: string; status: string }[]> {
  const r = await db.query<{ id: string; status: string }>(
    `SELECT id::text AS id, status FROM ${view(table)} AS o WHERE id = ANY($1::bigint[]) ORDER BY o.id`,
    [ids],
  );
  return r.rows;
}

/** The ids of every row matching the filter, in id order. */
export async function idsMatching(db: pg.ClientBase, table: string, f: EventFilter): Promise<string[]> {
  const w = filterSql(f);
  const r = await db.query<{ id: string }>(
    `SELECT id::text AS id FROM ${source(table, f)} WHERE ${w.sql} ORDER BY o.id`,
    w.params,
  );
  return r.rows.map((x) => x.id);
}

export interface StatusCounts {
  /** Rows by truthful status (statuses with no row are absent). */
  counts: Record<string, number>;
  oldestPendingAgeSeconds: number | null;
  oldestFailedAgeSeconds: number | null;
  /** Aggregates with at least one parked event. */
  parkedAggregates: number;
}

/**
 * `outbox-relay status`: the whole table by truthful status, and the ages that matter. `schema`
 * and `table` unquoted.
 */
export async function statusCounts(
  db: pg.ClientBase,
  schema: string,
  tableName: string,
  o: { published?: boolean } = {},
): Promise<StatusCounts> {
  const table = qualified(schema, tableName);
  const counts: Record<string, number> = {};
  let oldestFailed: number | null = null;
  // Without published (the health watch, every 15 s): only the unsettled rows, through their
  // partial index, never a scan of the whole table; pending comes from the progress record's
  // complement below either way.
  const withPublished = o.published ?? true;
  const byStatus = await db.query<{ status: string; n: string; oldest: string | null }>(
    `SELECT status, count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest
       FROM ${table}${withPublished ? '' : ` WHERE status IN ${sqlStatuses(UNHEALTHY)}`} GROUP BY status`,
  );
  for (const r of byStatus.rows) {
    counts[r.status] = Number(r.n);
    if (r.status === 'failed') oldestFailed = Number(r.oldest);
  }
  // The row's 'pending' is its truthful status only outside the progress record's ranges
  // (docs/outbox-table.md, "Status"): read those rows by id ranges; the rest are published.
  // 42P01: the progress table is not migrated yet (sql/000003): the rows' own statuses are all there is.
  const pending = await db
    .query<{ n: string; oldest: string | null }>(
      `SELECT count(*)::text AS n, extract(epoch FROM now() - min(o.created_at))::text AS oldest
         FROM ${unpublishedRowsSql(table, progressTable(schema, tableName))} WHERE o.status = 'pending'`,
    )
    .catch((e) => {
      if (sqlStateOf(e) !== SqlState.UNDEFINED_TABLE) throw e;
      const row = byStatus.rows.find((r) => r.status === 'pending');
      if (row || withPublished) return { rows: [{ n: row?.n ?? '0', oldest: row?.oldest ?? null }] };
      return db.query<{ n: string; oldest: string | null }>(
        `SELECT count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest
           FROM ${table} WHERE status = 'pending'`,
      );
    });
  const truly = Number(pending.rows[0]!.n);
  const covered = Math.max(0, (counts.pending ?? 0) - truly);
  if (covered > 0 && withPublished) counts.published = (counts.published ?? 0) + covered;
  if (truly > 0) counts.pending = truly;
  else delete counts.pending;
  const oldestPending = pending.rows[0]!.oldest === null ? null : Number(pending.rows[0]!.oldest);
  const parked = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM (SELECT DISTINCT aggregate_type, aggregate_id FROM ${table} WHERE status = 'parked') p`,
  );
  return {
    counts,
    oldestPendingAgeSeconds: oldestPending,
    oldestFailedAgeSeconds: oldestFailed,
    parkedAggregates: Number(parked.rows[0]!.n),
  };
}

/** Failed or dead events of one status, aggregate type, event type and reason (`status`). */
export interface FailingRow {
  status: 'failed' | 'dead';
  aggregate_type: string;
  event_type: string;
  /** The reason prefix of last_error (`permanent/UNKNOWN_TOPIC_OR_PARTITION:`), or null. */
  last_error: string | null;
  n: string;
}

/** `status`: failed and dead rows grouped by reason, through the partial index of unsettled rows. */
export async function failingGroups(db: Db, table: string, limit: number): Promise<FailingRow[]> {
  const r = await db.query<FailingRow>(
    `SELECT status, aggregate_type, event_type, substring(last_error FROM '${LAST_ERROR_PREFIX}') AS last_error,
            count(*)::text AS n
       FROM ${table} WHERE status IN ${sqlStatuses(RESOLVABLE)}
      GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 LIMIT $1`,
    [limit],
  );
  return r.rows;
}

/** The sweeper's gauges: failed, dead and parked rows (their own status is the truthful one), with ages. */
export async function unhealthyCounts(
  db: Db,
  table: string,
): Promise<Map<string, { status: string; n: string; oldest: string | null }>> {
  const r = await db.query<{ status: string; n: string; oldest: string | null }>(
    `SELECT status, count(*)::text AS n, extract(epoch FROM now() - min(created_at))::text AS oldest
       FROM ${table} WHERE status IN ${sqlStatuses(UNHEALTHY)} GROUP BY status`,
  );
  return new Map(r.rows.map((x) => [x.status, x]));
}

/** Truly pending rows: only the complement of the progress record is read (cheap, each round). */
export async function pendingCount(db: Db, table: string, progress: string): Promise<number> {
  const r = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM ${unpublishedRowsSql(table, progress)} WHERE o.status = 'pending'`,
  );
  return Number(r.rows[0]!.n);
}

/**
 * Rows whose own status is pending, published or discarded — a scan of the table: keep it
 * infrequent. Rows still saying 'pending' are published unless pendingCount counts them.
 */
export async function storedSettledCounts(db: Db, table: string): Promise<Map<string, number>> {
  const r = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${table} WHERE status IN ${sqlStatuses(SCANNED)} GROUP BY status`,
  );
  return new Map(r.rows.map((x) => [x.status, Number(x.n)]));
}

/**
 * The table's heap size in bytes (0 when it cannot be found): what a scan of it reads. A
 * partitioned table's own size is 0: its partitions' are summed. pg_partition_tree lists no row
 * at all for a plain table (one that is neither partitioned nor a partition): its own size then.
 */
export async function tableBytes(db: Db, table: string): Promise<number> {
  const r = await db.query<{ b: number }>(
    `SELECT coalesce(sum(pg_relation_size(relid)), pg_relation_size(to_regclass($1)), 0)::float8 AS b
       FROM pg_partition_tree(to_regclass($1))`,
    [table],
  );
  return Number(r.rows[0]?.b ?? 0);
}

/** Which of these aggregates still have a failed, dead or parked row (strict ordering: still held). */
/** Every aggregate a failed, dead or parked row of the outbox table holds (a session's start). */
export async function allHeldAggregates(db: Db, table: string): Promise<[string, string][]> {
  const r = await db.query<{ aggregate_type: string; aggregate_id: string }>(
    `SELECT DISTINCT aggregate_type, aggregate_id FROM ${table}
      WHERE status IN ${sqlStatuses(UNHEALTHY)} AND aggregate_type IS NOT NULL AND aggregate_id IS NOT NULL`,
  );
  return r.rows.map((row) => [row.aggregate_type, row.aggregate_id]);
}

export async function heldAggregates(
  db: Db,
  table: string,
  keys: readonly [string, string][],
): Promise<{ aggregate_type: string; aggregate_id: string }[]> {
  const r = await db.query<{ aggregate_type: string; aggregate_id: string }>(
    `SELECT DISTINCT o.aggregate_type, o.aggregate_id
       FROM ${table} AS o JOIN unnest($1::text[], $2::text[]) AS k(type, id)
         ON o.aggregate_type = k.type AND o.aggregate_id = k.id
      WHERE o.status IN ${sqlStatuses(UNHEALTHY)}`,
    [keys.map(([type]) => type), keys.map(([, id]) => id)],
  );
  return r.rows;
}

/**
 * Lost-slot recovery: rows in [from, to) whose own status is 'pending' (the caller passes a range
 * outside every progress record), in id order.
 */
export async function pendingRowsBetween(
  db: Db,
  table: string,
  from: bigint,
  to: bigint,
  limit: number,
): Promise<StoredRow[]> {
  const r = await db.query<StoredRow>(
    `SELECT ${ROW_COLUMNS} FROM ${table} AS o
      WHERE o.id >= $1::bigint AND o.id < $2::bigint AND o.status = 'pending'
      ORDER BY o.id LIMIT $3`,
    [from.toString(), to.toString(), limit],
  );
  return r.rows;
}

/** The demo: rows not yet truly published. */
export async function notPublishedCount(db: Db, table: string): Promise<number> {
  const r = await db.query<{ pending: string }>(
    `SELECT count(*) FILTER (WHERE status <> 'published')::text AS pending FROM ${view(table)}`,
  );
  return Number(r.rows[0]!.pending);
}

/** Every row by truthful status, through the view (a scan: for the demo's summary). */
export async function countsByStatus(db: Db, table: string): Promise<Record<string, number>> {
  const r = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${view(table)} GROUP BY status ORDER BY status`,
  );
  return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
}
