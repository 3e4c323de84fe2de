import type pg from 'pg';

/** Runs fn inside BEGIN … COMMIT on one client (the operator commands hold a single connection). */
export async function withClientTransaction<T>(db: pg.ClientBase, fn: () => Promise<T>): Promise<T> {
  await db.query('BEGIN');
  try {
    const result = await fn();
    await db.query('COMMIT');
    return result;
  } catch (e) {
    await db.query('ROLLBACK').catch(() => {});
    throw e;
  }
}
