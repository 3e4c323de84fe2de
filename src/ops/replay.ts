import type pg from 'pg';
import { type EventFilter, filterSql } from './event-filter.ts';
import { withClientTransaction } from './transaction.ts';

export interface ReplayResult {
  /** Rows copied (or, with dryRun, that would be). */
  count: number;
  firstId: string | null;
  lastId: string | null;
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
  opts: { batchSize: number; dryRun: boolean; replayedAt: Date; onBatch?: (copied: number) => void },
): Promise<ReplayResult> {
  const w = filterSql(f);
  if (opts.dryRun) {
    const r = await db.query<{ n: string; first: string | null; last: string | null }>(
      `SELECT count(*)::text AS n, min(id)::text AS first, max(id)::text AS last FROM ${table} WHERE ${w.sql}`,
      w.params,
    );
    return { count: Number(r.rows[0]!.n), firstId: r.rows[0]!.first, lastId: r.rows[0]!.last };
  }
  // The window's upper id is fixed first: copies (and new rows) get higher ids and are never re-read.
  const max = await db.query<{ max: string | null }>(`SELECT max(id)::text AS max FROM ${table}`);
  const ceiling = max.rows[0]!.max;
  const result: ReplayResult = { count: 0, firstId: null, lastId: null };
  if (ceiling === null) return result;
  let after = '0';
  const n = w.params.length;
  for (;;) {
    const batch = await withClientTransaction(db, async () => {
      const r = await db.query<{ id: string }>(
        `WITH src AS (
           SELECT o.id, event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent
             FROM ${table} AS o
            WHERE ${w.sql} AND o.id > $${n + 1}::bigint AND o.id <= $${n + 2}::bigint
            ORDER BY o.id LIMIT $${n + 3}),
         copied AS (
           INSERT INTO ${table} (event_id, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent)
           SELECT event_id, aggregate_type, aggregate_id, event_type, payload, content_type,
                  headers || jsonb_build_object('x-replay-of', src.id::text, 'x-replayed-at', $${n + 4}::text),
                  traceparent
             FROM src ORDER BY src.id
           RETURNING 1)
         SELECT src.id::text AS id FROM src ORDER BY src.id`,
        [...w.params, after, ceiling, opts.batchSize, opts.replayedAt.toISOString()],
      );
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
