import type pg from 'pg';
import { companion } from '../store/sql-ident.ts';
import { type EventFilter, filterSql } from './event-filter.ts';
import { withClientTransaction } from './transaction.ts';

/** The header every replay copy carries: the id of the row it copies. */
export const REPLAY_OF_HEADER = 'x-replay-of';
export const REPLAYED_AT_HEADER = 'x-replayed-at';

export interface ReplayResult {
  /** Rows copied (or, with dryRun, that would be). */
  count: number;
  firstId: string | null;
  lastId: string | null;
  /** Highest id of the table before the copies: every copy has a higher id. */
  ceiling: string | null;
}

export interface ReplayOptions {
  /** Also copy rows that are themselves copies (they carry x-replay-of). Default: no. */
  includeReplays?: boolean;
}

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

/** How many rows a replay of the window would copy, and their id range. Changes nothing. */
export async function countReplay(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  o: ReplayOptions,
): Promise<ReplayResult> {
  const w = windowSql(f, o);
  const r = await db.query<{ n: string; first: string | null; last: string | null }>(
    `SELECT count(*)::text AS n, min(id)::text AS first, max(id)::text AS last FROM ${companion(table, '_with_status')} AS o WHERE ${w.sql}`,
    w.params,
  );
  return { count: Number(r.rows[0]!.n), firstId: r.rows[0]!.first, lastId: r.rows[0]!.last, ceiling: null };
}

/**
 * Re-inserts copies of the matching rows — new id, same event_id, headers plus `x-replay-of`
 * (the original id) and `x-replayed-at` — in original id order, one transaction per batch, so
 * the relay's normal stream publishes them again in that order. Copies start as 'pending' with
 * a fresh created_at (a later replay window over the original times does not pick them up).
 * Paged by id (keyset), so rows inserted meanwhile outside the window change nothing.
 */
export async function replayEvents(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  opts: ReplayOptions & {
    batchSize: number;
    replayedAt: Date;
    /** Count only (countReplay), insert nothing. */
    dryRun?: boolean;
    onBatch?: (copied: number) => void;
  },
): Promise<ReplayResult> {
  if (opts.dryRun) return countReplay(db, table, f, opts);
  const w = windowSql(f, opts);
  // The window's upper id is fixed first: copies (and new rows) get higher ids and are never re-read.
  const max = await db.query<{ max: string | null }>(`SELECT max(id)::text AS max FROM ${table}`);
  const ceiling = max.rows[0]!.max;
  const result: ReplayResult = { count: 0, firstId: null, lastId: null, ceiling };
  if (ceiling === null) return result;
  let after = '0';
  const n = w.params.length;
  for (;;) {
    const batch = await withClientTransaction(db, async () => {
      const r = await db.query<{ id: string }>(
        `WITH src AS (
           SELECT o.id, event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent
             FROM ${companion(table, '_with_status')} AS o
            WHERE ${w.sql} AND o.id > $${n + 1}::bigint AND o.id <= $${n + 2}::bigint
            ORDER BY o.id LIMIT $${n + 3}),
         copied AS (
           INSERT INTO ${table} (event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent)
           SELECT event_id, aggregate_type, aggregate_id, event_type, payload, content_type,
                  coalesce(headers, '{}'::jsonb) || jsonb_build_object('${REPLAY_OF_HEADER}', src.id::text, '${REPLAYED_AT_HEADER}', $${n + 4}::text),
                  traceparent
             FROM src ORDER BY src.id
           RETURNING 1)
         SELECT src.id::text AS id, (SELECT count(*) FROM copied)::int AS inserted FROM src ORDER BY src.id`,
        [...w.params, after, ceiling, opts.batchSize, opts.replayedAt.toISOString()],
      );
      // Every selected row must have been copied: a short count would be a lost replay.
      const inserted = (r.rows[0] as { inserted?: number } | undefined)?.inserted ?? 0;
      if (inserted !== r.rows.length) {
        throw new Error(`replay: selected ${r.rows.length} rows but inserted ${inserted}; rolled back`);
      }
      return r.rows.map((x) => x.id);
    });
    if (batch.length === 0) break;
    result.firstId ??= batch[0]!;
    result.lastId = batch[batch.length - 1]!;
    result.count += batch.length;
    opts.onBatch?.(result.count);
    after = result.lastId;
    if (batch.length < opts.batchSize) break;
  }
  return result;
}

/** Where the copies of one replay run are: published, still on their way, or given up. */
export interface CopiesState {
  total: number;
  published: number;
  /** pending, failed or parked: the relay (or its sweeper) still works on them. */
  inFlight: number;
  dead: number;
  discarded: number;
}

/**
 * The copies a replay run inserted (ids above its ceiling, its x-replayed-at stamp), by status.
 * Read through `<table>_with_status`: a copy is published once the slot's progress record (or
 * its row) says so — the same truthful status every operator command reads.
 */
export async function copiesState(
  db: pg.ClientBase,
  table: string,
  run: { ceiling: string; replayedAt: Date },
): Promise<CopiesState> {
  const r = await db.query<{ status: string; n: string }>(
    `SELECT status, count(*)::text AS n FROM ${companion(table, '_with_status')} AS o
      WHERE o.id > $1::bigint AND o.headers->>'${REPLAYED_AT_HEADER}' = $2 AND o.headers ? '${REPLAY_OF_HEADER}'
      GROUP BY status`,
    [run.ceiling, run.replayedAt.toISOString()],
  );
  const by = Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
  const s: CopiesState = {
    total: r.rows.reduce((a, x) => a + Number(x.n), 0),
    published: by.published ?? 0,
    inFlight: (by.pending ?? 0) + (by.failed ?? 0) + (by.parked ?? 0),
    dead: by.dead ?? 0,
    discarded: by.discarded ?? 0,
  };
  return s;
}
