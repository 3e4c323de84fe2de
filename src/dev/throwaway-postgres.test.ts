import { existsSync, rmSync } from 'node:fs';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { findFreePort, startThrowawayPostgres } from './throwaway-postgres.ts';

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

describe('startThrowawayPostgres', () => {
  it('starts a logical-replication cluster, and stop() removes it', async () => {
    const db = await startThrowawayPostgres();
    try {
      expect(db.url).toBe(`postgres://postgres@127.0.0.1:${db.port}/postgres`);
      expect(existsSync(db.dataDir)).toBe(true);
      await withClient(db.url, async (c) => {
        expect((await c.query('SHOW wal_level')).rows[0]).toEqual({ wal_level: 'logical' });
        expect((await c.query('SHOW max_replication_slots')).rows[0]).toEqual({
          max_replication_slots: '64',
        });
        await c.query('CREATE TABLE t (id int PRIMARY KEY, v text)');
        await c.query("INSERT INTO t VALUES (1, 'a')");
        expect((await c.query('SELECT v FROM t')).rows).toEqual([{ v: 'a' }]);
      });
    } finally {
      await db.stop();
    }
    expect(existsSync(db.dataDir)).toBe(false);
    await db.stop(); // idempotent
    await expect(withClient(db.url, async () => {})).rejects.toThrow();
  });

  it('applies settings overrides and an explicit port, and keep leaves the data dir', async () => {
    const port = await findFreePort();
    const db = await startThrowawayPostgres({ port, settings: { wal_level: 'replica' }, keep: true });
    try {
      expect(db.port).toBe(port);
      await withClient(db.url, async (c) => {
        expect((await c.query('SHOW wal_level')).rows[0]).toEqual({ wal_level: 'replica' });
      });
    } finally {
      await db.stop();
    }
    expect(existsSync(db.dataDir)).toBe(true);
    rmSync(db.dataDir, { recursive: true, force: true });
  });

  it('fails with the server log tail when the server cannot start', async () => {
    await expect(startThrowawayPostgres({ settings: { shared_buffers: 'nonsense' } })).rejects.toThrow(
      /failed to start[\s\S]*server log[\s\S]*shared_buffers/,
    );
  });
});
