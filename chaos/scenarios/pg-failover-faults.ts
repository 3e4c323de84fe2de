import type { Env } from '../lib/env.ts';
import { type Outcome, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';
import { joinOnPrimary, type Pair, sql, startPair, stopPair } from './pg-failover.ts';

/**
 * Issue 36 (c), (d), (e): the failover faults other than a lagging standby (pg-failover.ts), on
 * the same clusters (startPair: real PostgreSQL builds, a physical standby, the relay and the
 * writer on an address that follows the primary). Read back by an independent consumer and
 * joined against the primary's outbox as it is at the end (the NEW primary's after a promotion);
 * phantoms counted.
 */

const EVENTS = 3000;
const RATE = 400;

/** The standby's copy of the relay's slot: 'none', 'temporary' or 'persistent' (and synced or not). */
async function copyOf(standbyUrl: string): Promise<string> {
  const r = await sql<{ synced: boolean; temporary: boolean }>(
    standbyUrl,
    "SELECT synced, temporary FROM pg_replication_slots WHERE slot_name = 'chaos'",
  );
  const c = r[0];
  return c ? `${c.temporary ? 'temporary' : 'persistent'}${c.synced ? ', synced' : ''}` : 'none';
}

async function waitUntil(what: string, ms: number, ok: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await ok())) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms / 1000} s`);
    await sleep(200);
  }
  return Date.now() - t0;
}

/**
 * (c) PostgreSQL 17: the primary fails while the standby's synced copy of the failover slot is
 * still temporary — the relay never advanced the slot (its broker unreachable from the start, so
 * nothing is published and nothing confirmed) while the writer writes. A temporary synced slot is
 * dropped at promotion (trap 1): the relay finds its slot missing on the new primary and publishes
 * the gap from the table.
 */
const temporaryCopy: Scenario = {
  name: 'pg-failover-temporary-17',
  summary:
    "PostgreSQL 17: primary killed -9 while the standby's synced copy of the failover slot is still temporary (broker unreachable: the relay never advanced the slot), standby promoted: the slot is missing there, recovered from the table: 0 lost",
  budgetMs: 300_000,
  run: async (env) => {
    const pair = await startPair(env, '17', true, { proxy: true });
    try {
      return await runTemporaryCopy(env, pair);
    } finally {
      await stopPair(pair);
    }
  },
};

async function runTemporaryCopy(env: Env, { primary, standby, proxy }: Pair): Promise<Outcome> {
  // The broker unreachable (its proxy refuses connections) before the relay starts: the relay
  // opens the slot (failover turned on) and waits for the sink; nothing is published, the slot
  // never advances. (A broker frozen by SIGSTOP instead once left the sink's start waiting for
  // ever after the thaw: reported separately, not this scenario's subject.)
  const broker = env.proxies[0]!;
  broker.cut();
  try {
    const relay = env.spawnRelay(['--slot-check-interval-ms', '500']);
    await waitUntil('the slot a failover slot', 60_000, async () => {
      const r = await sql<{ f: boolean }>(
        primary.url,
        "SELECT failover AS f FROM pg_replication_slots WHERE slot_name = 'chaos'",
      );
      return r[0]?.f === true;
    });
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(EVENTS, RATE, 20, rng(36));
    // The standby's copy appears (the sync worker's first round) and stays temporary.
    await waitUntil(
      "the standby's copy of the slot",
      60_000,
      async () => (await copyOf(standby.url)) !== 'none',
    );
    await sleep(2000);
    const copy = await copyOf(standby.url);
    const killedAt = Date.now();
    primary.crash();
    proxy.lose();
    await standby.promote();
    proxy.forwardTo(standby.port);
    env.log(`primary killed with the standby's copy ${copy}; promoted in ${Date.now() - killedAt} ms`);
    broker.restore();
    await writing;
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    const logs = relay.logs();
    if (!copy.startsWith('temporary'))
      checks.push(`the standby's copy was ${copy} at the kill, not temporary`);
    const recovered = /slot recovery done \(dropped\)/.test(logs);
    if (!recovered) checks.push('no table recovery of the missing slot logged');
    const t = await joinOnPrimary(env, out, checks, { phantomsAllowed: true });
    return {
      ...t,
      recoveryMs: env.progressAfter(killedAt),
      notes: [
        `the standby's copy at the kill: ${copy}; slot recovered from the table: ${recovered}`,
        `phantoms: ${t.phantoms} (nothing was published before the kill); the writer committed ${w.written.length} on either primary, the new primary has ${t.written.length}`,
      ],
      duplicatesExpected:
        "the missing slot's table recovery publishes every row the new primary had not recorded",
    };
  } finally {
    broker.restore();
  }
}

/**
 * (d) PostgreSQL 17: the standby named in synchronized_standby_slots goes away (it drops its
 * connection: primary_conninfo emptied) while the writer writes. Decoding waits for it (trap 2):
 * the relay must report the stall (FAILOVER_STALLED, outbox_slot_failover_stalled) within a
 * minute, stay up, and publish everything by itself once the standby is back.
 */
const standbyDown: Scenario = {
  name: 'pg-failover-standby-down-17',
  summary:
    'PostgreSQL 17: the standby of synchronized_standby_slots disconnects for 20 s while ~3,000 events are written: the stall reported within a minute, everything published once it is back: 0 lost, 0 phantom',
  budgetMs: 300_000,
  run: async (env) => {
    const pair = await startPair(env, '17', true);
    try {
      return await runStandbyDown(env, pair);
    } finally {
      await stopPair(pair);
    }
  },
};

