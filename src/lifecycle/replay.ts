import type pg from 'pg';
import { EVENT_COLUMNS } from '../route/outbox-row.ts';
import { companion } from '../store/sql-ident.ts';
import { type EventFilter, filterSql } from './filter.ts';

/**
 * `replay`'s statements (ops/replay.ts runs them in batches): the window it copies, read by
 * truthful status through `<table>_with_status`; the copies it inserts, new 'pending' rows; and
 * where those copies are now.
 */

/** The header every replay copy carries: the id of the row it copies. */
export const REPLAY_OF_HEADER = 'x-replay-of';
export const REPLAYED_AT_HEADER = 'x-replayed-at';

export interface ReplayOptions {
  /** Also copy rows that are themselves copies (they carry x-replay-of). Default: no. */
  includeReplays?: boolean;
}

const view = (table: string) => companion(table, '_with_status');

/**
 * The WHERE clause of a replay window. Copies of copies are excluded by default: a second replay
 * over a window that a first replay's copies fall into (copies keep the original's created_at only
 * in their headers, but a window by --status or --aggregate-id has no time bound) would otherwise
 * copy the first run's copies too — 5,001 rows become 10,002.
 */
function windowSql(f: EventFilter, o: ReplayOptions): { sql: string; params: unknown[] } {
  const w = filterSql(f);
  return o.includeReplays
    ? w
    : { sql: `${w.sql} AND NOT coalesce(o.headers ? '${REPLAY_OF_HEADER}', false)`, params: w.params };
}

/** How many rows the window holds, and their id range. */
export async function countWindow(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  o: ReplayOptions,
): Promise<{ n: string; first: string | null; last: string | null }> {
  const w = windowSql(f, o);
  const r = await db.query<{ n: string; first: string | null; last: string | null }>(
    `SELECT count(*)::text AS n, min(id)::text AS first, max(id)::text AS last FROM ${view(table)} AS o WHERE ${w.sql}`,
    w.params,
  );
  return r.rows[0]!;
}

/** The table's highest id (null when empty): a replay's ceiling. */
export async function maxId(db: pg.ClientBase, table: string): Promise<string | null> {
  const max = await db.query<{ max: string | null }>(`SELECT max(id)::text AS max FROM ${table}`);
  return max.rows[0]!.max;
}

/**
 * One batch of copies: the window's rows with after < id <= ceiling, in id order, up to
 * batchSize, inserted as new 'pending' rows with x-replay-of and x-replayed-at. Returns the
 * copied ids and how many rows were inserted (the caller checks they match, in its transaction).
 */
export async function copyBatch(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  o: ReplayOptions,
  batch: { after: string; ceiling: string; batchSize: number; replayedAt: Date },
): Promise<{ ids: string[]; inserted: number }> {
  const w = windowSql(f, o);
  const n = w.params.length;
  // The event's columns as they are, but its headers say what it copies and when.
  const copied = EVENT_COLUMNS.map((c) =>
    c === 'headers'
      ? `coalesce(headers, '{}'::jsonb) || jsonb_build_object('${REPLAY_OF_HEADER}', src.id::text, '${REPLAYED_AT_HEADER}', $${n + 4}::text)`
      : c,
  ).join(', ');
  const r = await db.query<{ id: string }>(
    `WITH src AS (
       SELECT o.id, ${EVENT_COLUMNS.join(', ')}
         FROM ${view(table)} AS o
        WHERE ${w.sql} AND o.id > $${n + 1}::bigint AND o.id <= $${n + 2}::bigint
        ORDER BY o.id LIMIT $${n + 3}),
     copied AS (
       INSERT INTO ${table} (${EVENT_COLUMNS.join(', ')})
       SELECT ${copied}
         FROM src ORDER BY src.id
       RETURNING 1)
     SELECT src.id::text AS id, (SELECT count(*) FROM copied)::int AS inserted FROM src ORDER BY src.id`,
    [...w.params, batch.after, batch.ceiling, batch.batchSize, batch.replayedAt.toISOString()],
  );
  const inserted = (r.rows[0] as { inserted?: number } | undefined)?.inserted ?? 0;
  return { ids: r.rows.map((x) => x.id), inserted };
}

/**
 * The copies a replay run inserted (ids above its ceiling, its x-replayed-at stamp), by truthful
 * status: a copy is published once the slot's progress record (or its row) says so.
 */
export async function copiesByStatus(
  db: pg.ClientBase,
  table: string,
  run: { ceiling: string; replayedAt: Date },
): Promise<{ status: string; n: string }[]> {
  const r = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${view(table)} AS o
      WHERE o.id > $1::bigint AND o.headers->>'${REPLAYED_AT_HEADER}' = $2 AND o.headers ? '${REPLAY_OF_HEADER}'
      GROUP BY status`,
    [run.ceiling, run.replayedAt.toISOString()],
  );
  return r.rows;
}
