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
});
