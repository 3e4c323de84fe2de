import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/** The single broker kill -9'd mid-stream and restarted after 4 s. */
export const brokerKill: Scenario = {
  name: 'broker-kill',
  summary: 'the only broker kill -9 mid-stream, restarted 4 s later (3,000 events, 30 keys)',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka();
    await env.createTopic(TOPIC_OF('Chaos'), 3);
    env.startSampling();
    const relay = env.spawnRelay();
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(3000, 120, 10, rng(2));
    await sleep(5000);
    await env.cluster!.kill(1, 'SIGKILL');
    const killedAt = Date.now();
    env.log('broker killed (SIGKILL)');
    await sleep(4000);
    await env.cluster!.start(1);
    env.log(`broker back after ${Date.now() - killedAt} ms`);
    const backAt = Date.now();
    await writing;
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    if (!alive(relay)) checks.push('the relay exited');
    await w.close();
    const recovery = env.progressAfter(killedAt);
    return {
      ...out,
      checks,
      recoveryMs: recovery,
      notes: [
        `broker down ${backAt - killedAt} ms (kill + restart until registered); publishing resumed ${recovery ?? '–'} ms after the kill, ${recovery === null ? '–' : recovery - (backAt - killedAt)} ms after the broker was back`,
      ],
    };
  },
};
