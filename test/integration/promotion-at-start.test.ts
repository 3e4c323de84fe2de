/**
 * A promotion between the slot's opening and the stream's start, on a real PostgreSQL 17 primary
 * and its physical standby with a synced failover slot (the npm registry's build,
 * src/dev/postgres-builds.ts). A round opens the slot, and looks for a promotion, over the pool;
 * the stream starts later on its own replication connection — after the sink started, which can
 * take up to --sink-start-timeout-ms. A standby promoted in between answered the stream on the
 * new timeline while the round believed it was on the old one: the relay took the new timeline
 * as its first, so the promotion was never seen — no table pass for the rows the old primary had
 * recorded but the standby had not replayed (they stay `pending` behind the slot), no change
 * counted, and the next start's comparison found nothing either (found by review, not in CI).
 *
 * Here the sink's start is held while the primary is killed -9, the standby promoted and the
 * address moved: the stream must refuse to start on another timeline than the slot was opened
 * on, and the next round must see the promotion and run its table pass.
 */
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import {
  startStandby,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../src/dev/throwaway-postgres.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import { memorySink } from '../support/memory-sink.ts';
import { PgProxy } from '../support/pg-proxy.ts';
import { waitFor } from '../support/postgres.ts';
import { queryOnce } from '../support/query-once.ts';
import { insertEvents } from '../support/relay.ts';

const PHYSICAL_SLOT = 'standby_slot';
const SLOT = 'promote_at_start';
let primary: ThrowawayPostgres;
let standby: ThrowawayPostgres;
let proxy: PgProxy;
const relays: Relay[] = [];

beforeAll(async () => {
  primary = await startThrowawayPostgres({ version: '17' });
  const admin = new pg.Client(primary.url);
  await admin.connect();
  try {
    await admin.query(`SELECT pg_create_physical_replication_slot('${PHYSICAL_SLOT}')`);
    await migrate(admin, { schema: 'public', table: 'outbox', publication: 'outbox_pub', slot: SLOT });
  } finally {
    await admin.end();
  }
  standby = await startStandby(primary, {
    settings: { sync_replication_slots: 'on', hot_standby_feedback: 'on', primary_slot_name: PHYSICAL_SLOT },
  });
  await query(primary.url, `ALTER SYSTEM SET synchronized_standby_slots = '${PHYSICAL_SLOT}'`);
  await query(primary.url, 'SELECT pg_reload_conf()');
  proxy = await PgProxy.start(primary.port);
}, 180_000);

afterAll(async () => {
  for (const r of relays) await r.stop().catch(() => {});
  await proxy?.stop();
  await standby?.stop();
  await primary?.stop();
});

const query = queryOnce;

const events = (n: number, key: string) =>
  Array.from({ length: n }, (_, i) => ({
    aggregateType: 'Order',
    aggregateId: `${key}${i % 3}`,
    eventType: 'Created',
    payload: JSON.stringify({ seq: i }),
  }));

function config() {
  return loadConfig(
    'run',
    [
      ...['--database-url', proxy.url(), '--slot', SLOT, '--sink', 'stdout', '--http-port', '0'],
      ...['--retry-initial-ms', '50', '--retry-max-ms', '500', '--slot-check-interval-ms', '500'],
      ...['--status-interval-ms', '200'],
    ],
    {},
  ).config;
}

it('a standby promoted while the sink starts: the stream refuses the new timeline, the next round sees the promotion and runs its table pass; 0 lost', async () => {
  // A first relay streams, so that the standby's copy of the slot turns persistent (synced,
  // not temporary): the slot then survives the promotion.
  const first = memorySink();
  const r1 = new Relay({ config: config(), sink: first, log: silentLogger() });
  relays.push(r1);
  await r1.start();
  const pool = new pg.Pool({ connectionString: primary.url, max: 2 });
  pool.on('error', () => {});
  const before = await insertEvents(pool, events(30, 'p'));
  await waitFor(() => first.published.length >= before.length, {
    timeoutMs: 60_000,
    message: 'published before',
  });
  await waitFor(
    async () =>
      (
        await query<{ ok: boolean }>(
          standby.url,
          'SELECT synced AND NOT temporary AS ok FROM pg_replication_slots WHERE slot_name = $1',
          [SLOT],
        )
      )[0]?.ok === true,
    { timeoutMs: 90_000, message: "the standby's copy of the slot synced and persistent" },
  );
  await r1.stop();
  await pool.end();

  // The second relay: its sink's start is held until the promotion is done.
  const lines: string[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(s) });
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let reached!: () => void;
  const startReached = new Promise<void>((r) => {
    reached = r;
  });
  const inner = memorySink();
  let starts = 0;
  const sink = {
    ...inner,
    start: async () => {
      if (starts++ === 0) {
        reached();
        await held;
      }
    },
  };
  const r2 = new Relay({ config: config(), sink, log });
  relays.push(r2);
  await r2.start();
  await startReached; // the slot is open on the old primary

  // The standby promoted and the address moved, while the old primary is not down yet (a
  // partition an orchestrator failed over from): the round's connections opened before — the
  // leader lock's, the pool's — still reach it; a new one reaches the new primary.
  await standby.promote();
  proxy.forwardTo(standby.port);
  const newPool = new pg.Pool({ connectionString: standby.url, max: 1 });
  newPool.on('error', () => {});
  const after = await insertEvents(newPool, events(20, 'q'));
  await newPool.end();
  release();
  // The stream's connection is new: it reaches the new primary. Then the old primary goes down
  // for good, taking the round's old connections with it.
  const changedBetween = /the database changed between the slot's opening/;
  await waitFor(() => changedBetween.test(lines.join('')) || r2.state === 'streaming', {
    timeoutMs: 60_000,
    message: () => `the stream started; relay log:\n${lines.join('')}`,
  });
  primary.crash();

  await waitFor(
    () => {
      const got = new Set(inner.published.map((m) => m.event.id));
      return after.every((id) => got.has(id));
    },
    {
      timeoutMs: 90_000,
      message: () => `every event of the new primary published; relay log:\n${lines.join('')}`,
    },
  );
  const text = lines.join('');
  expect(text).toMatch(
    /the database changed between the slot's opening \(timeline 1 .*\) and the stream's start \(timeline 2 /,
  );
  expect(text).toMatch(/after a promotion the slot continued on the new primary: publishing from the table/);
  expect(text).toMatch(/database timeline changed: timeline 1 .* → timeline 2 /);
  expect((await r2.metrics.timelineChanges.get()).values[0]?.value).toBe(1);
  // Every row of the new primary settled: none left pending behind the slot.
  await waitFor(
    async () =>
      (
        await query<{ n: string }>(
          standby.url,
          "SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'pending'",
        )
      )[0]!.n === '0',
    { timeoutMs: 60_000, message: 'no row pending on the new primary' },
  );
}, 300_000);
