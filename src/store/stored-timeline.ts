import type pg from 'pg';
import { TIMELINE_SQL } from './timeline.ts';

/**
 * The timeline key (store/timeline.ts) kept with the slot's progress record
 * (sql/000005_relay_timeline.sql): the timeline the relay last started on. Compared with the
 * server's at every start (supervisor/timeline-watch.ts #promotedSince), so a promotion that
 * happened while no relay ran is seen as well as one seen in-process.
 *
 * A schema migrated before the column existed is read as before: `absent` (no comparison; `check`
 * and the relay's start say that migrate adds it).
 */
export type StoredTimeline = { kind: 'absent' } | { kind: 'stored'; key: string | null };

/** What a progress table without the timeline column means (the relay's start and `check` say it). */
export function missingTimelineColumn(progress: string): string {
  return `${progress} has no timeline column (sql/000005_relay_timeline.sql): a standby promoted while no relay runs is not noticed at the next start, and rows whose outcome only the old primary recorded stay 'pending'; run \`outbox-relay migrate\``;
}

/** Whether the progress table has the timeline column (migration 5). */
export async function hasTimelineColumn(db: pg.Pool | pg.ClientBase, progress: string): Promise<boolean> {
  const r = await db.query<{ ok: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute
                     WHERE attrelid = to_regclass($1) AND attname = 'timeline' AND NOT attisdropped) AS ok`,
    [progress],
  );
  return r.rows[0]?.ok === true;
}

/** The slot's stored timeline key; null when the slot has no row or none was stored yet. */
export async function readStoredTimeline(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
): Promise<StoredTimeline> {
  if (!(await hasTimelineColumn(db, progress))) return { kind: 'absent' };
  const r = await db.query<{ timeline: string | null }>(
    `SELECT timeline FROM ${progress} WHERE slot_name = $1`,
    [slot],
  );
  return { kind: 'stored', key: r.rows[0]?.timeline ?? null };
}

/**
 * Stores the server's current timeline as the slot's. An UPDATE only (the relay may lack INSERT;
 * a slot with no row yet gets its key at the next start). Written only while the server is on
 * `on`: a promotion between the comparison and this write leaves the old key, so the next start
 * compares again.
 */
export async function storeTimeline(
  db: pg.Pool | pg.ClientBase,
  progress: string,
  slot: string,
  on: string,
): Promise<void> {
  await db.query(
    `UPDATE ${progress} SET timeline = $2, updated_at = now()
      WHERE slot_name = $1 AND timeline IS DISTINCT FROM $2 AND ${TIMELINE_SQL} = $2`,
    [slot, on],
  );
}
