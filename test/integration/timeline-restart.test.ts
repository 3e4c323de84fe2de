/**
 * Issue 36: a promotion while no relay runs, under a slot that survives it (PostgreSQL 17's
 * failover slot, synced to the standby, with synchronized_standby_slots on the primary).
 *
 * Right after the broker acknowledged a batch, the primary's walsender for the standby is frozen:
 * the standby has the batch's rows (decoding waited for it) but not the progress record the relay
 * writes next, nor anything after. The slot's confirmed position, synced to the standby, passes
 * the batch. The relay is stopped, the primary killed -9, the standby promoted, and a new relay
 * started against the new primary: its slot starts past the batch, and the new primary's progress
 * record does not cover it — those rows would stay 'pending' for ever.
 *
 * Before the timeline was stored with the progress record (sql/000005_relay_timeline.sql), a relay
 * that did not see the promotion itself knew nothing of it: the batch stayed 'pending' and no table
 * pass ran. Now the start compares the stored key with the server's, logs both, counts
 * outbox_timeline_changes_total and publishes from the table every row the record does not cover.
 * At-least-once (an in-memory sink) and exactly-once (the suite's Kafka: its progress record was
 * written on the old timeline and is not taken for the new one's).
 */
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import {
  startStandby,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../src/dev/throwaway-postgres.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { formatLsn } from '../../src/replication/lsn.ts';
import type { OutboundMessage } from '../../src/route/event.ts';
import { createSink } from '../../src/sinks/create.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { memorySink } from '../support/memory-sink.ts';
import { waitFor } from '../support/postgres.ts';
import { insertEvents } from '../support/relay.ts';

const SLOT = 'tl_restart';
type Delivery = 'at-least-once' | 'exactly-once';

let kafka: KafkaHarness;
beforeAll(async () => {
  kafka = await startKafka();
});
afterAll(async () => {
  await kafka?.stop();
});

function configFor(url: string, delivery: Delivery) {
  const sink =
    delivery === 'exactly-once'
      ? [...kafka.relayArgs(), '--delivery', delivery, '--kafka-progress-topic', kafka.topic('tl-progress')]
      : ['--sink', 'stdout'];
  return loadConfig(
    'run',
    [
      ...['--database-url', url, '--slot', SLOT, ...sink, '--http-port', '0'],
      ...['--retry-initial-ms', '50', '--retry-max-ms', '500', '--sweep-interval-ms', '200'],
      ...['--kafka-request-timeout-ms', '5000'],
    ],
    {},
  ).config;
}

/** The configured sink (in-memory, or Kafka), keeping what it published; `after` runs once a batch is acknowledged. */
async function recording(
  delivery: Delivery,
  config: ReturnType<typeof configFor>,
  after: (batch: readonly OutboundMessage[]) => Promise<void> = async () => {},
): Promise<Sink & { published: OutboundMessage[] }> {
  const inner = delivery === 'exactly-once' ? await createSink(config, silentLogger()) : memorySink();
  const published: OutboundMessage[] = [];
  return {
    name: inner.name,
    published,
    start: () => inner.start(),
    stop: () => inner.stop(),
    classify: (e) => inner.classify(e),
    ...(inner.destinationOf ? { destinationOf: (m: OutboundMessage) => inner.destinationOf!(m) } : {}),
    ...(inner.exactlyOnce ? { exactlyOnce: inner.exactlyOnce } : {}),
    publish: async (batch, opts) => {
      await inner.publish(batch, opts);
      published.push(...batch);
      await after(batch);
    },
  };
}

function events(n: number, tag: string) {
  return Array.from({ length: n }, (_, i) => ({
    aggregateType: 'Tl',
    aggregateId: `k${i % 5}`,
    eventType: 'E',
    payload: JSON.stringify({ tag, i }),
  }));
}

async function pending(db: pg.Pool): Promise<number> {
  const r = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM outbox_with_status WHERE status = 'pending'",
  );
  return r.rows[0]!.n;
}

async function slotLsn(db: pg.Pool): Promise<string | null> {
  const r = await db.query<{ lsn: string | null }>(
    'SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = $1',
    [SLOT],
  );
  return r.rows[0]?.lsn ?? null;
}

