import type { RelayProcess } from '../../test/support/relay.ts';
import { keySeqs, readBack } from '../lib/read-back.ts';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * Two relays on one slot (one active, one standby on the leader lock); the active one SIGKILLed
 * mid-stream. Takeover time = from the kill to the first event the standby published (broker
 * acknowledged, row marked published: the count of published rows, taken right after the killed
 * process is gone, grows; sampled every 100 ms). Only the standby can mark rows after the kill.
 */
export const standbyTakeover: Scenario = {
  name: 'standby-takeover',
  summary: 'two relays on one slot; the active one SIGKILLed mid-stream (3,000 events)',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka();
    const topic = TOPIC_OF('Chaos');
    await env.createTopic(topic, 3);
    env.startSampling();
    const a = env.spawnRelay();
    const b = env.spawnRelay();
    const lock = /"msg":"leader lock acquired/;
    const active = await Promise.race([
      a.waitForLog(lock, START_WAIT_MS).then(() => a),
      b.waitForLog(lock, START_WAIT_MS).then(() => b),
    ]);
    const standby: RelayProcess = active === a ? b : a;
    await active.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
    const writing = w.run(3000, 120, 10, rng(5));
    await sleep(6000);
    active.kill('SIGKILL');
    const killedAt = Date.now();
    await active.exited;
    const baseline = await env.publishedNow();
    env.log('active relay killed');
    await standby.waitForLog(lock, START_WAIT_MS);
    const lockedAt = Date.now();
    await writing;
    const checks: string[] = [];
    if (!(await env.waitNothingPending(60_000)))
      checks.push(`rows still pending: ${JSON.stringify(await env.statusCounts())}`);
    await env.stopSampling();
    const records = await readBack(env.kafka(), [topic]);
    const takeover = env.progressSince(killedAt, baseline);
    if (takeover === null) checks.push('the standby never published');
    if (!alive(standby)) checks.push('the standby exited');
    await w.close();
    return {
      written: w.written,
      read: keySeqs(records),
      checks,
      takeoverMs: takeover,
      notes: [
        `standby held the lock ≤ ${lockedAt - killedAt} ms after the kill (log seen), first event published by it ${takeover ?? '–'} ms after the kill`,
      ],
    };
  },
};
