import type pg from 'pg';
import { qualified } from './sql-ident.ts';
import { TIMELINE_SQL } from './timeline.ts';

/**
 * The name of the per-slot progress record (sql/000003_relay_progress.sql) and the row migrate
 * inserts: migrate creates it, lifecycle/progress.ts reads and writes it.
 */
export function progressTable(schema: string, table: string): string {
  return qualified(schema, `${table}_relay_progress`);
}

/** migrate: the slot's row, so the relay needs only SELECT, UPDATE on the table. Keeps an existing row. */
export async function insertInitialProgress(
  db: pg.ClientBase,
  progress: string,
  slot: string,
): Promise<void> {
  // With the server's timeline (sql/000005): a promotion before the relay's first start is seen too.
  await db.query(
    `INSERT INTO ${progress} (slot_name, timeline) VALUES ($1, ${TIMELINE_SQL}) ON CONFLICT (slot_name) DO NOTHING`,
    [slot],
  );
}
