/**
 * Operations against real PostgreSQL: slot health (gauges, thresholds, an invalidated slot),
 * the heartbeat, and retention pruning.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import type { Classified } from '../../src/errors.ts';
import { ErrorCode, isRelayError } from '../../src/errors.ts';
import { EXIT } from '../../src/exit-codes.ts';
import { Retention } from '../../src/lifecycle/retention.ts';
import type { Logger } from '../../src/observability/logger.ts';
import { RelayMetrics } from '../../src/observability/metrics.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { readSlot, SlotWatch } from '../../src/sweeper/slot-watch.ts';
import {
  createTestDatabase,
  pgVersionNum,
  type TestDatabase,
  useTestDatabase,
  waitFor,
} from '../support/postgres.ts';
import { insertEvents, migrateDb, slotOf, spawnCli, testConfig } from '../support/relay.ts';

const MiB = 1024 * 1024;

/** A sink that keeps what it was given; `down` makes every publish fail transiently (a broker outage). */
class CaptureSink implements Sink {
  readonly name = 'capture';
  readonly messages: OutboundMessage[] = [];
  down = false;
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async publish(batch: readonly OutboundMessage[]): Promise<void> {
    if (this.down) throw new Error('broker down (test)');
    this.messages.push(...batch);
  }
  classify(e: unknown): Classified {
    return { class: 'transient', reason: 'TEST_DOWN', message: String(e) };
  }
}

/** A logger whose lines the test can read. */
function memoryLogger(): { log: Logger; lines: () => { level: number; msg: string }[] } {
  const out: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) out.push(JSON.parse(l));
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines: () => out };
}

const WARN = 40;
const ERROR = 50;
const INFO = 30;

type Readable = { get(): Promise<{ values: { labels: Record<string, unknown>; value: number }[] }> };

async function gaugeValue(g: Readable, labels: Record<string, string> = {}): Promise<number | undefined> {
  const v = (await g.get()).values.find((x) =>
    Object.entries(labels).every(([k, val]) => x.labels[k] === val),
  );
  return v?.value;
}

/** WAL of another table, in transactions of about 100 kB: returns the bytes of WAL written. */
async function churn(pool: pg.Pool, bytes: number): Promise<number> {
  await pool.query('CREATE TABLE IF NOT EXISTS churn (id bigserial PRIMARY KEY, filler text)');
  const start = await currentLsn(pool);
  for (;;) {
    await pool.query(`INSERT INTO churn (filler) SELECT repeat('x', 200) FROM generate_series(1, 400)`);
    const written = await walSince(pool, start);
    if (written >= bytes) return written;
  }
}

async function currentLsn(pool: pg.Pool): Promise<string> {
  return (await pool.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
}

async function walSince(pool: pg.Pool, lsn: string): Promise<number> {
  const r = await pool.query<{ n: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS n', [
    lsn,
  ]);
  return Number(r.rows[0]!.n);
}

async function slotRow(pool: pg.Pool, slot: string) {
  const r = await pool.query<{
    lag: string;
    retained: string | null;
    wal_status: string;
    active: boolean;
    confirmed: string;
  }>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS lag,
            confirmed_flush_lsn::text AS confirmed,
            pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::text AS retained, wal_status, active
       FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  const row = r.rows[0]!;
  return { ...row, lag: Number(row.lag), retained: row.retained === null ? null : Number(row.retained) };
}

function startRelay(
  config: ReturnType<typeof testConfig>,
  sink: Sink,
  log: Logger = pino({ level: 'silent' }),
) {
  const relay = new Relay({ config, sink, log });
  void relay.start();
  return relay;
}