describe.each<[Delivery]>([['at-least-once'], ['exactly-once']])('%s', (delivery) => {
  let primary: ThrowawayPostgres | undefined;
  let standby: ThrowawayPostgres | undefined;
  let frozen: number | null = null;
  const relays: Relay[] = [];
  const pools: pg.Pool[] = [];

  afterAll(async () => {
    for (const r of relays) await r.stop().catch(() => {});
    for (const p of pools) await p.end().catch(() => {});
    if (frozen !== null) {
      try {
        process.kill(frozen, 'SIGCONT');
      } catch {}
    }
    await standby?.stop();
    await primary?.stop();
  });

  function poolOf(url: string): pg.Pool {
    const p = new pg.Pool({ connectionString: url, max: 3 });
    p.on('error', () => {});
    pools.push(p);
    return p;
  }

  it('a relay started after a promotion its failover slot survived publishes the rows only the old primary recorded (PostgreSQL 17)', async () => {
    if (delivery === 'exactly-once') await kafka.createTopic('outbox.event.Tl', 2);
    primary = await startThrowawayPostgres({ version: '17' });
    const p = poolOf(primary.url);
    await p.query("SELECT pg_create_physical_replication_slot('standby_slot', true)");
    standby = await startStandby(primary, {
      settings: {
        primary_slot_name: 'standby_slot',
        hot_standby_feedback: 'on',
        sync_replication_slots: 'on',
      },
    });
    const s = poolOf(standby.url);
    const c = await p.connect();
    try {
      await migrate(c, { schema: 'public', table: 'outbox', publication: 'outbox_pub', slot: SLOT });
    } finally {
      c.release();
    }
    await p.query("ALTER SYSTEM SET synchronized_standby_slots = 'standby_slot'");
    await p.query('SELECT pg_reload_conf()');

    // Relay 1 on the primary: after the broker acknowledged a batch of the 'late' rows, the
    // standby's walsender is frozen before the relay records the batch.
    let arm: ((frozen: { pid: number; commitLsn: bigint }) => void) | null = null;
    const config1 = configFor(primary.url, delivery);
    const sink = await recording(delivery, config1, async (batch) => {
      if (!arm || !batch.some((m) => m.event.payload?.toString().includes('"late"'))) return;
      const a = arm;
      arm = null;
      const r = await p.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'",
      );
      process.kill(r.rows[0]!.pid, 'SIGSTOP');
      a({ pid: r.rows[0]!.pid, commitLsn: batch[batch.length - 1]!.event.lsn });
    });
    const relay1 = new Relay({ config: config1, sink, log: silentLogger() });
    relays.push(relay1);
    await relay1.start();
    await insertEvents(p, events(100, 'early'));
    await waitFor(async () => (await pending(p)) === 0, {
      timeoutMs: 120_000,
      message: 'the early rows published',
    });
    // The standby's copy is ready (synced, not temporary) and at the primary's position.
    await waitFor(
      async () => {
        const r = await s.query<{ ok: boolean }>(
          'SELECT synced AND NOT temporary AS ok FROM pg_replication_slots WHERE slot_name = $1',
          [SLOT],
        );
        return r.rows[0]?.ok === true && (await slotLsn(s)) === (await slotLsn(p));
      },
      { timeoutMs: 90_000, message: "the standby's copy of the slot synced" },
    );

    const froze = new Promise<{ pid: number; commitLsn: bigint }>((resolve) => {
      arm = resolve;
    });
    const late = await insertEvents(p, events(50, 'late'));
    const { pid, commitLsn } = await froze;
    frozen = pid;
    // Recorded on the primary only; the slot's position past the batch synced to the standby.
    await waitFor(async () => (await pending(p)) === 0, {
      timeoutMs: 60_000,
      message: 'the late rows recorded',
    });
    await waitFor(
      async () =>
        (
          await s.query<{ past: boolean }>(
            'SELECT confirmed_flush_lsn > $2::pg_lsn AS past FROM pg_replication_slots WHERE slot_name = $1',
            [SLOT, formatLsn(commitLsn)],
          )
        ).rows[0]?.past === true,
      { timeoutMs: 90_000, message: "the standby's copy of the slot past the late rows" },
    );
    await relay1.stop();

    primary.crash();
    await standby.promote();
    // (crash() kills the primary's processes, the frozen walsender with them.)
    frozen = null;
    // The new primary has the late rows, not their progress record.
    expect(await pending(s)).toBe(late.length);

    // --no-slot-recovery: no table pass, so the relay stops (exit 69) rather than leave the late
    // rows pending behind the slot; the new timeline is not stored, so the next start still sees it.
    const noRecovery = new Relay({
      config: { ...configFor(standby.url, delivery), slotRecovery: false },
      sink: memorySink(),
      log: silentLogger(),
    });
    relays.push(noRecovery);
    await noRecovery.start();
    await expect(noRecovery.done()).rejects.toMatchObject({
      code: 'SLOT_INVALIDATED',
      message: expect.stringMatching(
        /promoted and slot .* continued on the new primary.*--no-slot-recovery is set/,
      ),
    });
    expect(await pending(s)).toBe(late.length);

    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(l) });
    const config2 = configFor(standby.url, delivery);
    const second = await recording(delivery, config2);
    const relay2 = new Relay({ config: config2, sink: second, log });
    relays.push(relay2);
    await relay2.start();
    await waitFor(async () => (await pending(s)) === 0, {
      timeoutMs: 120_000,
      message: async () => `rows still pending on the new primary: ${await pending(s)}`,
    });
    const republished = new Set(second.published.map((m) => m.event.id));
    expect(late.filter((id) => !republished.has(id))).toEqual([]);
    await waitFor(() => /table pass after the promotion done/.test(lines.join('')), {
      message: 'the table pass done',
    });
    expect((await relay2.metrics.timelineChanges.get()).values[0]?.value ?? 0).toBe(1);
    const logs = lines.join('');
    expect(logs).toMatch(/database timeline changed: timeline 1 of system \d+ → timeline 2 of system \d+/);
    // Once: exactly-once's sync of Kafka's record (written on timeline 1) adds no second change.
    expect(logs.match(/database timeline changed/g)).toHaveLength(1);
    expect(logs).not.toMatch(/replication slot lost/);
    // The new primary's key is stored: a later start compares against timeline 2.
    const stored = await s.query<{ timeline: string }>(
      'SELECT timeline FROM outbox_relay_progress WHERE slot_name = $1',
      [SLOT],
    );
    expect(stored.rows[0]!.timeline).toMatch(/^00000002:/);
  }, 300_000);
});
