import pg from 'pg';
import {
  startStandby,
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../src/dev/throwaway-postgres.ts';
import { PgProxy } from '../../test/support/pg-proxy.ts';
import { queryOnce } from '../../test/support/query-once.ts';
import { spawnCli } from '../../test/support/relay.ts';
import type { Env } from '../lib/env.ts';
import { type Outcome, type Scenario, sleep } from '../lib/scenario.ts';
import type { KeySeq } from '../lib/tally.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * A primary failover with an asynchronous standby seconds behind (issue 35, issue 36 (f)): real
 * PostgreSQL builds of one major (src/dev/postgres-builds.ts), a standby copied from the primary,
 * the relay and the writer on an address that follows the primary (test/support/pg-proxy.ts).
 * At ~400 events/s the primary's walsender for the standby is frozen for LAG_MS (a standby in
 * another zone falling behind), then the primary is killed -9, the standby promoted and the
 * address moved. The writer retries what it could not confirm against the new primary.
 *
 * Lost is counted against the NEW primary's outbox (what the database has after the failover);
 * phantoms — events read back that the new primary does not have, from transactions the standby
 * never received — are counted and reported (inherent to asynchronous replication unless
 * PostgreSQL 17+ synchronized_standby_slots holds decoding back).
 */
const LAG_MS = 2000;

function failover(version: string): Scenario {
  return {
    name: `pg-failover-lag-${version}`,
    summary: `PostgreSQL ${version}: primary killed -9 with its async standby ${LAG_MS / 1000} s behind, standby promoted, address moved (~6,000 events at 400/s); lost counted against the new primary, phantoms reported`,
    budgetMs: 300_000,
    run: (env) => runFailover(env, version, false),
  };
}

/**
 * PostgreSQL 17+: the same fault with a failover slot synced to the standby and
 * synchronized_standby_slots naming the standby's physical slot on the primary: logical decoding
 * waits for the standby, so nothing the standby lacks is published (0 phantoms), and the new
 * primary has the relay's slot (no table recovery).
 */
function syncedFailover(version: string): Scenario {
  return {
    name: `pg-failover-sync-${version}`,
    summary: `PostgreSQL ${version}: as pg-failover-lag, with a synced failover slot and synchronized_standby_slots: 0 lost and 0 phantoms, the slot continues on the new primary`,
    budgetMs: 300_000,
    run: (env) => runFailover(env, version, true),
  };
}

/** A primary and its physical standby of one major, and the address the relay and writer use. */
export interface Pair {
  primary: ThrowawayPostgres;
  standby: ThrowawayPostgres;
  proxy: PgProxy;
}

/**
 * The clusters, the outbox (migrate, slot `chaos`) and Kafka with the Chaos topic. `synced`
 * (PostgreSQL 17+): the standby streams from a physical slot and syncs failover slots
 * (sync_replication_slots), and the primary's synchronized_standby_slots names that slot.
 * `kafka.proxy`: the broker behind a proxy (env.proxies[0]) a scenario can cut.
 */
export async function startPair(
  env: Env,
  version: string,
  synced: boolean,
  kafka: { proxy?: boolean } = {},
): Promise<Pair> {
  const primary = await startThrowawayPostgres({ version, settings: { max_connections: 100 } });
  let standby: ThrowawayPostgres | null = null;
  let proxy: PgProxy | null = null;
  try {
    if (synced) await sql(primary.url, "SELECT pg_create_physical_replication_slot('standby_slot', true)");
    standby = await startStandby(
      primary,
      synced
        ? {
            settings: {
              primary_slot_name: 'standby_slot',
              hot_standby_feedback: 'on',
              sync_replication_slots: 'on',
            },
          }
        : {},
    );
    proxy = await PgProxy.start(primary.port);
    const m = spawnCli(['migrate', '--database-url', primary.url, '--slot', 'chaos']);
    if ((await m.exited) !== 0) throw new Error(`migrate failed: ${m.logs().slice(-1000)}`);
    if (synced) {
      // Decoding held back until the standby's physical slot confirmed the WAL; the relay turns
      // failover on for its slot by itself (--slot-failover, the default on 17+).
      await sql(primary.url, "ALTER SYSTEM SET synchronized_standby_slots = 'standby_slot'");
      await sql(primary.url, 'SELECT pg_reload_conf()');
    }
    env.pg = primary;
    env.url = proxy.url();
    env.db = new pg.Pool({ connectionString: env.url, max: 4 });
    env.db.on('error', () => {});
    env.statusTable = 'outbox_with_status';
    env.log(
      `postgres ${version}: primary :${primary.port}, standby :${standby.port}, address :${proxy.port}`,
    );
    await env.startKafka(kafka);
    await env.createTopic(TOPIC_OF('Chaos'), 3);
    return { primary, standby, proxy };
  } catch (e) {
    await stopPair({ primary, standby, proxy });
    throw e;
  }
}

export async function stopPair(p: {
  primary: ThrowawayPostgres;
  standby: ThrowawayPostgres | null;
  proxy: PgProxy | null;
}): Promise<void> {
  await p.proxy?.stop().catch(() => {});
  await p.standby?.stop().catch(() => {});
  await p.primary.stop().catch(() => {});
}