describe('slot health', () => {
  const db = useTestDatabase();
  beforeAll(async () => {
    await migrateDb(db);
  });

  it('exports the slot as gauges and logs each threshold crossing once', async () => {
    const mem = memoryLogger();
    const metrics = new RelayMetrics();
    // The test cluster is shared: other test files write WAL at any time, and this slot retains
    // it too. The thresholds sit above what the slot retains already, with margins far larger
    // than what they write in the seconds between two checks (2 and 8 MiB above zero flaked
    // with one core busy: 3.4 MiB retained before this test wrote anything).
    const base = (await readSlot(db.pool, slotOf(db)))!.retainedBytes;
    const warnBytes = base + 16 * MiB;
    const criticalBytes = base + 64 * MiB;
    const watch = new SlotWatch({
      db: db.pool,
      slot: slotOf(db),
      thresholds: { warnBytes, criticalBytes },
      metrics: metrics.slot,
      log: mem.log,
    });
    const first = await watch.check();
    expect(first).not.toBeNull();
    expect(first!.active).toBe(false);
    expect(first!.walStatus).toBe('reserved');
    expect(await gaugeValue(metrics.slot.active)).toBe(0);
    expect(await gaugeValue(metrics.slot.walStatus, { status: 'reserved' })).toBe(1);
    expect(await gaugeValue(metrics.slot.walStatus, { status: 'lost' })).toBe(0);
    // max_slot_wal_keep_size is unlimited on the test server.
    expect(await gaugeValue(metrics.slot.safeWalSizeBytes)).toBe(-1);
    const noise = () => mem.lines().filter((l) => l.level >= WARN);
    expect(noise()).toEqual([]);

    // The relay is not running: the slot pins everything written from now on.
    const written = await churn(db.pool, 24 * MiB);
    const s = await watch.check();
    expect(s!.retainedBytes).toBeGreaterThanOrEqual(written);
    expect(s!.confirmedLagBytes).toBeGreaterThanOrEqual(written);
    expect(await gaugeValue(metrics.slot.retainedWalBytes)).toBe(s!.retainedBytes);
    expect(await gaugeValue(metrics.slot.confirmedLagBytes)).toBe(s!.confirmedLagBytes);
    await watch.check();
    expect(noise().map((l) => l.level)).toEqual([WARN]);
    expect(noise()[0]!.msg).toMatch(/retains .* of WAL, above --slot-warn-bytes \(\d+\.\d MiB\)/);

    await churn(db.pool, 48 * MiB);
    await watch.check();
    await watch.check();
    expect(noise().map((l) => l.level)).toEqual([WARN, ERROR]);
    expect(noise()[1]!.msg).toMatch(/above --slot-critical-bytes \(\d+\.\d MiB\)/);

    // A relay catches the slot up: its own sweeper exports the slot as active, and ours logs the clearing once.
    const sink = new CaptureSink();
    const relay = startRelay(
      testConfig(db, ['--slot-check-interval-ms', '100', '--sweep-interval-ms', '50']),
      sink,
    );
    try {
      await waitFor(async () => (await gaugeValue(relay.metrics.slot.active)) === 1, {
        message: 'relay exports outbox_slot_active = 1',
      });
      expect(await gaugeValue(relay.metrics.slot.walStatus, { status: 'reserved' })).toBe(1);
      // restart_lsn moves on at running-xacts records: a checkpoint writes one.
      await waitFor(
        async () => {
          await db.query('CHECKPOINT');
          return (await watch.check())!.retainedBytes < 1 * MiB;
        },
        { timeoutMs: 30_000, intervalMs: 300, message: 'retained WAL back under 1 MiB' },
      );
      await watch.check();
      // Once per crossing: a check that lands between the thresholds while the WAL is recycled
      // (seen on PostgreSQL 14: restart_lsn moved in two steps) logs critical → warn, then → ok.
      const cleared = mem.lines().filter((l) => l.level === INFO && /back to/.test(l.msg));
      expect(cleared.length).toBeGreaterThanOrEqual(1);
      expect(cleared.length).toBeLessThanOrEqual(2);
      expect(cleared.at(-1)!.msg).toMatch(/\(ok\)$/);
      if (cleared.length === 2) expect(cleared[0]!.msg).toMatch(/\(warn\)$/);
      expect(noise().map((l) => l.level)).toEqual([WARN, ERROR]);
      await waitFor(async () => ((await gaugeValue(relay.metrics.slot.retainedWalBytes)) ?? Infinity) < MiB, {
        message: 'the relay exports the lower retained WAL',
      });
    } finally {
      await relay.stop();
    }
    // Stopped: no stale slot gauges from an instance that no longer holds the slot.
    expect(await gaugeValue(relay.metrics.slot.active)).toBe(0);
    expect(sink.messages).toHaveLength(0);
  }, 60_000);
});

