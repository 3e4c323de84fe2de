import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { adminUrl, createTestDatabase, useTestDatabase, waitFor } from './postgres.ts';

async function adminQuery<T>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

const databaseExists = async (name: string) =>
  (await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).length === 1;

const slotsOf = async (name: string) =>
  adminQuery<{ slot_name: string }>('SELECT slot_name FROM pg_replication_slots WHERE database = $1', [name]);

describe('test databases', () => {
  const shared = useTestDatabase();

  it('provides a logical-replication server and names its source', async () => {
    expect(inject('pgSource')).toMatch(/\S/);
    expect(await shared.query('SHOW wal_level')).toEqual([{ wal_level: 'logical' }]);
    expect(shared.name).toMatch(/^t_postgres_[0-9a-f]{8}$/);
    expect(shared.url.endsWith(`/${shared.name}`)).toBe(true);
  });

  it('isolates two databases from each other', async () => {
    const a = await createTestDatabase({ name: 'iso a' });
    const b = await createTestDatabase({ name: 'iso b' });
    try {
      expect(a.name).toMatch(/^t_iso_a_/);
      expect(a.name).not.toBe(b.name);
      await a.query('CREATE TABLE items (id int PRIMARY KEY)');
      await a.query('INSERT INTO items VALUES (1), (2)');
      await b.query('CREATE TABLE items (id int PRIMARY KEY)');
      expect(await a.query<{ n: number }>('SELECT count(*)::int AS n FROM items')).toEqual([{ n: 2 }]);
      expect(await b.query<{ n: number }>('SELECT count(*)::int AS n FROM items')).toEqual([{ n: 0 }]);
      expect(await a.query('SELECT current_database() AS db')).toEqual([{ db: a.name }]);
    } finally {
      await a.close();
      await b.close();
    }
    expect(await databaseExists(a.name)).toBe(false);
    expect(await databaseExists(b.name)).toBe(false);
  });

  it('close() drops the logical slots of its database, including one in active use', async () => {
    const db = await createTestDatabase({ name: 'slots' });
    const other = await createTestDatabase({ name: 'slots other' });
    await db.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [`${db.name}_idle`]);
    await db.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [`${db.name}_busy`]);
    await other.query("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", [`${other.name}_s`]);
    await db.query('CREATE PUBLICATION pub FOR ALL TABLES');

    // A walsender streaming from the busy slot, as a relay left running would be.
    const stream = new pg.Client({ connectionString: db.url, replication: 'database' } as pg.ClientConfig);
    stream.on('error', () => {});
    await stream.connect();
    stream
      .query(
        `START_REPLICATION SLOT ${db.name}_busy LOGICAL 0/0 (proto_version '1', publication_names 'pub')`,
      )
      .catch(() => {});
    await waitFor(
      async () =>
        (
          await adminQuery('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND active', [
            `${db.name}_busy`,
          ])
        ).length === 1,
      { timeoutMs: 10_000, message: 'the busy slot to become active' },
    );

    await db.close();
    await db.close(); // idempotent
    expect(await slotsOf(db.name)).toEqual([]);
    expect(await databaseExists(db.name)).toBe(false);
    expect(await slotsOf(other.name)).toEqual([{ slot_name: `${other.name}_s` }]);

    await other.close();
    expect(await slotsOf(other.name)).toEqual([]);
    await stream.end().catch(() => {});
  });
});

describe('waitFor', () => {
  it('resolves once the condition holds', async () => {
    let n = 0;
    await waitFor(() => ++n >= 3, { intervalMs: 1 });
    expect(n).toBe(3);
  });

  it('throws the message on timeout, with the last error as cause', async () => {
    const err = await waitFor(
      () => {
        throw new Error('boom');
      },
      { timeoutMs: 50, intervalMs: 5, message: () => 'rows to arrive' },
    ).catch((e: unknown) => e as Error);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/timed out after 50 ms: rows to arrive \(last error: boom\)/);
    expect(((err as Error).cause as Error).message).toBe('boom');
  });

  it('does not wait on a hanging condition past the timeout', async () => {
    const started = Date.now();
    await expect(waitFor(() => new Promise<boolean>(() => {}), { timeoutMs: 100 })).rejects.toThrow(
      /timed out/,
    );
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});
