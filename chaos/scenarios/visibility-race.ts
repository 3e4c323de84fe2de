import pg from 'pg';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import type { KeySeq } from '../lib/tally.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * WAL order is not visibility order. synchronous_standby_names names a standby that does not
 * exist, so a session with synchronous_commit = on is held after its commit record is written:
 * the walsender streams the transaction, its rows stay invisible until the hold is released
 * (synchronous_standby_names reset + pg_reload_conf()). The relay meanwhile publishes, refuses
 * (topic Missing does not exist) and parks (strict ordering) those events. Three rounds of six
 * held transactions while an unheld writer streams. Once released: nothing lost, every refused
 * event recorded failed, every follower parked, no published row left pending.
 */
const ROUNDS = 3;
const HELD = 6;

export const visibilityRace: Scenario = {
  name: 'visibility-race',
  summary: `${ROUNDS}×${HELD} commits held by a ghost synchronous standby (good, refused and parked events) while 2,000 others stream`,
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres({ synchronous_commit: 'local', synchronous_standby_names: 'ghost_standby' });
    await env.startKafka();
    const ok = TOPIC_OF('Ok');
    await env.createTopic(ok, 3);
    env.startSampling();
    const relay = env.spawnRelay(['--ordering', 'strict', '--failure-backoff-ms', '600000']);
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Ok', keys: keys('a', 20) });
    const writing = w.run(2000, 100, 8, rng(8));
    const heldWritten: KeySeq[] = [];
    const refusedKeys: string[] = [];
    let exercised = 0;
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) await setGhost(env.db, 'ghost_standby');
      await sleep(2000);
      const warnedBefore = invisibleWarnings(relay.logs());
      const commits: Promise<unknown>[] = [];
      const clients: pg.Client[] = [];
      for (let i = 0; i < HELD; i++) {
        const c = new pg.Client({ connectionString: env.url });
        c.on('error', () => {});
        await c.connect();
        clients.push(c);
        await c.query('SET synchronous_commit = on');
        await c.query('BEGIN');
        const rows: string[] = [];
        for (let k = 0; k < 3; k++) {
          const key = `h${round}-${i}-${k}`;
          for (let seq = 0; seq < 3; seq++) {
            rows.push(`('Ok', '${key}', 'E', convert_to('{"key":"${key}","seq":${seq}}', 'UTF8'))`);
            heldWritten.push({ key, seq });
          }
        }
        const m = `m${round}-${i}`;
        refusedKeys.push(m);
        rows.push(
          `('Missing', '${m}', 'E', convert_to('{"seq":0}', 'UTF8'))`,
          `('Missing', '${m}', 'E', convert_to('{"seq":1}', 'UTF8'))`,
        );
        await c.query(
          `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ${rows.join(', ')}`,
        );
        const commit = c.query('COMMIT');
        commit.catch(() => {});
        commits.push(commit);
      }
      // Hold until the relay has met the held rows (its outcome statements found them invisible:
      // it logs that once per streak), so the race is exercised, not just the hold; at most 20 s.
      const met = await until(() => invisibleWarnings(relay.logs()) > warnedBefore, 20_000);
      if (met) exercised++;
      await sleep(1000);
      const visible = await env.db.query(`SELECT count(*)::int AS n FROM outbox WHERE aggregate_id LIKE $1`, [
        `h${round}-%`,
      ]);
      env.log(
        `round ${round + 1}: ${HELD} commits held; rows visible to others: ${visible.rows[0]!.n}; relay met invisible rows: ${met}`,
      );
      await setGhost(env.db, '');
      await Promise.all(commits);
      for (const c of clients) await c.end().catch(() => {});
    }
    await writing;
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [ok], checks);
    const refused = (
      await env.db.query<{ aggregate_id: string; status: string; last_error: string | null; seq: number }>(
        `SELECT aggregate_id, status, last_error, (convert_from(payload, 'UTF8')::jsonb->>'seq')::int AS seq
           FROM ${env.statusTable} WHERE aggregate_type = 'Missing' ORDER BY id`,
      )
    ).rows;
    const heads = refused.filter((r) => r.seq === 0);
    const followers = refused.filter((r) => r.seq === 1);
    const badHeads = heads.filter((r) => r.status !== 'failed' || !r.last_error);
    const badFollowers = followers.filter((r) => r.status !== 'parked');
    if (heads.length !== refusedKeys.length)
      checks.push(`${heads.length} refused heads in the table, ${refusedKeys.length} written`);
    if (badHeads.length > 0)
      checks.push(
        `${badHeads.length} of ${heads.length} refused events not recorded failed: ${badHeads
          .slice(0, 3)
          .map((r) => `${r.aggregate_id}=${r.status}`)
          .join(', ')}`,
      );
    if (badFollowers.length > 0)
      checks.push(
        `${badFollowers.length} of ${followers.length} followers not parked: ${badFollowers
          .slice(0, 3)
          .map((r) => `${r.aggregate_id}=${r.status}`)
          .join(', ')}`,
      );
    const okCounts = await env.statusCounts(`aggregate_type = 'Ok'`);
    if (Object.keys(okCounts).some((s) => s !== 'published'))
      checks.push(`Ok rows: ${JSON.stringify(okCounts)} (all must be published)`);
    if (!alive(relay)) checks.push('the relay exited');
    if (exercised === 0)
      checks.push('the race was never exercised: the relay met no invisible row in any round');
    const waits = relay
      .logs()
      .split('\n')
      .filter((l) => l.includes('outbox rows are visible again')).length;
    await w.close();
    return {
      written: [...out.written, ...heldWritten],
      read: out.read,
      checks,
      notes: [
        `${ROUNDS * HELD} held transactions (${heldWritten.length} good, ${heads.length} refused, ${followers.length} parked events); the relay met invisible rows in ${exercised} of ${ROUNDS} rounds and logged "rows are visible again" ${waits}×`,
      ],
    };
  },
};

const invisibleWarnings = (logs: string) => logs.split('are not visible yet').length - 1;

async function until(ok: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}

async function setGhost(db: pg.Pool, names: string): Promise<void> {
  await db.query(`ALTER SYSTEM SET synchronous_standby_names = '${names}'`);
  await db.query('SELECT pg_reload_conf()');
}