describe('an invalidated slot (wal_status = lost)', () => {
  let server: ThrowawayPostgres | undefined;
  let pool: pg.Pool;
  const slot = 'ops_lost';

  beforeAll(async () => {
    server = await startThrowawayPostgres({
      settings: { max_slot_wal_keep_size: '1MB', max_wal_size: '32MB', min_wal_size: '32MB' },
    });
    pool = new pg.Pool({ connectionString: server.url, max: 3 });
    pool.on('error', () => {});
    const c = await pool.connect();
    try {
      await migrate(c, { schema: 'public', table: 'outbox', publication: 'outbox_pub', slot });
    } finally {
      c.release();
    }
  }, 60_000);

  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  });

  it('with --no-slot-recovery: stops the streaming relay with SLOT_INVALIDATED, and a new one exits 69 saying what to do', async () => {
    const sink = new CaptureSink();
    sink.down = true; // a broker outage: the slot stays where it is while WAL grows
    const config = loadConfig(
      'run',
      [
        '--database-url',
        server!.url,
        '--slot',
        slot,
        '--sink',
        'stdout',
        '--slot-check-interval-ms',
        '100',
        '--sweep-interval-ms',
        '50',
        '--retry-initial-ms',
        '20',
        '--retry-max-ms',
        '200',
        '--no-slot-recovery',
      ],
      {},
    ).config;
    const relay = startRelay(config, sink);
    const outcome = relay.done().then(
      () => null,
      (e: unknown) => e,
    );
    await waitFor(() => relay.state === 'streaming', { timeoutMs: 20_000, message: 'relay streaming' });
    await insertEvents(pool, [
      { aggregateType: 'Order', aggregateId: '1', eventType: 'Placed', payload: '{}' },
    ]);

    // WAL past max_slot_wal_keep_size, then checkpoints remove it and invalidate the slot.
    await waitFor(
      async () => {
        await churn(pool, 20 * MiB);
        await pool.query('SELECT pg_switch_wal()');
        await pool.query('CHECKPOINT');
        return (await slotRow(pool, slot)).wal_status === 'lost';
      },
      { timeoutMs: 60_000, intervalMs: 10, message: 'slot invalidated' },
    );
    const e = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('timeout'), 20_000))]);
    expect(isRelayError(e, ErrorCode.SLOT_INVALIDATED), String(e)).toBe(true);
    const explanation = (e as { explanation: string }).explanation;
    expect(explanation).toMatch(/wal_status = lost/);
    expect(explanation).toMatch(/may be missing/);
    expect(explanation).toMatch(/Drop and recreate the slot/);
    expect(explanation).toMatch(/replay --since/);
    await relay.stop();

    // The sweeper's check on its own: the gauge says lost and the check throws the same error.
    const metrics = new RelayMetrics();
    const watch = new SlotWatch({
      db: pool,
      slot,
      thresholds: { warnBytes: 0, criticalBytes: 0 },
      metrics: metrics.slot,
      log: pino({ level: 'silent' }),
    });
    await expect(watch.check()).rejects.toMatchObject({ code: ErrorCode.SLOT_INVALIDATED, retriable: false });
    expect(await gaugeValue(metrics.slot.walStatus, { status: 'lost' })).toBe(1);
    expect(await gaugeValue(metrics.slot.walStatus, { status: 'reserved' })).toBe(0);

    // A relay started on the lost slot: exit 69 with the explanation.
    const p = spawnCli([
      'run',
      '--database-url',
      server!.url,
      '--slot',
      slot,
      '--sink',
      'stdout',
      '--no-slot-recovery',
    ]);
    expect(await p.exited).toBe(EXIT.UNAVAILABLE);
    expect(p.logs()).toMatch(/SLOT_INVALIDATED/);
    expect(p.logs()).toMatch(/may be missing/);
    expect(p.logs()).toMatch(/replay --since/);
  }, 120_000);
});

