import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import { HOLDER_SQL, lockKeyText } from '../../src/supervisor/leader-lock.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  deliveryReport,
  insertEvents,
  migrateDb,
  orderViolations,
  type RelayProcess,
  slotOf,
  spawnRelayWithHttp,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * Hot standby with two real relay processes on one slot: exactly one streams (it holds the
 * leader lock), the other reports `standby`; kill -9 of the active one → the standby takes over
 * within a few seconds from the confirmed LSN, nothing is lost, per-key order holds, and the
 * sweeper never ran in both at once (a permanently failing event shows who retried it when).
 */
const AGGREGATES = 40;
const TAKEOVER_LIMIT_MS = 5_000;

const db = useTestDatabase();
let kafka: DedicatedKafka;
const relays: RelayProcess[] = [];
const inProcess: Relay[] = [];

/** Starts `run` (default --standby-poll-ms) with an ephemeral HTTP port; returns the process and a getter. */
async function startRelay() {
  const { relay, get } = await spawnRelayWithHttp(db, kafka, [
    // The sweeper retries the failing event every few hundred ms, forever.
    ...['--sweep-interval-ms', '100', '--failure-backoff-ms', '150', '--failure-backoff-max-ms', '300'],
    ...['--max-attempts', '0', '--status-interval-ms', '300'],
  ]);
  relays.push(relay);
  const readyz = async () => {
    const r = await get('/readyz');
    return { status: r.status, body: r.json() };
  };
  const metrics = async () => (await get('/metrics')).text;
  return { relay, readyz, metrics };
}

type Instance = Awaited<ReturnType<typeof startRelay>>;

/** JSON log lines of a relay process. */
function logLines(r: RelayProcess): Record<string, unknown>[] {
  return r
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The sweeper's retries of event `id` (attempt 1 is the stream's own failure), with their time. */
function sweeperRetries(r: RelayProcess, id: string) {
  const lines = logLines(r);
  const acquiredAt = lines.findIndex((l) => String(l.msg).startsWith('leader lock acquired'));
  return lines
    .map((l, i) => ({ l, i }))
    .filter(({ l }) => l.outcome === 'retry' && l.id === id && Number(l.attempts) >= 2)
    .map(({ l, i }) => ({
      at: Date.parse(String(l.time)),
      attempts: Number(l.attempts),
      afterLockAcquired: acquiredAt >= 0 && i > acquiredAt,
    }));
}

async function lockHolders() {
  return db.query<{ pid: number; application_name: string }>(
    `SELECT h.pid, a.application_name FROM (${HOLDER_SQL}) h JOIN pg_stat_activity a USING (pid)`,
    [lockKeyText(slotOf(db))],
  );
}

beforeAll(async () => {
  kafka = await startDedicatedKafka({ proxy: true });
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Account', 4);
  // A permanently failing event for the sweeper: outbox.event.Poison does not exist (auto-creation off).
});

afterAll(async () => {
  for (const r of relays) r.kill('SIGKILL');
  await Promise.all(inProcess.map((r) => r.stop()));
  await kafka?.stop();
});

