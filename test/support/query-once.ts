import pg from 'pg';

/**
 * One statement on a connection of its own to `url` (a server a test or a chaos scenario started,
 * or one a fault is aimed at): its rows. No vitest here: chaos/ imports it too.
 */
export async function queryOnce<T extends pg.QueryResultRow>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const c = new pg.Client(url);
  c.on('error', () => {});
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end().catch(() => {});
  }
}
