/**
 * Issue 36 item 4: an outbox partitioned by created_at (`migrate --partitioned`), on PostgreSQL 14
 * and 18 — each version a cluster of its own, started from the real server builds
 * (src/dev/postgres-builds.ts; about half a second each once fetched) — with the run's real Kafka.
 * Every event is read back from Kafka and joined on its key and sequence number: nothing lost, no
 * key out of order, across a partition boundary crossed mid-stream, while retention drops an old
 * partition, after a lost slot. On the code before it, `migrate --partitioned` does not exist and
 * retention deletes rows one by one, never a partition.
 */

import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import { EXIT } from '../../src/exit-codes.ts';
import { dropIfSettled } from '../../src/lifecycle/partition-retention.ts';
import { recordProgress } from '../../src/lifecycle/progress.ts';
import { Retention } from '../../src/lifecycle/retention.ts';
import { RelayMetrics } from '../../src/observability/metrics.ts';
import { migrate } from '../../src/store/migrate.ts';
import { ensurePartitions, readPartitioning } from '../../src/store/partitions.ts';
import { currentTimeline } from '../../src/store/timeline.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { waitFor } from '../support/postgres.ts';
import { deliveryReport, orderViolations, type RelayProcess, spawnCli } from '../support/relay.ts';

const VERSIONS = ['14', '18'];
const DAY = 24 * 3600_000;
const KEYS = 8;
const SLOT = 'partitioned_relay';

const startOfDay = (t: Date) => new Date(Math.floor(t.getTime() / DAY) * DAY);