describe('hot standby (two relay processes, one slot)', () => {
  it('one streams, the other is standby; after kill -9 the standby takes over within seconds and nothing is lost', {
    timeout: 180_000,
  }, async () => {
    const [a, b] = await Promise.all([startRelay(), startRelay()]);
    // Exactly one becomes active; the other settles in standby.
    let active!: Instance;
    let standby!: Instance;
    await waitFor(
      async () => {
        const [ra, rb] = await Promise.all([a.readyz(), b.readyz()]);
        if (ra.status === 200 && rb.body.state === 'standby') [active, standby] = [a, b];
        else if (rb.status === 200 && ra.body.state === 'standby') [active, standby] = [b, a];
        else return false;
        return true;
      },
      {
        timeoutMs: 30_000,
        message: async () =>
          `one active, one standby; readyz: ${JSON.stringify((await a.readyz()).body)} / ${JSON.stringify((await b.readyz()).body)}`,
      },
    );
    const standbyReady = await standby.readyz();
    expect(standbyReady.status).toBe(503);
    expect(standbyReady.body).toMatchObject({ state: 'standby', reason: 'standby', slot: slotOf(db) });
    expect(standbyReady.body.detail).toMatch(/led by another relay/);
    expect(await standby.metrics()).toContain('outbox_relay_state{state="standby"} 1');
    expect(await active.metrics()).toContain('outbox_relay_state{state="streaming"} 1');
    // The documented pg_locks query finds the active process's lock connection.
    const holders = await lockHolders();
    expect(holders).toHaveLength(1);
    expect(holders[0]!.application_name).toContain(`leader ${active.relay.child.pid}@`);

    // A failing event: the active relay's sweeper retries it every few hundred ms.
    const [poisonId] = await insertEvents(db.pool, [
      { aggregateType: 'Poison', aggregateId: 'p', eventType: 'E', payload: '{}' },
    ]);
    await waitFor(() => sweeperRetries(active.relay, poisonId!).length >= 2, {
      timeoutMs: 20_000,
      message: () => `the active relay's sweeper retries; logs:\n${active.relay.logs().slice(-2000)}`,
    });

    // Events keep coming, before, during and after the kill.
    const nextSeq = new Array<number>(AGGREGATES).fill(0);
    let producing = true;
    let produced = 0;
    const producer = (async () => {
      let i = 0;
      while (producing) {
        const rows = [];
        for (let k = 0; k < 5; k++) {
          const agg = i++ % AGGREGATES;
          rows.push({
            aggregateType: 'Account',
            aggregateId: `acct-${agg}`,
            eventType: 'Posted',
            payload: JSON.stringify({ seq: nextSeq[agg]!++ }),
          });
        }
        await insertEvents(db.pool, rows);
        produced += rows.length;
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    // A slow broker keeps events received but unacknowledged in the active relay when it dies:
    // the standby must resume from the confirmed position, before them.
    kafka.proxies[0]!.setLatency(30);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await standby.metrics()).toContain('outbox_relay_state{state="standby"} 1');

    const killedAt = Date.now();
    active.relay.kill('SIGKILL');
    expect(await active.relay.exited).toBe('SIGKILL');
    await waitFor(async () => (await standby.readyz()).status === 200, {
      timeoutMs: 30_000,
      intervalMs: 50,
      message: () => `standby took over; logs:\n${standby.relay.logs().slice(-2000)}`,
    });
    const takeoverMs = Date.now() - killedAt;
    kafka.proxies[0]!.setLatency(0);
    await new Promise((r) => setTimeout(r, 1500));
    producing = false;
    await producer;

    let delivered = 0;
    await waitFor(
      async () => (delivered = (await kafka.readAll('outbox.event.Account')).length) >= produced,
      {
        // Bounded by progress: the drain's length scales with the machine's load.
        timeoutMs: 60_000,
        progress: () => delivered,
        intervalMs: 250,
        message: () => `all ${produced} events delivered (have ${delivered})`,
      },
    );
    await waitFor(
      async () =>
        (
          await db.query<{ n: string }>(
            `SELECT count(*)::text AS n FROM outbox_with_status WHERE status <> 'published' AND aggregate_type = 'Account'`,
          )
        )[0]!.n === '0',
      { timeoutMs: 30_000, message: 'every Account row marked published' },
    );
    // The new active relay's sweeper carries on with the failing event.
    await waitFor(() => sweeperRetries(standby.relay, poisonId!).length >= 2, {
      timeoutMs: 20_000,
      message: () => `the new active relay's sweeper retries; logs:\n${standby.relay.logs().slice(-2000)}`,
    });
    const holdersAfter = await lockHolders();
    expect(holdersAfter).toHaveLength(1);
    expect(holdersAfter[0]!.application_name).toContain(`leader ${standby.relay.child.pid}@`);

    standby.relay.kill('SIGTERM');
    expect(await standby.relay.exited).toBe(0);

    // No loss, per-key order kept (duplicates from the replayed tail are allowed).
    const records = await kafka.readAll('outbox.event.Account');
    const { seen, unique, missing } = deliveryReport(records, nextSeq, 'acct-');
    console.log(
      `standby test: takeover ${takeoverMs} ms after kill -9, ${produced} events, ${seen.length} deliveries, ${seen.length - unique.size} duplicates`,
    );
    expect(missing.slice(0, 10), `${missing.length} events lost`).toEqual([]);
    expect(unique.size).toBe(produced);
    expect(orderViolations(seen).slice(0, 10)).toEqual([]);
    expect(takeoverMs).toBeLessThan(TAKEOVER_LIMIT_MS);

    // The sweeper ran in one process at a time: the killed one only before the kill, the
    // standby only after it took the lock (which it could only do after the kill), carrying on
    // from the row's attempts.
    const first = sweeperRetries(active.relay, poisonId!);
    const second = sweeperRetries(standby.relay, poisonId!);
    expect(first.every((r) => r.at <= killedAt && r.afterLockAcquired)).toBe(true);
    expect(second.every((r) => r.afterLockAcquired)).toBe(true);
    const acquired = logLines(standby.relay).find((l) => String(l.msg).startsWith('leader lock acquired'))!;
    expect(Date.parse(String(acquired.time))).toBeGreaterThanOrEqual(killedAt - 10);
    expect(Math.min(...second.map((r) => r.attempts))).toBeGreaterThanOrEqual(
      Math.max(...first.map((r) => r.attempts)),
    );
    // Each process took the lock once and streamed once.
    for (const r of [active.relay, standby.relay]) {
      expect(r.logs().match(/"msg":"leader lock acquired/g)).toHaveLength(1);
      expect(r.logs().match(/"msg":"streaming from the slot/g)).toHaveLength(1);
    }
  });

  it('the active relay stops streaming at once when its lock connection is lost, and one relay carries on', async () => {
    const start = async () => {
      const config = testConfig(db, ['--status-interval-ms', '300', '--standby-poll-ms', '200'], kafka);
      const relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
      inProcess.push(relay);
      return relay;
    };
    const first = await start();
    await waitFor(() => first.state === 'streaming', { timeoutMs: 20_000, message: 'first relay streaming' });
    const second = await start();
    await waitFor(() => second.state === 'standby', {
      timeoutMs: 20_000,
      message: 'second relay in standby',
    });

    // Never two active relays, sampled every few ms from here on.
    let bothActive = 0;
    let terminated = 0;
    const sampler = setInterval(() => {
      if (first.state === 'streaming' && second.state === 'streaming') bothActive++;
    }, 5);
    try {
      const [holder] = await lockHolders();
      terminated = holder!.pid;
      await db.query('SELECT pg_terminate_backend($1)', [terminated]);
      // Its session ends (it may well take the lock again at once: it polls first).
      const reconnects = async (r: Relay) =>
        (await r.metrics.replicationReconnects.get()).values[0]?.value ?? 0;
      await waitFor(async () => (await reconnects(first)) > 0 || second.state === 'streaming', {
        timeoutMs: 5_000,
        message: "the first relay's session ended",
      });
      await waitFor(() => [first.state, second.state].filter((s) => s === 'streaming').length === 1, {
        timeoutMs: 15_000,
        message: () => `one relay active again (${first.state}, ${second.state})`,
      });
      const ids = await insertEvents(db.pool, [
        {
          aggregateType: 'Account',
          aggregateId: 'after-loss',
          eventType: 'E',
          payload: JSON.stringify({ seq: 0 }),
        },
      ]);
      await waitFor(
        async () =>
          (
            await db.query<{ status: string }>('SELECT status FROM outbox_with_status WHERE id = $1', [
              ids[0],
            ])
          )[0]!.status === 'published',
        { timeoutMs: 15_000, message: 'published after the lock loss' },
      );
    } finally {
      clearInterval(sampler);
    }
    expect(bothActive).toBe(0);
    const after = await lockHolders();
    expect(after).toHaveLength(1);
    expect(after[0]!.pid).not.toBe(terminated);
  });

  it('the documented pg_locks query finds the lock holder for keys of either sign', async () => {
    const r = await db.query<{ slot: string; h: number }>(
      `SELECT s AS slot, hashtext('pg-outbox-relay:' || s) AS h FROM unnest($1::text[]) s`,
      [Array.from({ length: 20 }, (_, i) => `slot_${i}`)],
    );
    const slots = [r.find((x) => x.h < 0)!.slot, r.find((x) => x.h > 0)!.slot];
    const client = await db.pool.connect();
    try {
      const me = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      for (const slot of slots) {
        expect(await db.query(HOLDER_SQL, [lockKeyText(slot)])).toEqual([]);
        await client.query('SELECT pg_advisory_lock(hashtext($1))', [lockKeyText(slot)]);
        expect(await db.query(HOLDER_SQL, [lockKeyText(slot)])).toEqual([{ pid: me }]);
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock_all()');
      client.release();
    }
  });
});
