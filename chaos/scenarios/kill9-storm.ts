import type { RelayProcess } from '../../test/support/relay.ts';
import type { Env } from '../lib/env.ts';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

/**
 * The relay SIGKILLed 10 times at random moments while events are written. A 30 ms broker
 * latency (TCP proxy) keeps received-but-unacknowledged transactions in the relay at every kill.
 */
export const kill9Storm: Scenario = {
  name: 'kill9-storm',
  summary: 'relay SIGKILLed 10× at random moments while 4,000 events are written (40 keys, 4 partitions)',
  budgetMs: 150_000,
  async run(env) {
    await env.startPostgres();
    await env.startKafka({ proxy: true });
    await env.createTopic(TOPIC_OF('Chaos'), 4);
    env.startSampling();
    const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('acct-', 40) });
    const writing = w.run(4000, 180, 20, rng(20261123));
    env.proxies[0]!.setLatency(30);
    const { last, recoveries } = await killStorm(env, rng(7), async () => {
      env.log(`10 kills done; ${w.written.length} events written so far`);
      await writing;
      env.proxies[0]!.setLatency(0);
    });
    const checks: string[] = [];
    const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
    if (!alive(last)) checks.push('the last relay exited');
    await w.close();
    return {
      ...out,
      checks,
      recoveryMs: Math.max(...recoveries),
      notes: [
        `kill → next relay streaming: median ${median(recoveries)} ms, max ${Math.max(...recoveries)} ms (includes starting a Node process)`,
      ],
    };
  },
};

/**
 * Ten relays one after the other, each SIGKILLed 0.3–1.8 s after it streams (batch sizes 50–450,
 * both from `rnd`); then `beforeLast`, and a last relay that stays. Returns it and each
 * kill → next relay streaming time.
 */
export async function killStorm(
  env: Env,
  rnd: () => number,
  beforeLast: () => Promise<void>,
): Promise<{ last: RelayProcess; recoveries: number[] }> {
  const recoveries: number[] = [];
  let killedAt = 0;
  for (let k = 0; k < 10; k++) {
    const r = env.spawnRelay(['--batch-size', String(50 + Math.floor(rnd() * 400))]);
    await r.waitForLog(STREAMING, START_WAIT_MS);
    if (k > 0) recoveries.push(Date.now() - killedAt);
    await sleep(300 + Math.floor(rnd() * 1500));
    r.kill('SIGKILL');
    killedAt = Date.now();
    await r.exited;
  }
  await beforeLast();
  const last = env.spawnRelay();
  await last.waitForLog(STREAMING, START_WAIT_MS);
  recoveries.push(Date.now() - killedAt);
  return { last, recoveries };
}

export const STREAMING = /"msg":"streaming from the slot"/;

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}
