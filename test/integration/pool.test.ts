import { describe, expect, it } from 'vitest';
import { createPool } from '../../src/store/pool.ts';
import { useTestDatabase } from '../support/postgres.ts';

/**
 * A connection reset while a client is checked out of the pool (PostgreSQL restarting,
 * pg_terminate_backend) must not crash the process: found by the chaos suite's pg-restart
 * scenario, where the relay died of an unhandled 'error' event between two queries.
 */
const db = useTestDatabase();

describe('createPool', () => {
  it('a checked-out client whose backend is terminated between two queries: the next query rejects, nothing is thrown', async () => {
    const pool = createPool({ connectionString: db.url, max: 2 });
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await db.query('SELECT pg_terminate_backend($1)', [pid]);
      // Give the socket time to see the termination while no query is running.
      await new Promise((r) => setTimeout(r, 300));
      await expect(client.query('SELECT 1')).rejects.toThrow();
      client.release(true);
      // The pool hands out a working connection again.
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await pool.end();
    }
  });

  it('a statement waiting on a lock when its client vanishes is cancelled, not run later (client_connection_check_interval)', async () => {
    await db.query('CREATE TABLE IF NOT EXISTS pool_orphan (id int PRIMARY KEY, v int NOT NULL)');
    await db.query('INSERT INTO pool_orphan VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET v = 0');
    const holder = await db.pool.connect();
    const pool = createPool({ connectionString: db.url, max: 1 });
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM pool_orphan WHERE id = 1 FOR UPDATE');
      const client = await pool.connect();
      const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      void client.query('UPDATE pool_orphan SET v = v + 1 WHERE id = 1').catch(() => {});
      await waitFor(async () => {
        const r = await db.query<{ w: string | null }>(
          'SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1',
          [pid],
        );
        return r[0]?.w === 'Lock';
      });
      // The relay dies (kill -9): its socket closes, nothing more is sent.
      // biome-ignore lint/suspicious/noExplicitAny: pg's Connection is untyped.
      (client as any).connection.stream.destroy();
      client.release(true);
      // The server notices within client_connection_check_interval (1 s) and ends the backend.
      await waitFor(async () => {
        const r = await db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1',
          [pid],
        );
        return r[0]!.n === 0;
      });
      await holder.query('COMMIT');
      // The UPDATE never ran: without the setting it would run now that the lock is gone.
      expect((await db.query<{ v: number }>('SELECT v FROM pool_orphan WHERE id = 1'))[0]!.v).toBe(0);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      // Its one client's socket is gone: end() would wait for it for ever.
      await Promise.race([pool.end(), new Promise((r) => setTimeout(r, 500))]);
    }
  });
});

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
