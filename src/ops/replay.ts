import type pg from 'pg';
import type { EventFilter } from '../lifecycle/filter.ts';
import { copiesByStatus, copyBatch, countWindow, maxId, type ReplayOptions } from '../lifecycle/replay.ts';
import { withClientTransaction } from './transaction.ts';

export interface ReplayResult {
  /** Rows copied (or, with dryRun, that would be). */
  count: number;
  firstId: string | null;
  lastId: string | null;
  /** Highest id of the table before the copies: every copy has a higher id. */
  ceiling: string | null;
}

/** How many rows a replay of the window would copy, and their id range. Changes nothing. */
export async function countReplay(
  db: pg.ClientBase,
  table: string,
  f: EventFilter,
  o: ReplayOptions,
): Promise<ReplayResult> {
  const r = await countWindow(db, table, f, o);
  return { count: Number(r.n), firstId: r.first, lastId: r.last, ceiling: null };
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
  // The window's upper id is fixed first: copies (and new rows) get higher ids and are never re-read.
  const ceiling = await maxId(db, table);
  const result: ReplayResult = { count: 0, firstId: null, lastId: null, ceiling };
  if (ceiling === null) return result;
  let after = '0';
  for (;;) {
    const batch = await withClientTransaction(db, async () => {
      const r = await copyBatch(db, table, f, opts, {
        after,
        ceiling,
        batchSize: opts.batchSize,
        replayedAt: opts.replayedAt,
      });
      // Every selected row must have been copied: a short count would be a lost replay.
      if (r.inserted !== r.ids.length) {
        throw new Error(`replay: selected ${r.ids.length} rows but inserted ${r.inserted}; rolled back`);
      }
      return r.ids;
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
  const rows = await copiesByStatus(db, table, run);
  const by = Object.fromEntries(rows.map((x) => [x.status, Number(x.n)]));
  const s: CopiesState = {
    total: rows.reduce((a, x) => a + Number(x.n), 0),
    published: by.published ?? 0,
    inFlight: (by.pending ?? 0) + (by.failed ?? 0) + (by.parked ?? 0),
    dead: by.dead ?? 0,
    discarded: by.discarded ?? 0,
  };
  return s;
}
