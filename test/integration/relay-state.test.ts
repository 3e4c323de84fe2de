import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.ts';
import type { StatusReport } from '../../src/ops/status-report.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  migrateDb,
  type RelayProcess,
  slotOf,
  spawnCli,
  spawnRelay,
} from '../support/relay.ts';

/**
 * Issue 13 point 6: `status` shows the live relay — its state, last progress and last error —
 * from the relay-state row the active relay writes (sql/000002_relay_state.sql), so it works
 * from any machine with database access. A real relay process, a real broker behind a proxy
 * that the test cuts, and `status` as a separate process that only talks to PostgreSQL.
 */
const db = useTestDatabase({ name: 'relay_state' });
let kafka: DedicatedKafka;
const relays: RelayProcess[] = [];

async function status(): Promise<{ code: number | string; report: StatusReport }> {
  const p = spawnCli(['status', '--json', '--database-url', db.url, '--slot', slotOf(db)]);
  const code = await p.exited;
  try {
    return { code, report: JSON.parse(p.stdout()) as StatusReport };
  } catch {
    throw new Error(`status printed no JSON (exit ${code}):\n${p.stdout()}\n${p.logs()}`);
  }
}

const row = async () =>
  (
    await db.query<{ state: string; heartbeat_at: string; holder: string }>(
      'SELECT state, heartbeat_at::text, holder FROM outbox_relay_state WHERE slot_name = $1',
      [slotOf(db)],
    )
  )[0];

/** Resolves once the row's heartbeat_at took `n` new values. */
async function heartbeats(n: number): Promise<void> {
  const seen = new Set([(await row())?.heartbeat_at]);
  await waitFor(
    async () => {
      seen.add((await row())?.heartbeat_at);
      return seen.size > n;
    },
    { timeoutMs: 30_000, intervalMs: 200, message: () => `${n} heartbeats (saw ${seen.size - 1})` },
  );
}

const order = (id: string) => ({
  aggregateType: 'Order',
  aggregateId: id,
  eventType: 'OrderPlaced',
  payload: '{}',
});

beforeAll(async () => {
  kafka = await startDedicatedKafka({ proxy: true });
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Order', 1);
});

afterAll(async () => {
  for (const r of relays) r.kill('SIGKILL');
  await kafka?.stop();
});

describe('status shows the live relay from its relay-state row', () => {
  it('active, with its last progress; healthy', async () => {
    const relay = spawnRelay(db, kafka);
    relays.push(relay);
    await relay.waitForLog(/streaming from the slot/);
    await insertEvents(db.pool, [order('o-1')]);
    await waitFor(async () => (await kafka.readAll('outbox.event.Order')).length === 1, {
      timeoutMs: 30_000,
      message: 'o-1 published',
    });
    await waitFor(async () => (await status()).report.relay.lastProgressAgeSeconds !== null, {
      timeoutMs: 15_000,
      message: 'progress recorded',
    });
    const { code, report } = await status();
    expect(report.relay).toMatchObject({ recorded: true, state: 'active', stale: false, error: null });
    expect(report.relay.holder).toMatch(new RegExp(`^${relay.child.pid}@`));
    expect(report.relay.heartbeatAgeSeconds).toBeLessThan(10);
    expect(report.healthy).toBe(true);
    expect(code).toBe(EXIT.OK);
  });

  it('during a broker outage: broker-outage with the last error, unhealthy; active again after', async () => {
    kafka.proxies[0]!.cut();
    await insertEvents(db.pool, [order('o-2')]);
    await waitFor(async () => (await status()).report.relay.state === 'broker-outage', {
      timeoutMs: 60_000,
      message: async () => `broker-outage in status; row: ${JSON.stringify(await row())}`,
    });
    const { code, report } = await status();
    expect(report.relay.lastError).toMatch(/^broker: /);
    expect(report.relay.lastErrorAgeSeconds).not.toBeNull();
    expect(report.healthy).toBe(false);
    expect(report.problems.join('\n')).toMatch(/broker outage for .*; last error: broker: /);
    expect(code).toBe(EXIT.UNAVAILABLE);

    kafka.proxies[0]!.restore();
    await waitFor(async () => (await kafka.readAll('outbox.event.Order')).length >= 2, {
      timeoutMs: 60_000,
      message: 'o-2 published after the outage',
    });
    await waitFor(async () => (await status()).report.relay.state === 'active', {
      timeoutMs: 20_000,
      message: 'active again',
    });
    // The last error stays visible after recovery (when it happened is part of it).
    expect((await status()).report.relay.lastError).toMatch(/^broker: /);
  });

  it('a standby relay on the same slot never overwrites the active relay’s row', async () => {
    const standby = spawnRelay(db, kafka);
    relays.push(standby);
    await standby.waitForLog(/standby: another process is active on the slot/);
    // Two heartbeats of the active relay seen: a full heartbeat interval (5 s) passed while both
    // ran, however slow the machine (a fixed 6 s on a loaded one may hold no heartbeat at all).
    await heartbeats(2);
    expect((await row())?.holder).toMatch(new RegExp(`^${relays[0]!.child.pid}@`));
    expect((await row())?.state).toBe('active');
    standby.kill('SIGTERM');
    expect(await standby.exited).toBe(0);
  });

  it('a killed relay: the heartbeat stops, and a stale heartbeat means "not running"', async () => {
    const relay = relays[0]!;
    relay.kill('SIGKILL');
    await relay.exited;
    const last = (await row())!.heartbeat_at;
    await new Promise((r) => setTimeout(r, 6000)); // longer than a heartbeat interval (5 s)
    expect((await row())!.heartbeat_at).toBe(last);
    expect((await row())!.state).toBe('active'); // the row cannot know: its age tells
    // Let the clock pass the staleness limit (30 s) without waiting for it.
    await db.query(`UPDATE outbox_relay_state SET heartbeat_at = heartbeat_at - interval '40 seconds'`);
    const { code, report } = await status();
    expect(report.relay.stale).toBe(true);
    expect(report.healthy).toBe(false);
    expect(report.problems.join('\n')).toMatch(
      /no relay is running for slot .*: its heartbeat is \d+s old \(last recorded state: active\)/,
    );
    expect(code).toBe(EXIT.UNAVAILABLE);
  });

  it('a relay stopped gracefully records stopped', async () => {
    const relay = spawnRelay(db, kafka);
    relays.push(relay);
    await relay.waitForLog(/streaming from the slot/, 30_000);
    await waitFor(async () => (await row())?.state === 'active', { message: 'active row' });
    relay.kill('SIGTERM');
    expect(await relay.exited).toBe(0);
    const { report } = await status();
    expect(report.relay.state).toBe('stopped');
    expect(report.healthy).toBe(false);
    expect(report.problems.join('\n')).toMatch(/the relay is stopped/);
  });
});