/** Keyed events `{seq}` of one aggregate type, with the created_at each row is given. */
function writer(pool: pg.Pool | pg.PoolClient, type: string) {
  const next = new Array<number>(KEYS).fill(0);
  let written = 0;
  return {
    next,
    /** One transaction of rows with these created_at values (null: the column's default, now). */
    async write(createdAt: (Date | null)[]): Promise<void> {
      const values: unknown[] = [];
      const tuples = createdAt.map((at) => {
        const k = written++ % KEYS;
        values.push(`k${k}`, JSON.stringify({ seq: next[k]!++ }), at);
        const b = values.length;
        return `('${type}', $${b - 2}, 'E', convert_to($${b - 1}, 'UTF8'), coalesce($${b}::timestamptz, clock_timestamp()))`;
      });
      await pool.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ${tuples.join(', ')}`,
        values,
      );
    },
    total: () => next.reduce((a, b) => a + b, 0),
  };
}

describe.each(VERSIONS)('a partitioned outbox on PostgreSQL %s', (version) => {
  let kafka: KafkaHarness;
  let server: ThrowawayPostgres;
  let pool: pg.Pool;
  let relay: RelayProcess | undefined;
  const cli = (args: string[]) => spawnCli([...args, '--database-url', server.url, '--slot', SLOT]);
  async function cliExit(args: string[]) {
    const p = cli(args);
    const code = await p.exited;
    return { code, out: p.stdout(), err: p.logs() };
  }
  function startRelay(): RelayProcess {
    relay = cli([
      'run',
      ...kafka.relayArgs(),
      '--retry-initial-ms',
      '50',
      '--retry-max-ms',
      '500',
      '--sweep-interval-ms',
      '100',
      '--prune-interval-ms',
      '200',
      // Partitions whose upper bound is 2 days old are retention's to consider.
      '--retention-published-ms',
      String(2 * DAY),
    ]);
    return relay;
  }
  const partitionsOf = async (table = 'outbox') =>
    (
      await pool.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = $1::regclass ORDER BY 1`,
        [table],
      )
    ).rows.map((r) => r.name);
  async function expectComplete(type: string, next: number[], why: string) {
    let report = deliveryReport([], next, 'k');
    await waitFor(
      async () => {
        report = deliveryReport(await kafka.readAll(`outbox.event.${type}`), next, 'k');
        return report.missing.length === 0;
      },
      { timeoutMs: 60_000, intervalMs: 300, message: () => `${why}: missing ${report.missing.slice(0, 10)}` },
    );
    expect(report.missing).toEqual([]);
    expect(orderViolations(report.seen)).toEqual([]);
    console.log(`PG ${version} ${why}: ${report.unique.size} events, ${report.duplicates} duplicates`);
    return report;
  }
  async function truthful(type: string): Promise<Record<string, number>> {
    const r = await pool.query<{ status: string; n: string }>(
      'SELECT status, count(*)::text AS n FROM outbox_with_status WHERE aggregate_type = $1 GROUP BY status',
      [type],
    );
    return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
  }

  beforeAll(async () => {
    kafka = await startKafka();
    const t0 = Date.now();
    server = await startThrowawayPostgres({ version });
    pool = new pg.Pool({ connectionString: server.url, max: 4 });
    pool.on('error', () => {});
    console.log(`PG ${version}: cluster started in ${Date.now() - t0} ms`);
  });
  afterAll(async () => {
    relay?.kill('SIGKILL');
    if (relay) await relay.exited;
    await pool?.end();
    await server?.stop();
    await kafka?.stop();
  });

  it('migrate --partitioned: the table, its partitions ahead, a publication via the root; check names what is missing', async () => {
    const dry = await cliExit(['migrate', '--partitioned', '--dry-run']);
    expect(dry.code, dry.err).toBe(EXIT.OK);
    expect(dry.out).toContain(
      'partitioned by created_at: would create the missing partitions of the current day and the 7 after it',
    );
    expect(dry.out).toContain('publish_via_partition_root = true');
    const m = await cliExit(['migrate', '--partitioned']);
    expect(m.code, m.err).toBe(EXIT.OK);
    const kind = await pool.query<{ relkind: string }>(
      `SELECT relkind FROM pg_class WHERE oid = 'outbox'::regclass`,
    );
    expect(kind.rows[0]!.relkind).toBe('p');
    const today = startOfDay(new Date()).toISOString().slice(0, 10).replace(/-/g, '');
    const parts = await partitionsOf();
    expect(parts).toHaveLength(8); // today and --partition-premake (7) after it
    expect(parts[0]).toBe(`outbox_p${today}`);
    const pub = await pool.query<{ pubviaroot: boolean }>(
      `SELECT pubviaroot FROM pg_publication WHERE pubname = 'outbox_pub'`,
    );
    expect(pub.rows[0]!.pubviaroot).toBe(true);
    expect((await cliExit(['check', '--sink', 'stdout'])).code).toBe(EXIT.OK);

    // Without publish_via_partition_root the rows would arrive under the partitions' names.
    await pool.query('ALTER PUBLICATION outbox_pub SET (publish_via_partition_root = false)');
    const noRoot = await cliExit(['check', '--sink', 'stdout']);
    expect(noRoot.code).not.toBe(EXIT.OK);
    expect(noRoot.err).toContain('PUBLICATION_MISMATCH');
    expect(noRoot.err).toContain('SET (publish_via_partition_root = true)');
    expect(noRoot.err).not.toContain('also covers');
    // migrate sets it again.
    expect((await cliExit(['migrate'])).code).toBe(EXIT.OK);
    expect((await pool.query(`SELECT 1 FROM pg_publication WHERE pubviaroot`)).rowCount).toBe(1);

    // No partition after today's: inserts fail at midnight.
    for (const p of parts.slice(1)) await pool.query(`DROP TABLE ${p}`);
    const ahead = await cliExit(['check', '--sink', 'stdout']);
    expect(ahead.code).not.toBe(EXIT.OK);
    expect(ahead.err).toContain('PARTITIONS_MISSING');
    expect(ahead.err).toContain('inserts fail from then on');
    expect((await cliExit(['migrate'])).code).toBe(EXIT.OK);
    expect(await partitionsOf()).toEqual(parts);
    expect((await cliExit(['check', '--sink', 'stdout'])).code).toBe(EXIT.OK);

    // --partitioned on a table an earlier migrate made plain is refused, with the way out.
    await pool.query('CREATE SCHEMA plain');
    expect((await cliExit(['migrate', '--schema', 'plain', '--publication', 'plain_pub'])).code).toBe(
      EXIT.OK,
    );
    const refused = await cliExit([
      'migrate',
      '--schema',
      'plain',
      '--publication',
      'plain_pub',
      '--partitioned',
    ]);
    expect(refused.code).not.toBe(EXIT.OK);
    expect(refused.err).toContain('already exists and is not partitioned');
    await pool.query('DROP PUBLICATION plain_pub; DROP SCHEMA plain CASCADE');
  });

  it('streams across a partition boundary crossed mid-stream: nothing lost, each key in order', async () => {
    // Yesterday's partition, so created_at values before today's midnight have a home.
    const client = await pool.connect();
    try {
      await ensurePartitions(
        client,
        { schema: 'public', table: 'outbox' },
        { now: new Date(Date.now() - DAY), ahead: 0, interval: 'day' },
      );
    } finally {
      client.release();
    }
    await kafka.createTopic('outbox.event.Cross', 2);
    const r = startRelay();
    await r.waitForLog(/streaming from the slot/, 30_000);
    const boundary = startOfDay(new Date());
    const w = writer(pool, 'Cross');
    // 200 events, one second apart across today's midnight, 10 per transaction: the transaction
    // at the boundary writes both partitions.
    const at = Array.from({ length: 200 }, (_, i) => new Date(boundary.getTime() + (i - 100) * 1000));
    for (let i = 0; i < at.length; i += 10) await w.write(at.slice(i, i + 10));
    await expectComplete('Cross', w.next, 'boundary crossed mid-stream');
    const byPartition = await pool.query<{ p: string; n: string }>(
      `SELECT tableoid::regclass::text AS p, count(*)::text AS n FROM outbox WHERE aggregate_type = 'Cross' GROUP BY 1 ORDER BY 1`,
    );
    expect(byPartition.rows.map((x) => Number(x.n))).toEqual([100, 100]);
    await waitFor(async () => (await truthful('Cross')).published === 200, {
      message: 'view says published',
    });
  });

  it('retention drops an old partition once its rows are published, while events of newer partitions flow', async () => {
    await kafka.createTopic('outbox.event.Old', 1);
    await kafka.createTopic('outbox.event.New', 2);
    const oldDay = startOfDay(new Date(Date.now() - 4 * DAY));
    const name = `outbox_p${oldDay.toISOString().slice(0, 10).replace(/-/g, '')}`;
    // The partition and its rows in one transaction: retention never sees it empty.
    const client = await pool.connect();
    const old = writer(client, 'Old');
    try {
      await client.query('BEGIN');
      await client.query(
        `CREATE TABLE ${name} PARTITION OF outbox FOR VALUES FROM ('${oldDay.toISOString()}') TO ('${new Date(oldDay.getTime() + DAY).toISOString()}')`,
      );
      await old.write(Array.from({ length: 40 }, (_, i) => new Date(oldDay.getTime() + i * 60_000)));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const fresh = writer(pool, 'New');
    let writing = true;
    const background = (async () => {
      while (writing) await fresh.write(Array(5).fill(null));
    })();
    try {
      await waitFor(async () => !(await partitionsOf()).includes(name), {
        timeoutMs: 30_000,
        message: `partition ${name} dropped`,
      });
      // And more after the drop.
      const after = fresh.total();
      await waitFor(() => fresh.total() >= after + 50, { message: 'writes after the drop' });
    } finally {
      writing = false;
      await background;
    }
    await expectComplete('Old', old.next, 'old partition, then dropped');
    await expectComplete('New', fresh.next, 'newer partitions while the old one was dropped');
    await relay!.waitForLog(new RegExp(`retention: partition ${name} dropped`), 10_000);
    // The newer rows are all still in the table, and all published.
    await waitFor(async () => (await truthful('New')).published === fresh.total(), {
      message: 'New published',
    });
    expect(await truthful('Old')).toEqual({});
  });

  it('lost-slot recovery, replay and status on the partitioned table', async () => {
    await kafka.createTopic('outbox.event.Lost', 2);
    relay!.kill('SIGTERM');
    await relay!.exited;
    await pool.query('SELECT pg_drop_replication_slot($1)', [SLOT]);
    // Written while no slot exists: only the table recovery can publish them, in both partitions.
    const w = writer(pool, 'Lost');
    const boundary = startOfDay(new Date());
    await w.write(Array.from({ length: 30 }, (_, i) => new Date(boundary.getTime() - 15_000 + i * 1000)));
    await w.write(Array(30).fill(null));
    const r = startRelay();
    await expectComplete('Lost', w.next, 'written while the slot was gone');
    expect(r.logs()).toMatch(/recover/i);

    // replay copies into the current partition, and the stream publishes them.
    const rep = await cliExit([
      'replay',
      '--aggregate-type',
      'Lost',
      '--since',
      new Date(boundary.getTime() - 60_000).toISOString(),
      '--yes',
    ]);
    expect(rep.code, rep.err).toBe(EXIT.OK);
    await waitFor(async () => (await truthful('Lost')).published === 120, { message: 'copies published' });
    const copies = await kafka.readAll('outbox.event.Lost');
    expect(new Set(copies.map((m) => `${m.key}:${m.value}`)).size).toBe(60);
    expect(copies.length).toBeGreaterThanOrEqual(120);

    // The relay keeps the partitions ahead (--partition-premake 7), whoever dropped them.
    const ahead = (await partitionsOf()).filter(
      (n) => n > `outbox_p${boundary.toISOString().slice(0, 10).replace(/-/g, '')}`,
    );
    expect(ahead).toHaveLength(7);
    for (const p of ahead.slice(2)) await pool.query(`DROP TABLE ${p}`);
    await waitFor(async () => (await partitionsOf()).includes(ahead.at(-1)!), {
      message: 'partitions made again',
    });
    await r.waitForLog(/partitions created ahead/, 10_000); // written right after the CREATE's commit

    const count = await cliExit([
      'events',
      'count',
      '--aggregate-type',
      'Lost',
      '--status',
      'published',
      '--json',
    ]);
    expect(count.code, count.err).toBe(EXIT.OK);
    expect((JSON.parse(count.out) as { count: number }).count).toBe(120);
    const first = await pool.query<{ id: string }>(
      `SELECT min(id)::text AS id FROM outbox WHERE aggregate_type = 'Lost'`,
    );
    const show = await cliExit(['events', 'show', first.rows[0]!.id]);
    expect(show.code, show.err).toBe(EXIT.OK);
    expect(show.out).toContain('published');

    const status = await cliExit(['status', '--json']);
    expect(status.code, status.err).toBe(EXIT.OK);
    const json = JSON.parse(status.out) as { publication: { ok: boolean }; counts: Record<string, number> };
    expect(json.publication.ok).toBe(true);
    expect(json.counts.pending ?? 0).toBe(0);
  });

  it('a relay whose role does not own the table streams on and says how to get its partitions made', async () => {
    await kafka.createTopic('outbox.event.Role', 1);
    relay!.kill('SIGTERM');
    await relay!.exited;
    await pool.query(`CREATE ROLE relay_role LOGIN REPLICATION;
      GRANT SELECT, UPDATE, DELETE ON outbox TO relay_role;
      GRANT SELECT, UPDATE ON outbox_relay_state, outbox_relay_progress TO relay_role`);
    const ahead = (await partitionsOf()).slice(-2);
    for (const p of ahead) await pool.query(`DROP TABLE ${p}`);
    const url = new URL(server.url);
    url.username = 'relay_role';
    relay = spawnCli([
      'run',
      '--database-url',
      url.toString(),
      '--slot',
      SLOT,
      ...kafka.relayArgs(),
      '--sweep-interval-ms',
      '100',
      '--prune-interval-ms',
      '200',
    ]);
    await relay.waitForLog(
      /"msg":"partitions failed \(creating a partition needs the partitioned table's owner/,
      30_000,
    );
    const w = writer(pool, 'Role');
    await w.write(Array(20).fill(null));
    await expectComplete('Role', w.next, 'a relay that may not create partitions');
    expect((await partitionsOf()).filter((p) => ahead.includes(p))).toEqual([]);
    // The owner's migrate makes them.
    expect((await cliExit(['migrate'])).code).toBe(EXIT.OK);
    expect((await partitionsOf()).slice(-2)).toEqual(ahead);
  });
});

