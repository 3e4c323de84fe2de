import { createHash } from 'node:crypto';
import type pg from 'pg';
import { qualified } from '../store/sql-ident.ts';
import { TIMELINE_SQL } from '../store/timeline.ts';
import { idRanges } from './id-ranges.ts';
import { sqlStatuses, UNHEALTHY } from './statuses.ts';

/**
 * The per-slot progress record (sql/000003_relay_progress.sql): which outbox ids a slot's relay
 * has settled, as an int8multirange, written once per batch. With it, the outbox row's status
 * column is no longer rewritten for every published event; the truthful status is
 * `<table>_with_status` (the view) or, for counts, the complement iteration below.
 *
 * The rules:
 *  - recorded before the slot position is confirmed past the ids (outcome/record.ts, then stream/session.ts settles);
 *  - a failure outcome (failed, parked, discarded) is written on the row BEFORE the record covers
 *    its id, and a row whose own status is not 'pending' keeps it (the row wins);
 *  - the record only grows; compaction fills gaps of ids that can never appear (see compact).
 */

/** The quoted name of the view with each row's truthful status. */
export function statusView(schema: string, table: string): string {
  return qualified(schema, `${table}_with_status`);
}

/** SQL: every slot's published ranges merged into one int8multirange (an InitPlan: evaluated once). */
export function publishedSql(progress: string): string {
  return `(SELECT coalesce(range_agg(r), '{}'::int8multirange) FROM ${progress} AS p, unnest(p.published) AS r)`;
}

/**
 * SQL FROM-clause fragment: the outbox rows `o` whose ids lie outside every published range —
 * the only rows that can be truly 'pending'. Iterates the complement's ranges with btree range
 * conditions on id, so counting pending rows reads the unpublished tail and the gaps, never the
 * whole table.
 */
export function unpublishedRowsSql(table: string, progress: string): string {
  return `unnest('{(,)}'::int8multirange - ${publishedSql(progress)}) AS g
     JOIN ${table} AS o ON o.id >= coalesce(lower(g), -9223372036854775808)
                      AND o.id < coalesce(upper(g), 9223372036854775807)`;
}

/**
 * Adds ids to the slot's record: one statement, whose size follows the ids' runs. Returns the
 * row count (1 when written; callers must not settle on anything else). A slot migrate did not
 * see gets its row inserted (needs INSERT, like the relay-state row). Written only while the
 * server is on timeline `on` (store/timeline.ts): 0 on any other.
 */
export async function recordProgress(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
  ids: readonly string[],
  on: string,
): Promise<number> {
  return recordProgressRanges(db, progress, slot, idRanges(ids), on);
}

/** recordProgress with the ids as int8multirange text (exactly-once: Kafka's progress record, written back). */
export async function recordProgressRanges(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
  ranges: string,
  on: string,
): Promise<number> {
  // A named (prepared) statement: it runs once per batch, and parsing it each time cost more
  // than running it (PostgreSQL's log: 0.2 ms parse vs 0.07 ms execute). Its text and name are
  // built once per table, not per batch.
  const { name, text } = progressUpdate(progress);
  const r = await db.query({ name, text, values: [slot, ranges, on] });
  if (r.rowCount === 1) return 1;
  const i = await db.query(
    `INSERT INTO ${progress} AS p (slot_name, published) SELECT $1, $2::int8multirange WHERE ${TIMELINE_SQL} = $3
     ON CONFLICT (slot_name) DO UPDATE SET published = p.published + EXCLUDED.published, updated_at = now()`,
    [slot, ranges, on],
  );
  return i.rowCount ?? 0;
}

/**
 * The progress UPDATE of a progress table, with a name derived from its text: pg prepares it
 * once per connection and reuses it (the same name always means the same text, whatever the
 * table's name).
 */
