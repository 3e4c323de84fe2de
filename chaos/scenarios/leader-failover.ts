import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * A 3-node cluster; both partitions led by node 2 (node 1 hosts the controller and stays up);
 * node 2 kill -9'd mid-stream: the controller fences it (broker.session.timeout.ms = 6 s) and
 * moves leadership to an in-sync follower.
 */
export const leaderFailover: Scenario = {
  name: 'leader-failover',
  summary: '3 brokers, the partition leader (node 2) kill -9 mid-stream (3,000 events)',
  budgetMs: 180_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka({ brokers: 3 });
    const topic = TOPIC_OF('Chaos');
    await env.createTopic(topic, 2, {
      replicas: [
        [2, 3, 1],
        [2, 1, 3],
      ],
    });
    env.startSampling();
    const relay = env.spawnRelay();
    await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(3000, 110, 10, rng(3));
    await sleep(5000);
    const before = await env.leaders(topic);
    await env.cluster!.kill(2, 'SIGKILL');
    const killedAt = Date.now();
    env.log(`leader node 2 killed (leaders were ${before.join(',')})`);
    let movedAt: number | null = null;
    while (Date.now() - killedAt < 60_000) {
      const l = await env.leaders(topic).catch(() => [-1]);
      if (l.every((x) => x >= 0 && x !== 2)) {
        movedAt = Date.now();
        env.log(`leaders moved to ${l.join(',')} after ${movedAt - killedAt} ms`);
        break;
      }
      await sleep(200);
    }
    await writing;
    const checks: string[] = [];
    if (movedAt === null) checks.push('leadership did not move off node 2 within 60 s');
    const out = await drainAndRead(env, [w], [topic], checks);
    if (!alive(relay)) checks.push('the relay exited');
    await w.close();
    const recovery = env.progressAfter(killedAt);
    return {
      ...out,
      checks,
      recoveryMs: recovery,
      notes: [
        `leaders moved ${movedAt === null ? '–' : movedAt - killedAt} ms after the kill; publishing resumed ${recovery ?? '–'} ms after it`,
      ],
    };
  },
};
