import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, TOPIC_OF } from './common.ts';

/** pg_ctl restart -m fast twice mid-stream, then pg_terminate_backend of the walsender. */
export const pgRestart: Scenario = {
  name: 'pg-restart',
  summary:
    'PostgreSQL restarted (pg_ctl restart -m fast) twice mid-stream, then the walsender terminated (3,000 events)',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka();
    await env.createTopic(TOPIC_OF('Chaos'), 3);
    env.startSampling();
    const relay = env.spawnRelay();
    await relay.waitForLog(/"msg":"streaming from the slot"/, 30_000);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(3000, 100, 10, rng(4));
    const faults: { what: string; at: number }[] = [];
    for (const i of [1, 2]) {
      await sleep(5000);
      const at = Date.now();
      await env.restartPostgres();
      faults.push({ what: `restart ${i}`, at });
      env.log(`postgres restarted (${Date.now() - at} ms)`);
    }
    await sleep(5000);
    const at = Date.now();
    const terminated = await env.terminateWalsender();
    faults.push({ what: 'walsender terminated', at });
    env.log(`walsender terminated: ${terminated}`);
    await writing;
    const checks: string[] = [];
    if (!terminated) checks.push('no active walsender to terminate');
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    if (!alive(relay)) checks.push('the relay exited');
    await w.close();
    const recoveries = faults.map((f) => ({ ...f, ms: env.progressAfter(f.at) }));
    const worst = recoveries.some((r) => r.ms === null) ? null : Math.max(...recoveries.map((r) => r.ms!));
    return {
      ...out,
      checks,
      recoveryMs: worst,
      notes: [
        `publishing resumed after: ${recoveries.map((r) => `${r.what} ${r.ms ?? '–'} ms`).join(', ')}; writer retried ${w.errors} times`,
      ],
    };
  },
};
