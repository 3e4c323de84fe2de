import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { waitFor } from '../support/postgres.ts';
import { migrateDb, slotOf, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * WAL order is not visibility order (issue 10, item 1; design.md §7). A synchronous standby
 * that does not exist holds every commit that asks for it: the commit record is in the WAL, so
 * the walsender streams the transaction to the relay, but its rows stay invisible to every
 * other session until the wait ends. The relay publishes those events meanwhile; its outcome
 * statements (published / failed / parked) match no row. Before the fix it ignored the count,
 * settled the events and confirmed the slot past them: the refused event was never recorded
 * 'failed' (never retried, lost), the parked follower never released, the published rows left
 * 'pending' for ever.
 *
 * A cluster of this test alone (synchronous_standby_names names a ghost): the run's shared
 * cluster must not hold anyone else's commits. Its default synchronous_commit is 'local' (the
 * relay's own statements do not wait); the inserting session asks for 'on' and is held.
 */
let cluster: ThrowawayPostgres;
let admin: pg.Pool;
let db: { url: string; name: string; pool: pg.Pool };
let kafka: KafkaHarness;
let relay: Relay | null = null;

beforeAll(async () => {
  cluster = await startThrowawayPostgres({
    settings: { synchronous_commit: 'local', synchronous_standby_names: 'ghost_standby' },
  });
  admin = new pg.Pool({ connectionString: cluster.url, max: 2 });
  admin.on('error', () => {});
  await admin.query('CREATE DATABASE visibility');
  const url = cluster.url.replace(/\/postgres$/, '/visibility');
  db = { url, name: 'visibility', pool: new pg.Pool({ connectionString: url, max: 4 }) };
  db.pool.on('error', () => {});
  await migrateDb(db);
  // Not in the PostgreSQL 14 phase (.ci/run): 14 has no pg_walinspect.
  const v = await db.pool.query<{ n: number }>("SELECT current_setting('server_version_num')::int AS n");
  if (v.rows[0]!.n < 150_000)
    throw new Error(
      'this file needs PostgreSQL 15+ (pg_walinspect); run it on 15+ (not with OUTBOX_TEST_PG_VERSION or OUTBOX_PG_VERSION = 14)',
    );
  await db.pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  kafka = await startKafka();
  await kafka.createTopic('outbox.event.Ok', 3);
  // outbox.event.Missing is never created (auto-creation off): a permanent refusal.
});

afterAll(async () => {
  await relay?.stop();
  await db?.pool.end();
  await admin?.end();
  await kafka?.stop();
  await cluster?.stop();
});

interface Row {
  id: string;
  aggregate_type: string;
  aggregate_id: string;
  status: string;
  last_error: string | null;
}

describe('outcomes of rows that are streamed before they are visible', () => {
  it('are recorded once the commit is released: refused → failed, follower → parked, others → published; the slot waits', async () => {
    const config = testConfig(
      db,
      ['--ordering', 'strict', '--failure-backoff-ms', '600000', '--status-interval-ms', '200'],
      kafka,
    );
    relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
    await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });

    const before = (await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!
      .lsn;
    // The held transaction: two good events, a refused head and its follower (same aggregate).
    const writer = new pg.Client({ connectionString: db.url });
    writer.on('error', () => {}); // a failed test stops the cluster under it
    await writer.connect();
    await writer.query('SET synchronous_commit = on');
    await writer.query('BEGIN');
    const xid = (
      await writer.query<{ xid: string }>(
        'SELECT (pg_current_xact_id()::text::bigint % 4294967296)::text AS xid',
      )
    ).rows[0]!.xid;
    await writer.query(
      `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES
         ('Ok', 'a', 'E', convert_to('{"seq":0}', 'UTF8')),
         ('Missing', 'm', 'E', convert_to('{"seq":0}', 'UTF8')),
         ('Missing', 'm', 'E', convert_to('{"seq":1}', 'UTF8')),
         ('Ok', 'b', 'E', convert_to('{"seq":0}', 'UTF8'))`,
    );
    const committed = writer.query('COMMIT'); // held: waits for the ghost standby
    committed.catch(() => {});
    try {
      // The stream delivered the transaction (its commit record is in the WAL): the good events are on the broker…
      await waitFor(async () => (await kafka.readAll('outbox.event.Ok')).length >= 2, {
        timeoutMs: 30_000,
        message: 'the held transaction published while its rows are invisible',
      });
      // …while its rows are invisible to every other session.
      expect(await db.pool.query('SELECT 1 FROM outbox')).toHaveProperty('rowCount', 0);
      // Give the relay time to try its outcome statements and (before the fix) confirm past them.
      await new Promise((r) => setTimeout(r, 2000));
      // The held transaction's commit record (in the WAL: synchronous replication waits after the
      // local flush). The server skips, on restart, every transaction whose commit starts below
      // confirmed_flush_lsn — so that start is the exact bound. Positions below it (keepalives past
      // the relay's own statements, say) are fair game.
      const commit = (
        await db.pool.query<{ lsn: string }>(
          `SELECT start_lsn::text AS lsn FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn())
            WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%' AND xid::text = $2`,
          [before, xid],
        )
      ).rows[0]?.lsn;
      expect(commit, `commit record of the held transaction ${xid}`).toBeDefined();
      const held = await admin.query<{ confirmed: string; behind: boolean }>(
        `SELECT confirmed_flush_lsn::text AS confirmed, confirmed_flush_lsn <= $2::pg_lsn AS behind
           FROM pg_replication_slots WHERE slot_name = $1`,
        [slotOf(db), commit],
      );
      // Nothing of the held transaction is settled: the slot is not confirmed past its commit.
      expect(held.rows[0], `confirmed ${held.rows[0]?.confirmed}, held commit at ${commit}`).toMatchObject({
        behind: true,
      });
    } finally {
      // Release every held commit.
      await admin.query(`ALTER SYSTEM SET synchronous_standby_names = ''`);
      await admin.query('SELECT pg_reload_conf()');
    }
    await committed;
    await writer.end().catch(() => {});

    const rows = async () =>
      (
        await db.pool.query<Row>(
          'SELECT o.id::text AS id, aggregate_type, aggregate_id, status, last_error FROM outbox_with_status o ORDER BY o.id',
        )
      ).rows;
    await waitFor(async () => (await rows()).every((r) => r.status !== 'pending'), {
      timeoutMs: 20_000,
      message: async () => `outcomes on the rows: ${JSON.stringify(await rows())}`,
    });
    const final = await rows();
    expect(final.map((r) => [r.aggregate_type, r.aggregate_id, r.status])).toEqual([
      ['Ok', 'a', 'published'],
      ['Missing', 'm', 'failed'],
      ['Missing', 'm', 'parked'],
      ['Ok', 'b', 'published'],
    ]);
    expect(final[1]!.last_error).toMatch(/UNKNOWN_TOPIC_OR_PARTITION/);
    // And only then the slot moves past the transaction.
    await waitFor(
      async () =>
        (
          await admin.query<{ past: boolean }>(
            'SELECT confirmed_flush_lsn > $2::pg_lsn AS past FROM pg_replication_slots WHERE slot_name = $1',
            [slotOf(db), before],
          )
        ).rows[0]!.past,
      { timeoutMs: 10_000, message: 'slot confirmed past the released transaction' },
    );
  });

  it('rows that moved on before the stream reached them (operator, earlier session, deleted) do not hold the slot', async () => {
    await relay?.stop();
    relay = null;
    // Streamed only once the relay is back: by then an operator discarded one, another was
    // published (as by a session that crashed before confirming), a third was deleted.
    const ids = (
      await db.pool.query<{ id: string }>(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES
           ('Ok', 'x', 'E', convert_to('{"seq":0}', 'UTF8')),
           ('Missing', 'y', 'E', convert_to('{"seq":0}', 'UTF8')),
           ('Ok', 'z', 'E', convert_to('{"seq":0}', 'UTF8')),
           ('Ok', 'w', 'E', convert_to('{"seq":0}', 'UTF8'))
         RETURNING id::text`,
      )
    ).rows.map((r) => r.id);
    await db.pool.query(`UPDATE outbox SET status = 'published' WHERE id = $1`, [ids[0]]);
    await db.pool.query(`UPDATE outbox SET status = 'discarded' WHERE id = $1`, [ids[1]]);
    await db.pool.query('DELETE FROM outbox WHERE id = $1', [ids[2]]);
    const after = (await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!
      .lsn;

    const config = testConfig(db, ['--ordering', 'strict', '--status-interval-ms', '200'], kafka);
    relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
    await waitFor(
      async () =>
        (
          await admin.query<{ past: boolean }>(
            'SELECT confirmed_flush_lsn >= $2::pg_lsn AS past FROM pg_replication_slots WHERE slot_name = $1',
            [slotOf(db), after],
          )
        ).rows[0]!.past,
      { timeoutMs: 20_000, message: 'slot confirmed past the rows that moved on' },
    );
    const statuses = (
      await db.pool.query<{ id: string; status: string }>(
        'SELECT o.id::text AS id, status FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
        [ids],
      )
    ).rows;
    expect(statuses).toEqual([
      { id: ids[0], status: 'published' },
      { id: ids[1], status: 'discarded' },
      { id: ids[3], status: 'published' },
    ]);
  });
});