export function progressUpdate(progress: string): { name: string; text: string } {
  let s = progressUpdates.get(progress);
  if (s === undefined) {
    const text = `UPDATE ${progress} SET published = published + $2::int8multirange, updated_at = now()
        WHERE slot_name = $1 AND ${TIMELINE_SQL} = $3`;
    s = { name: `outbox_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text };
    progressUpdates.set(progress, s);
  }
  return s;
}

const progressUpdates = new Map<string, { name: string; text: string }>();

/** At most this many ids of rows holding an unrecorded outcome are loaded per session. */
const MAX_OUTCOMES_ON_ROWS = 10_000;

/**
 * Ids of rows whose failure outcome (failed, dead, parked) is on the row but not in the slot's
 * progress record — the crash window between the two statements (outcome/record.ts writes the row
 * first). The stream skips them when it sends them again: the sweeper owns them, as it would
 * had the record been written. Newest first, bounded (the window is one batch; older such rows
 * come from relays that marked rows before the progress record).
 */
export async function outcomesOnRows(
  db: pg.Pool | pg.ClientBase,
  table: string,
  progress: string,
  slot: string,
): Promise<Set<string>> {
  const r = await db.query<{ id: string }>(
    `SELECT o.id::text AS id FROM ${table} AS o
      WHERE o.status IN ${sqlStatuses(UNHEALTHY)}
        AND NOT EXISTS (SELECT 1 FROM ${progress} AS p WHERE p.slot_name = $1 AND p.published @> o.id)
      ORDER BY o.id DESC LIMIT ${MAX_OUTCOMES_ON_ROWS}`,
    [slot],
  );
  return new Set(r.rows.map((x) => x.id));
}

/** Every slot's published ranges merged, as text ('{[1,5),[7,9)}'): what a lost-slot recovery skips. */
export async function readPublished(db: pg.Pool | pg.ClientBase, progress: string): Promise<string> {
  const r = await db.query<{ m: string }>(`SELECT ${publishedSql(progress)}::text AS m`);
  return r.rows[0]!.m;
}

/** The slot's record as text ('{[1,5),[7,9)}'); null when the slot has no row. */
export async function readProgress(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
): Promise<string | null> {
  const r = await db.query<{ published: string }>(
    `SELECT published::text AS published FROM ${progress} WHERE slot_name = $1`,
    [slot],
  );
  return r.rows[0]?.published ?? null;
}

export interface CompactResult {
  /** Gaps filled this round. */
  filled: number;
  /** Ranges in the record afterwards. */
  ranges: number;
  /** The horizon step taken: 'id' (took max(id)), 'xmax' (took the snapshot xmax), 'fill', 'wait'. */
  step: 'id' | 'xmax' | 'fill' | 'wait' | 'none';
}

/** Gaps examined per compaction round (each one index probe). */
const MAX_GAPS = 1000;

/**
 * Fills gaps of the record whose ids need no record, so the multirange stays a few ranges.
 *
 * A gap (between two published ranges, or below the first one down to the table's lowest id) is
 * an id the stream never settled: a rolled-back insert, a row deleted before the relay saw it, a
 * row whose own status is past 'pending' (failed, dead, discarded, or published by an older
 * relay that marked rows — covering it changes nothing, the row's status wins, and no status
 * ever goes back to 'pending'), a row still to be streamed (the relay is behind, or its
 * transaction is still open), or a 'pending' row committed before the slot existed. All but the
 * last two may be covered — the 'pending' rows of a gap stay out — and only once no transaction
 * that took such an id can still commit. The horizon:
 *   1. round n: S = max(id) of the visible rows (every id <= S was taken before now — ids come
 *      from the identity sequence in order; a sequence with CACHE > 1 breaks this, see docs);
 *   2. a later round: X = pg_snapshot_xmax(pg_current_snapshot()); every transaction that took
 *      an id <= S had its xid by then (the xid is assigned by the same INSERT, microseconds
 *      after the id), so its xid is < X;
 *   3. once pg_snapshot_xmin(pg_current_snapshot()) > X, every such transaction has ended: an
 *      id <= S with no visible row is rolled back or deleted. Gaps <= S are filled except their
 *      visible 'pending' rows (they wait for the relay, or a lost-slot recovery); then the
 *      horizon starts again at 1.
 */
export async function compactProgress(
  db: pg.Pool | pg.ClientBase,
  table: string,
  progress: string,
  slot: string,
): Promise<CompactResult> {
  const h = await db.query<{
    horizon_id: string | null;
    has_xmax: boolean;
    passed: boolean | null;
    ranges: number;
  }>(
    `SELECT horizon_id::text, horizon_xmax IS NOT NULL AS has_xmax,
            pg_snapshot_xmin(pg_current_snapshot()) > horizon_xmax AS passed,
            (SELECT count(*)::int FROM unnest(published)) AS ranges
       FROM ${progress} WHERE slot_name = $1`,
    [slot],
  );
  const row = h.rows[0];
  if (!row) return { filled: 0, ranges: 0, step: 'none' };
  if (row.horizon_id === null) {
    await db.query(
      `UPDATE ${progress} SET horizon_id = (SELECT max(id) FROM ${table}), horizon_at = now(), horizon_xmax = NULL
        WHERE slot_name = $1`,
      [slot],
    );
    return { filled: 0, ranges: row.ranges, step: 'id' };
  }
  if (!row.has_xmax) {
    await db.query(
      `UPDATE ${progress} SET horizon_xmax = pg_snapshot_xmax(pg_current_snapshot())
        WHERE slot_name = $1 AND horizon_at < now()`,
      [slot],
    );
    return { filled: 0, ranges: row.ranges, step: 'xmax' };
  }
  if (!row.passed) return { filled: 0, ranges: row.ranges, step: 'wait' };
  // The fill is computed from this statement's snapshot and added to the row's latest value
  // (the relay may have added ranges meanwhile): adding ids that can never appear is always sound.
  const r = await db.query<{ filled: number; ranges: number }>(
    `WITH gaps AS (
       SELECT g FROM ${progress} AS p,
              unnest(int8multirange(int8range(least((SELECT min(id) FROM ${table}), lower(p.published)),
                                              least(upper(p.published), p.horizon_id + 1)))
                     - p.published) AS g
        WHERE p.slot_name = $1 AND NOT isempty(p.published) AND p.horizon_id IS NOT NULL
        LIMIT ${MAX_GAPS}),
     fill AS (
       SELECT count(*)::int AS n, coalesce(range_agg(r), '{}'::int8multirange) AS m
         FROM gaps,
              unnest(int8multirange(gaps.g) - coalesce(
                (SELECT range_agg(int8range(o.id, o.id + 1)) FROM ${table} AS o
                  WHERE o.id >= lower(gaps.g) AND o.id < upper(gaps.g) AND o.status = 'pending'),
                '{}'::int8multirange)) AS r)
     UPDATE ${progress} AS p
        SET published = p.published + fill.m, updated_at = now(),
            horizon_id = (SELECT max(id) FROM ${table}), horizon_at = now(), horizon_xmax = NULL
       FROM fill WHERE p.slot_name = $1
     RETURNING fill.n AS filled, (SELECT count(*)::int FROM unnest(p.published)) AS ranges`,
    [slot],
  );
  const out = r.rows[0];
  return { filled: out?.filled ?? 0, ranges: out?.ranges ?? row.ranges, step: 'fill' };
}

/** A recovery of the slot's gap (supervisor/slot-recovery.ts) that was started and not finished; null = none. */
export async function pendingRecovery(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
): Promise<string | null> {
  const r = await db.query<{ reason: string | null; since: Date | null }>(
    `SELECT recovery_reason AS reason, recovery_since AS since FROM ${progress} WHERE slot_name = $1`,
    [slot],
  );
  const row = r.rows[0];
  return row?.since ? (row.reason ?? 'unknown') : null;
}

/** Marks (reason) or clears (null) the slot's recovery; the slot's row is created if missing. */
export async function markRecovery(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
  reason: string | null,
): Promise<void> {
  const u = await db.query(
    `UPDATE ${progress} SET recovery_since = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END,
            recovery_reason = $2, updated_at = now() WHERE slot_name = $1`,
    [slot, reason],
  );
  if (u.rowCount === 1) return;
  const r = await db.query(
    `INSERT INTO ${progress} AS p (slot_name, recovery_since, recovery_reason)
     VALUES ($1, CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, $2)
     ON CONFLICT (slot_name) DO UPDATE SET recovery_since = EXCLUDED.recovery_since,
       recovery_reason = EXCLUDED.recovery_reason, updated_at = now()`,
    [slot, reason],
  );
  if (r.rowCount !== 1) throw new Error(`the recovery mark of slot ${slot} was not written`);
}