describe('heartbeat', () => {
  for (const heartbeatMs of [0, 200]) {
    it(`outbox idle, another table churning: retained WAL stays bounded (heartbeat ${heartbeatMs ? `every ${heartbeatMs} ms` : 'off'})`, async () => {
      const h = await createTestDatabase({ name: `hb_${heartbeatMs}` });
      const sink = new CaptureSink();
      let relay: Relay | undefined;
      const hold = `${h.name}_hold`;
      const dropHold = () =>
        h.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [
          hold,
        ]);
      try {
        await migrateDb(h);
        // The heartbeats are counted from the WAL since `from`: a slot holds those segments until
        // they are counted (another test's CHECKPOINT on the shared cluster removed them once).
        // PostgreSQL 15+: a physical slot, the records read with pg_walinspect; 14 has no
        // pg_walinspect: a logical slot, the messages decoded by pgoutput (a publication of no table).
        const walinspect = pgVersionNum() >= 150_000;
        if (walinspect) {
          await h.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
          await h.query('SELECT pg_create_physical_replication_slot($1, true)', [hold]);
        } else {
          await h.query('CREATE PUBLICATION hb_none');
          await h.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [hold]);
        }
        const from = await currentLsn(h.pool);
        // Status updates (which ask the server for a keepalive) only once a minute: the slot must
        // advance through the server's own keepalives and, when on, the heartbeat.
        relay = startRelay(
          testConfig(h, ['--heartbeat-interval-ms', String(heartbeatMs), '--status-interval-ms', '60000']),
          sink,
        );
        await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });
        const bound = 16 * MiB;
        // How far behind the server's decoding runs during the churn depends on the machine's
        // load; what must hold is that the slot keeps moving while the outbox is idle, and ends
        // caught up (without idle advancement it would stay where it was, the whole churn behind).
        const positions = new Set<string>();
        let churning = true;
        const sampler = (async () => {
          while (churning) {
            positions.add((await slotRow(h.pool, slotOf(h))).confirmed);
            await new Promise((r) => setTimeout(r, 50));
          }
        })();
        const written = await churn(h.pool, 5 * bound);
        churning = false;
        await sampler;
        expect(written).toBeGreaterThanOrEqual(5 * bound);
        expect(
          positions.size,
          `confirmed positions seen during ${written} bytes of churn`,
        ).toBeGreaterThanOrEqual(2);
        await waitFor(async () => (await slotRow(h.pool, slotOf(h))).lag < MiB, {
          message: 'slot caught up after the churn',
        });
        // Counted before the CHECKPOINTs below, which may remove the WAL segments since `from`.
        const beats = walinspect
          ? await h.query<{ n: string }>(
              `SELECT count(*)::text AS n FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn())
                WHERE resource_manager = 'LogicalMessage'`,
              [from],
            )
          : await h.query<{ n: string }>(
              `SELECT count(*)::text AS n FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL,
                 'proto_version', '1', 'publication_names', 'hb_none', 'messages', 'true')
                WHERE get_byte(data, 0) = 77 /* 'M' */`,
              [hold],
            );
        if (heartbeatMs > 0) expect(Number(beats[0]!.n)).toBeGreaterThanOrEqual(3);
        else expect(Number(beats[0]!.n)).toBe(0);
        await dropHold();

        // What the server keeps (from restart_lsn) is bounded too, once a running-xacts record passed.
        await waitFor(
          async () => {
            await h.query('CHECKPOINT');
            return ((await slotRow(h.pool, slotOf(h))).retained ?? Infinity) < bound;
          },
          { timeoutMs: 30_000, intervalMs: 300, message: 'retained WAL under the bound' },
        );

        // Nothing was published (no heartbeat reaches the sink); a real event still goes through, alone.
        expect(sink.messages).toHaveLength(0);
        await insertEvents(h.pool, [
          { aggregateType: 'Order', aggregateId: '7', eventType: 'Placed', payload: '{}' },
        ]);
        await waitFor(() => sink.messages.length === 1, { message: 'the event published' });
        await new Promise((r) => setTimeout(r, 3 * Math.max(heartbeatMs, 100)));
        expect(sink.messages.map((m) => m.topic)).toEqual(['outbox.event.Order']);
      } finally {
        await relay?.stop();
        await dropHold().catch(() => {});
        await h.close();
      }
    }, 90_000);
  }
});

