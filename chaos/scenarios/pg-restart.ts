import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

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
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
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
    const notes: string[] = [];
    if (!alive(relay)) {
      // A crash is a failure in itself; start another relay, as a supervisor would, so the
      // figures say whether anything was lost beyond the crash (the slot must still hold it).
      checks.push(`the relay exited (${relay.child.exitCode ?? relay.child.signalCode}) during the faults`);
      const again = env.spawnRelay();
      await again.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
      notes.push(
        'the relay crashed: a second one was started (as a supervisor would) to drain the slot; lost = not delivered even then',
      );
    }
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    await w.close();
    const recoveries = faults.map((f) => ({ ...f, ms: env.progressAfter(f.at) }));
    const worst = recoveries.some((r) => r.ms === null) ? null : Math.max(...recoveries.map((r) => r.ms!));
    return {
      ...out,
      checks,
      recoveryMs: worst,
      notes: [
        ...notes,
        `publishing resumed after: ${recoveries.map((r) => `${r.what} ${r.ms ?? '–'} ms`).join(', ')}; writer retried ${w.errors} times`,
      ],
    };
  },
};
