import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * The outbox idle while another table churns (updates, ~1 MB of WAL a second): the relay must
 * keep confirming the server's keepalive positions, so the slot's retained WAL stays bounded
 * instead of growing with the churn. restart_lsn itself only moves at the running-transactions
 * records the server logs every 15 s, so "bounded" here is: the largest retained WAL stays below
 * half of the WAL the churn wrote, and the confirmed position is within 16 MiB of the end when
 * the churn stops. A few events before and after check the stream still flows.
 */
const CHURN_MS = 45_000;

export const idleWalChurn: Scenario = {
  name: 'idle-wal-churn',
  summary: 'outbox idle for 45 s while another table churns: retained WAL stays bounded',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka();
    await env.createTopic(TOPIC_OF('Chaos'), 1);
    await env.db.query(
      `CREATE TABLE churn (id int PRIMARY KEY, v text); INSERT INTO churn SELECT g, md5(g::text) FROM generate_series(1, 2000) g`,
    );
    env.startSampling();
    const relay = env.spawnRelay();
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 5) });
    await w.run(20, 100);
    const lsn = async () =>
      (await env.db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
    const from = await lsn();
    const until = Date.now() + CHURN_MS;
    let statements = 0;
    while (Date.now() < until) {
      await env.db.query(`UPDATE churn SET v = md5(random()::text) WHERE id % 4 = $1`, [statements % 4]);
      statements++;
      await sleep(20);
    }
    const to = await lsn();
    const churned = Number(
      (
        await env.db.query<{ d: string }>(
          'SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint::text AS d',
          [to, from],
        )
      ).rows[0]!.d,
    );
    await sleep(3000);
    const lag = Number(
      (
        await env.db.query<{ d: string }>(
          `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint::text AS d FROM pg_replication_slots WHERE slot_name = 'chaos'`,
        )
      ).rows[0]!.d,
    );
    await w.run(40, 100);
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    const mib = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;
    if (env.maxRetainedWal > churned / 2)
      checks.push(
        `max retained WAL ${mib(env.maxRetainedWal)} is more than half of the ${mib(churned)} the churn wrote`,
      );
    if (lag > 16 * 1048576)
      checks.push(`confirmed position ${mib(lag)} behind the end of the WAL after the churn`);
    if (!alive(relay)) checks.push('the relay exited');
    await w.close();
    return {
      ...out,
      checks,
      notes: [
        `churn wrote ${mib(churned)} of WAL in ${CHURN_MS / 1000} s (${statements} UPDATEs); max retained ${mib(env.maxRetainedWal)} over ${env.walSamples} samples; confirmed lag 3 s after the churn ${mib(lag)}`,
      ],
    };
  },
};