describe('retention', () => {
  let r: TestDatabase;
  beforeAll(async () => {
    r = await createTestDatabase({ name: 'retention' });
    await migrateDb(r);
  });
  afterAll(async () => {
    await r?.close();
  });

  function retention(metrics: RelayMetrics, opts: { deadRetentionMs?: number } = {}) {
    return new Retention({
      db: r.pool,
      table: '"public"."outbox"',
      tableName: 'public.outbox',
      progress: '"public"."outbox_relay_progress"',
      publishedRetentionMs: 7 * 24 * 3600 * 1000,
      ...(opts.deadRetentionMs === undefined ? {} : { deadRetentionMs: opts.deadRetentionMs }),
      batchSize: 10,
      pauseMs: 0,
      metrics,
      log: pino({ level: 'silent' }),
    });
  }

  async function seed(status: string, n: number, ageDays: number): Promise<void> {
    const ids = await insertEvents(
      r.pool,
      Array.from({ length: n }, (_, i) => ({
        aggregateType: 'Seed',
        aggregateId: `${status}-${ageDays}-${i}`,
        eventType: status,
        payload: '{}',
      })),
    );
    await r.query(
      `UPDATE outbox SET status = $2, created_at = now() - $3::int * interval '1 day' WHERE id = ANY($1::bigint[])`,
      [ids, status, ageDays],
    );
  }

  async function counts(): Promise<Record<string, number>> {
    const rows = await r.query<{ k: string; n: string }>(
      `SELECT status || CASE WHEN created_at < now() - interval '7 days' THEN ':old' ELSE ':young' END AS k,
              count(*)::text AS n FROM outbox_with_status GROUP BY 1`,
    );
    return Object.fromEntries(rows.map((x) => [x.k, Number(x.n)]));
  }

  it('deletes old published and discarded rows in batches, never pending, failed, parked, young ones; dead only with a window', async () => {
    await seed('published', 25, 10);
    await seed('discarded', 3, 10);
    await seed('published', 2, 1);
    await seed('pending', 2, 10);
    await seed('failed', 2, 10);
    await seed('parked', 2, 10);
    await seed('dead', 2, 10);
    await seed('dead', 1, 2);
    const metrics = new RelayMetrics();

    // Another pruner holds the lock: this one does nothing.
    const other = new pg.Client({ connectionString: r.url });
    await other.connect();
    try {
      await other.query(
        `SELECT pg_advisory_lock(hashtextextended('pg-outbox-relay:prune:public.outbox', 0))`,
      );
      expect(await retention(metrics).pruneOnce()).toBeNull();
      expect((await counts())['published:old']).toBe(25);
    } finally {
      await other.end();
    }

    const result = await retention(metrics).pruneOnce();
    expect(result).toEqual({ deleted: { published: 25, discarded: 3 }, batches: 3, more: false });
    expect(await counts()).toEqual({
      'published:young': 2,
      'pending:old': 2,
      'failed:old': 2,
      'parked:old': 2,
      'dead:old': 2,
      'dead:young': 1,
    });
    expect(await gaugeValue(metrics.pruned, { status: 'published' })).toBe(25);
    expect(await gaugeValue(metrics.pruned, { status: 'discarded' })).toBe(3);
    // Idempotent: nothing more to do.
    expect(await retention(metrics).pruneOnce()).toEqual({ deleted: {}, batches: 0, more: false });

    // Dead rows only with their own window (here 5 days: the 10-day-old ones, not the 2-day-old one).
    const dead = await retention(metrics, { deadRetentionMs: 5 * 24 * 3600 * 1000 }).pruneOnce();
    expect(dead).toEqual({ deleted: { dead: 2 }, batches: 1, more: false });
    expect((await counts())['dead:young']).toBe(1);
    expect(await gaugeValue(metrics.pruned, { status: 'dead' })).toBe(2);
    await r.query(`DELETE FROM outbox`);
  });

  it('--retention-dead-ms keeps a dead head whose aggregate has parked followers (they wait for an operator)', async () => {
    const ids = await insertEvents(
      r.pool,
      ['h1', 'h1', 'h2'].map((k) => ({
        aggregateType: 'Held',
        aggregateId: k,
        eventType: 'E',
        payload: '{}',
      })),
    );
    await r.query(
      `UPDATE outbox SET status = 'dead', created_at = now() - interval '10 days' WHERE id = ANY($1::bigint[])`,
      [[ids[0], ids[2]]],
    );
    await r.query(`UPDATE outbox SET status = 'parked' WHERE id = $1`, [ids[1]]);
    const res = await retention(new RelayMetrics(), { deadRetentionMs: 5 * 24 * 3600 * 1000 }).pruneOnce();
    expect(res).toEqual({ deleted: { dead: 1 }, batches: 1, more: false });
    const left = await r.query<{ id: string; status: string }>(
      'SELECT id::text, status FROM outbox WHERE id = ANY($1::bigint[]) ORDER BY id',
      [ids],
    );
    expect(left.map((x) => [x.id, x.status])).toEqual([
      [ids[0], 'dead'],
      [ids[1], 'parked'],
    ]);
    await r.query(`DELETE FROM outbox`);
  });

  it('prunes rows the relay recorded published (progress record) by age; never a pending row nobody published, however old', async () => {
    const sink = new CaptureSink();
    // The rows of the previous test are in the slot too: count only this test's events.
    const relayed = () => sink.messages.filter((m) => m.event.aggregateType === 'A').length;
    const config = testConfig(r, [
      '--retention-published-ms',
      '1000',
      '--prune-interval-ms',
      '200',
      '--sweep-interval-ms',
      '50',
      '--status-interval-ms',
      '200',
    ]);
    const direct = new Retention({
      db: r.pool,
      table: '"public"."outbox"',
      tableName: 'public.outbox',
      progress: '"public"."outbox_relay_progress"',
      publishedRetentionMs: 1000,
      batchSize: 10,
      pauseMs: 0,
      metrics: new RelayMetrics(),
      log: pino({ level: 'silent' }),
    });
    const truthful = async () =>
      Object.fromEntries(
        (
          await r.query<{ status: string; n: string }>(
            `SELECT status, count(*)::text AS n FROM outbox_with_status GROUP BY status`,
          )
        ).map((x) => [x.status, Number(x.n)]),
      );
    let relay = startRelay(config, sink);
    try {
      await waitFor(() => relay.state === 'streaming', { message: 'relay streaming' });
      await insertEvents(
        r.pool,
        Array.from({ length: 5 }, (_, i) => ({
          aggregateType: 'A',
          aggregateId: `${i}`,
          eventType: 'E',
          payload: '{}',
        })),
      );
      await waitFor(() => relayed() === 5, { message: 'published' });
      // No row write per event: the column still says 'pending'; the view says 'published'.
      await waitFor(async () => (await truthful()).published === 5, { message: 'recorded published' });
      expect(
        (
          await r.query<{ n: string }>(
            `SELECT count(*)::text AS n FROM outbox WHERE status = 'pending' AND aggregate_type = 'A'`,
          )
        )[0]!.n,
      ).toBe('5');
      // The relay's own sweeper prunes them once they are older than the window.
      await waitFor(async () => Object.keys(await counts()).length === 0, {
        timeoutMs: 20_000,
        message: 'published rows pruned by the relay',
      });
      expect(await gaugeValue(relay.metrics.pruned, { status: 'published' })).toBe(5);
    } finally {
      await relay.stop();
    }

    // The relay is down: new rows are not relayed, and however old they get, they stay.
    const held = await insertEvents(
      r.pool,
      Array.from({ length: 3 }, (_, i) => ({
        aggregateType: 'A',
        aggregateId: `x${i}`,
        eventType: 'E',
        payload: '{}',
      })),
    );
    await r.query(`UPDATE outbox SET created_at = now() - interval '30 days' WHERE id = ANY($1::bigint[])`, [
      held,
    ]);
    for (let i = 0; i < 4; i++) {
      expect(await direct.pruneOnce()).toEqual({ deleted: {}, batches: 0, more: false });
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(await counts()).toEqual({ 'pending:old': 3 });
    expect(await truthful()).toEqual({ pending: 3 });

    // Relayed and recorded: now they go.
    relay = startRelay(config, sink);
    try {
      await waitFor(() => relayed() === 8, { message: 'published after restart' });
      await waitFor(
        async () => {
          await direct.pruneOnce();
          return Object.keys(await counts()).length === 0;
        },
        { timeoutMs: 20_000, intervalMs: 200, message: 'pending rows pruned once recorded published' },
      );
    } finally {
      await relay.stop();
    }
  }, 60_000);
});