/** One statement on its own connection (the server may be the one a fault is aimed at). */
export const sql = queryOnce;

async function runFailover(env: Env, version: string, synced: boolean) {
  const pair = await startPair(env, version, synced);
  const { primary, standby, proxy } = pair;
  try {
    const relay = env.spawnRelay(['--slot-check-interval-ms', '500']);
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(6000, 400, 20, rng(35));
    await sleep(4000);
    if (synced) {
      // Ready for a failover only once the standby's copy is synced and no longer temporary
      // (a temporary synced slot is dropped at promotion: design.md §9 trap 1).
      const s = new pg.Client(standby.url);
      s.on('error', () => {});
      await s.connect();
      const ready = async () =>
        (
          await s.query<{ ok: boolean }>(
            "SELECT coalesce(bool_and(synced AND NOT temporary), false) AS ok FROM pg_replication_slots WHERE slot_name = 'chaos'",
          )
        ).rows[0]!.ok;
      const t0 = Date.now();
      while (!(await ready())) {
        if (Date.now() - t0 > 60_000)
          throw new Error('the standby never had a synced, non-temporary copy of the slot');
        await sleep(200);
      }
      await s.end();
      env.log(`the standby's copy of the slot is synced and not temporary (${Date.now() - t0} ms)`);
    }
    const direct = new pg.Client(primary.url);
    direct.on('error', () => {});
    await direct.connect();
    const ws = await direct.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_replication WHERE application_name = 'standby'",
    );
    process.kill(ws.rows[0]!.pid, 'SIGSTOP');
    await sleep(LAG_MS);
    const lag = await direct.query<{ bytes: string }>(
      "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text AS bytes FROM pg_stat_replication WHERE application_name = 'standby'",
    );
    await direct.end();
    const killedAt = Date.now();
    primary.crash();
    proxy.lose();
    await standby.promote();
    proxy.forwardTo(standby.port);
    env.log(
      `primary killed with the standby ${lag.rows[0]?.bytes} bytes behind; standby promoted in ${Date.now() - killedAt} ms`,
    );
    await writing;
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);

    const timelineChanges = (relay.logs().match(/database timeline changed/g) ?? []).length;
    const recovered = /slot recovery done/.test(relay.logs());
    if (synced && recovered)
      checks.push('the synced failover slot was not used: the slot was recovered from the table');
    const t = await joinOnPrimary(env, out, checks, { phantomsAllowed: !synced });
    return {
      ...t,
      recoveryMs: env.progressAfter(killedAt),
      notes: [
        `phantoms: ${t.phantoms} events read back that the new primary does not have (the writer committed ${w.written.length} on either primary; lag at the kill ${lag.rows[0]?.bytes} bytes)`,
        `timeline changes logged: ${timelineChanges}; slot recovered from the table: ${recovered}`,
      ],
      duplicatesExpected:
        "the lost slot's table recovery publishes again every event the new primary had not recorded (docs/delivery.md: exactly-once holds within one timeline)",
    };
  } finally {
    await stopPair(pair);
  }
}

/**
 * The read-back joined against the database's outbox as it is now (after a failover: the NEW
 * primary's). Phantoms — events read back that it does not have — are counted (a check when
 * `phantomsAllowed` is false); the tally's seqs are each key's rows renumbered by rank (phantom
 * seqs never existed there), the read-back alike, order kept.
 */
export async function joinOnPrimary(
  env: Env,
  out: Pick<Outcome, 'written' | 'read'>,
  checks: string[],
  o: { phantomsAllowed: boolean },
): Promise<Pick<Outcome, 'written' | 'read' | 'checks'> & { phantoms: number }> {
  const rows = await env.db.query<KeySeq>(
    "SELECT aggregate_id AS key, (convert_from(payload, 'UTF8')::jsonb->>'seq')::int AS seq FROM outbox",
  );
  const have = new Set(rows.rows.map((r) => `${r.key}#${r.seq}`));
  const phantoms = new Set(out.read.map((r) => `${r.key}#${r.seq}`).filter((k) => !have.has(k))).size;
  if (!o.phantomsAllowed && phantoms > 0) checks.push(`${phantoms} phantoms`);
  const rank = new Map<string, number>();
  const byKey = new Map<string, number[]>();
  for (const r of rows.rows) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r.seq]);
  for (const [key, seqs] of byKey) {
    seqs.sort((a, b) => a - b);
    for (let i = 0; i < seqs.length; i++) rank.set(`${key}#${seqs[i]}`, i);
  }
  const renumber = (r: KeySeq) => ({ key: r.key, seq: rank.get(`${r.key}#${r.seq}`)! });
  return {
    written: rows.rows.map(renumber),
    read: out.read.filter((r) => have.has(`${r.key}#${r.seq}`)).map(renumber),
    checks,
    phantoms,
  };
}

/** `npm run chaos -- --group pg-failover` (issue 36 (f) asks 14 – 18). */
export const PG_FAILOVER_SCENARIOS: Scenario[] = [
  ...['14', '16', '17', '18'].map(failover),
  ...['17', '18'].map(syncedFailover),
];