describe.each(VERSIONS)('retention of a partitioned outbox on PostgreSQL %s', (version) => {
  let server: ThrowawayPostgres;
  let pool: pg.Pool;
  beforeAll(async () => {
    server = await startThrowawayPostgres({ version });
    pool = new pg.Pool({ connectionString: server.url, max: 4 });
    pool.on('error', () => {});
  });
  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  });

  it('drops a partition only once every row in it is settled; never one holding a pending, failed, parked or (without --retention-dead-ms) dead row', async () => {
    const client = await pool.connect();
    const now = Date.now();
    const day = (n: number) => startOfDay(new Date(now - n * DAY));
    const nameOf = (n: number) => `outbox_p${day(n).toISOString().slice(0, 10).replace(/-/g, '')}`;
    try {
      await migrate(client, {
        schema: 'public',
        table: 'outbox',
        publication: 'outbox_pub',
        partitioned: true,
      });
      await ensurePartitions(
        client,
        { schema: 'public', table: 'outbox' },
        { now: day(12), ahead: 5, interval: 'day' },
      );
    } finally {
      client.release();
    }
    // Rows of day -n: the statuses given; 'published' = pending and covered by the progress record.
    const seed = async (n: number, statuses: string[]) => {
      const ids: string[] = [];
      for (const s of statuses) {
        const r = await pool.query<{ id: string }>(
          `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at, status)
           VALUES ('R', $1, 'E', NULL, $2, $3) RETURNING id::text`,
          [`d${n}`, new Date(day(n).getTime() + 3600_000), s === 'published' ? 'pending' : s],
        );
        if (s === 'published') ids.push(r.rows[0]!.id);
      }
      await recordProgress(pool, '"public"."outbox_relay_progress"', 's', ids, await currentTimeline(pool));
    };
    await seed(12, ['published', 'published', 'discarded']);
    await seed(11, ['published', 'failed']);
    await seed(10, ['published', 'pending']);
    await seed(9, ['parked', 'published']);
    await seed(8, ['published', 'dead']);
    const metrics = new RelayMetrics();
    const retention = (deadRetentionMs?: number) =>
      new Retention({
        db: pool,
        table: '"public"."outbox"',
        tableName: 'public.outbox',
        progress: '"public"."outbox_relay_progress"',
        publishedRetentionMs: 7 * DAY,
        ...(deadRetentionMs === undefined ? {} : { deadRetentionMs }),
        batchSize: 10,
        pauseMs: 0,
        metrics,
        log: pino({ level: 'silent' }),
      });
    const rows = async () =>
      Object.fromEntries(
        (
          await pool.query<{ d: string; n: string }>(
            `SELECT aggregate_id AS d, count(*)::text AS n FROM outbox GROUP BY 1`,
          )
        ).rows.map((r) => [r.d, Number(r.n)]),
      );

    const first = await retention().pruneOnce();
    expect(first?.partitions).toEqual({
      dropped: [nameOf(12)],
      held: [nameOf(11), nameOf(10), nameOf(9), nameOf(8)],
    });
    expect(first?.deleted).toEqual({ published: 2, discarded: 1 });
    // Held partitions keep every row: nothing is deleted one by one.
    expect(await rows()).toEqual({ d11: 2, d10: 2, d9: 2, d8: 2 });
    expect((await metrics.pruned.get()).values.find((v) => v.labels.status === 'published')?.value).toBe(2);

    // Settled meanwhile: the failed row discarded by an operator, the pending one published.
    await pool.query(
      `UPDATE outbox SET status = 'discarded' WHERE aggregate_id = 'd11' AND status = 'failed'`,
    );
    const pending = await pool.query<{ id: string }>(
      `SELECT id::text FROM outbox WHERE aggregate_id = 'd10' AND status = 'pending' ORDER BY id DESC LIMIT 1`,
    );
    await recordProgress(
      pool,
      '"public"."outbox_relay_progress"',
      's',
      [pending.rows[0]!.id],
      await currentTimeline(pool),
    );
    const second = await retention().pruneOnce();
    expect(second?.partitions).toEqual({ dropped: [nameOf(11), nameOf(10)], held: [nameOf(9), nameOf(8)] });
    expect(await rows()).toEqual({ d9: 2, d8: 2 });

    // A dead head whose parked follower sits in a newer partition holds its own (strict order:
    // dropped, it would let the follower go out past it), even with --retention-dead-ms.
    const follower = (
      await pool.query<{ id: string }>(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at, status)
         VALUES ('R', 'd8', 'E', NULL, $1, 'parked') RETURNING id::text`,
        [new Date(day(7).getTime() + 3600_000)],
      )
    ).rows[0]!.id;
    const headHeld = await retention(5 * DAY).pruneOnce();
    expect(headHeld?.partitions).toEqual({ dropped: [], held: [nameOf(9), nameOf(8)] });
    const c8 = await pool.connect();
    try {
      const p8 = (await readPartitioning(c8, '"public"."outbox"'))!.partitions.find(
        (p) => p.name === nameOf(8),
      )!;
      expect(
        await dropIfSettled(
          c8,
          p8,
          {
            table: '"public"."outbox"',
            progress: '"public"."outbox_relay_progress"',
            publishedRetentionMs: 7 * DAY,
            metrics,
            log: pino({ level: 'silent' }),
          },
          true,
        ),
      ).toBe(false);
    } finally {
      c8.release();
    }
    await pool.query(`UPDATE outbox SET status = 'discarded' WHERE id = $1`, [follower]);

    // Dead rows go with --retention-dead-ms only; the parked one holds its partition still.
    const third = await retention(5 * DAY).pruneOnce();
    expect(third?.partitions).toEqual({ dropped: [nameOf(8)], held: [nameOf(9)] });
    expect(await rows()).toEqual({ d9: 2, d8: 1 });
    await pool.query(`DELETE FROM outbox WHERE id = $1`, [follower]);

    // The check under the root's lock, right before DROP (a row that changed after the unlocked
    // count): a 'pending' row no record covers and a dead row (no dead window) each keep it.
    const d = {
      table: '"public"."outbox"',
      progress: '"public"."outbox_relay_progress"',
      publishedRetentionMs: 7 * DAY,
      metrics,
      log: pino({ level: 'silent' }),
    };
    const c = await pool.connect();
    try {
      const p9 = (await readPartitioning(c, d.table))!.partitions.find((p) => p.name === nameOf(9))!;
      await pool.query(
        `UPDATE outbox SET status = 'published' WHERE aggregate_id = 'd9' AND status = 'parked'`,
      );
      await pool.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at) VALUES ('R', 'd9', 'E', NULL, $1)`,
        [new Date(day(9).getTime() + 7200_000)],
      );
      expect(await dropIfSettled(c, p9, d, true)).toBe(false);
      await pool.query(`UPDATE outbox SET status = 'dead' WHERE aggregate_id = 'd9' AND status = 'pending'`);
      expect(await dropIfSettled(c, p9, d, false)).toBe(false);
      expect(await rows()).toEqual({ d9: 3 });
      expect(await dropIfSettled(c, p9, d, true)).toBe(true);
      expect(await rows()).toEqual({});
    } finally {
      c.release();
    }
  });
});