async function runStandbyDown(env: Env, { primary, standby }: Pair): Promise<Outcome> {
  const relay = env.spawnRelay(['--slot-check-interval-ms', '500']);
  await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
  const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
  const writing = w.run(EVENTS, RATE, 20, rng(37));
  await sleep(2000);
  await sql(standby.url, "ALTER SYSTEM SET primary_conninfo = ''");
  await sql(standby.url, 'SELECT pg_reload_conf()');
  const downAt = Date.now();
  await waitUntil('the standby gone', 30_000, async () => {
    const r = await sql<{ a: boolean }>(
      primary.url,
      "SELECT active AS a FROM pg_replication_slots WHERE slot_name = 'standby_slot'",
    );
    return r[0]?.a === false;
  });
  const checks: string[] = [];
  let reportedMs: number | null = null;
  try {
    await relay.waitForLog(/"code":"FAILOVER_STALLED"/, 60_000);
    reportedMs = Date.now() - downAt;
  } catch {
    checks.push('the stall was not reported within a minute');
  }
  await sleep(Math.max(0, 20_000 - (Date.now() - downAt)));
  await sql(standby.url, 'ALTER SYSTEM RESET primary_conninfo');
  await sql(standby.url, 'SELECT pg_reload_conf()');
  const backAt = Date.now();
  await writing;
  let resumedMs: number | null = null;
  try {
    await relay.waitForLog(/decoding is no longer held by synchronized_standby_slots/, 60_000);
    resumedMs = Date.now() - backAt;
  } catch {
    checks.push('the end of the stall was not logged within a minute of the standby returning');
  }
  const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
  const t = await joinOnPrimary(env, out, checks, { phantomsAllowed: false });
  if (relay.child.exitCode !== null) checks.push(`the relay exited (${relay.child.exitCode})`);
  return {
    ...t,
    recoveryMs: env.progressAfter(backAt),
    notes: [
      `stall reported ${reportedMs === null ? 'never' : `${reportedMs} ms`} after the standby left; the end of the stall logged ${resumedMs === null ? 'never' : `${resumedMs} ms`} after it was back`,
    ],
  };
}

/**
 * (e) PostgreSQL 18: the relay is killed -9 mid-stream and stays down while the writer writes;
 * idle_replication_slot_timeout (1 s) invalidates the idle slot at the next checkpoint
 * (invalidation_reason = idle_timeout). The restarted relay names the reason in its log and
 * publishes the gap from the table.
 */
const idleTimeout: Scenario = {
  name: 'pg-failover-idle-timeout-18',
  summary:
    'PostgreSQL 18: relay killed -9 mid-stream, its slot invalidated by idle_replication_slot_timeout while it is down; the restart names idle_timeout and recovers from the table: 0 lost',
  budgetMs: 300_000,
  run: async (env) => {
    const pair = await startPair(env, '18', false);
    try {
      return await runIdleTimeout(env, pair);
    } finally {
      await stopPair(pair);
    }
  },
};

async function runIdleTimeout(env: Env, { primary }: Pair): Promise<Outcome> {
  const first = env.spawnRelay(['--slot-check-interval-ms', '500']);
  await first.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
  const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
  const writing = w.run(EVENTS, RATE, 20, rng(38));
  await sleep(2000);
  first.kill('SIGKILL');
  await first.exited;
  const downAt = Date.now();
  await sql(primary.url, 'ALTER SYSTEM SET idle_replication_slot_timeout = 1');
  await sql(primary.url, 'SELECT pg_reload_conf()');
  await waitUntil('the slot invalidated by idle_replication_slot_timeout', 60_000, async () => {
    await sql(primary.url, 'CHECKPOINT');
    const r = await sql<{ reason: string | null }>(
      primary.url,
      "SELECT invalidation_reason AS reason FROM pg_replication_slots WHERE slot_name = 'chaos'",
    );
    return r[0]?.reason === 'idle_timeout';
  });
  // Off again: the new slot must not be invalidated between its creation and the stream.
  await sql(primary.url, 'ALTER SYSTEM RESET idle_replication_slot_timeout');
  await sql(primary.url, 'SELECT pg_reload_conf()');
  env.log(`slot invalidated (idle_timeout) ${Date.now() - downAt} ms after the relay was killed`);
  const second = env.spawnRelay(['--slot-check-interval-ms', '500']);
  await second.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
  await writing;
  const checks: string[] = [];
  const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
  const logs = second.logs();
  const named = /slot recovery done \(invalidated: idle_timeout\)/.test(logs);
  if (!named) checks.push('the recovery did not name idle_timeout in its log');
  const t = await joinOnPrimary(env, out, checks, { phantomsAllowed: false });
  return {
    ...t,
    recoveryMs: env.progressAfter(downAt),
    notes: [`the recovery named idle_timeout: ${named}`],
    duplicatesExpected: "the killed relay's unrecorded batches and the table recovery publish again",
  };
}

/** In `npm run chaos -- --group pg-failover`. */
export const PG_FAILOVER_FAULT_SCENARIOS: Scenario[] = [temporaryCopy, standbyDown, idleTimeout];
