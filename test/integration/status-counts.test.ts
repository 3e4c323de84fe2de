import { beforeAll, describe, expect, it } from 'vitest';
import { statusCounts, tableBytes } from '../../src/lifecycle/queries.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { insertEvents, migrateDb } from '../support/relay.ts';

/**
 * The health watch reads the verdict every 15 s without counting published rows (a scan of the
 * whole table on a large outbox): its counts must be `status`'s, published left out, and its
 * unsettled rows read through the partial index rather than a scan.
 */
const db = useTestDatabase();

beforeAll(async () => {
  await migrateDb(db);
  const ev = (i: number) => ({
    aggregateType: 'Order',
    aggregateId: `k${i % 7}`,
    eventType: 'E',
    payload: '{}',
  });
  const ids = await insertEvents(
    db.pool,
    Array.from({ length: 60 }, (_, i) => ev(i)),
  );
  const set = async (status: string, from: number, to: number) => {
    const r = await db.pool.query('UPDATE outbox SET status = $1 WHERE id = ANY($2::bigint[])', [
      status,
      ids.slice(from, to),
    ]);
    expect(r.rowCount).toBe(to - from);
  };
  await set('published', 0, 30);
  await set('failed', 30, 35);
  await set('dead', 35, 37);
  await set('parked', 37, 40);
});

describe('statusCounts without published (the health watch)', () => {
  it('gives status’s counts with published left out', async () => {
    const client = await db.pool.connect();
    try {
      const full = await statusCounts(client, 'public', 'outbox');
      const light = await statusCounts(client, 'public', 'outbox', { published: false });
      expect(full.counts).toEqual({ published: 30, failed: 5, dead: 2, parked: 3, pending: 20 });
      const { published: _, ...rest } = full.counts;
      expect(light.counts).toEqual(rest);
      expect(light.oldestPendingAgeSeconds).not.toBeNull();
      // Ages are read at each statement's now(): the same row, a few ms apart.
      expect(light.oldestFailedAgeSeconds).toBeCloseTo(full.oldestFailedAgeSeconds!, 0);
      expect(light.parkedAggregates).toBe(full.parkedAggregates);
    } finally {
      client.release();
    }
  });

  it('reads the unsettled rows through their partial index, not a scan of the table', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('ANALYZE outbox');
      // Seq scans priced out, as on a table large enough that the planner would avoid them: a
      // plan that still scans the table has no other way to answer.
      await client.query('SET enable_seqscan = off');
      const plan = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT status, count(*) FROM public.outbox WHERE status IN ('failed', 'dead', 'parked') GROUP BY status`,
      );
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(text).not.toMatch(/Seq Scan on outbox/);
      // Either partial index (both cover exactly the unsettled statuses).
      expect(text).toMatch(/Index Scan on outbox_(unsettled|blocked_aggregate)_idx/);
    } finally {
      await client.query('RESET enable_seqscan');
      client.release();
    }
  });
});

/**
 * The sweeper defers its first counts by the table's size (a restarted relay catching up must not
 * scan a large outbox at once): tableBytes read 0 for every plain table, so a 63 MB outbox was
 * counted — two scans of ~300 ms, with parallel workers — in the first second of every start.
 */
describe('tableBytes (what the sweeper scales its first counts by)', () => {
  const size = async (sql: string) =>
    Number((await db.pool.query<{ b: string }>(`SELECT (${sql})::text AS b`)).rows[0]!.b);

  it("is a plain table's own size", async () => {
    const own = await size(`pg_relation_size('public.outbox')`);
    expect(own).toBeGreaterThan(0);
    expect(await tableBytes(db.pool, '"public"."outbox"')).toBe(own);
  });

  it("is the sum of a partitioned table's partitions, and 0 for a table that does not exist", async () => {
    await db.pool.query(`CREATE TABLE sized (id int) PARTITION BY RANGE (id);
      CREATE TABLE sized_a PARTITION OF sized FOR VALUES FROM (0) TO (1000);
      CREATE TABLE sized_b PARTITION OF sized FOR VALUES FROM (1000) TO (3000);
      INSERT INTO sized SELECT generate_series(0, 2999)`);
    const parts = await size(`pg_relation_size('sized_a') + pg_relation_size('sized_b')`);
    expect(await size(`pg_relation_size('sized_a')`)).toBeGreaterThan(0);
    expect(await size(`pg_relation_size('sized_b')`)).toBeGreaterThan(0);
    expect(await tableBytes(db.pool, '"public"."sized"')).toBe(parts);
    expect(await tableBytes(db.pool, '"public"."no_such_table"')).toBe(0);
  });
});
