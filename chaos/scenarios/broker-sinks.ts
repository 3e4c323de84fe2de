/**
 * The NATS JetStream, RabbitMQ and HTTP (webhook) sinks under the faults the Kafka scenarios put the broker
 * The NATS JetStream, RabbitMQ and Redis Streams sinks under the faults the Kafka scenarios put the broker
 * through (issue 23): the server kill -9'd and restarted mid-stream, the server frozen (SIGSTOP,
 * longer than the PubAck / confirm timeout and the client's ping or heartbeat), and a storm of
 * relay kill -9s. Each reads back what the server stored, in its order (the stream's, the
 * queue's): 0 lost and 0 per-key order violations, duplicates counted (NATS: the duplicate window
 * drops re-sends within it, so they should be few or none).
 *
 * Unroutable messages, a full stream / queue (discard new, reject-publish) and messages over the
 * server's size limit are each covered by test/integration/{nats,rabbitmq,redis}-sink.test.ts.
 */
import type { Env } from '../lib/env.ts';
import { alive, type Scenario, sleep } from '../lib/scenario.ts';
import type { SinkServerName } from '../lib/sink-server.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';
import { killStorm, median, STREAMING } from './kill9-storm.ts';

async function setUp(env: Env, sink: SinkServerName): Promise<void> {
  await env.startPostgres();
  await env.startSink(sink);
  env.startSampling();
}

function serverKill(sink: SinkServerName): Scenario {
  return {
    name: `${sink}-server-kill`,
    summary: `the ${sink} server kill -9 mid-stream, restarted 4 s later (3,000 events, 30 keys)`,
    budgetMs: 180_000,
    async run(env) {
      await setUp(env, sink);
      const relay = env.spawnRelay();
      await relay.waitForLog(STREAMING, START_WAIT_MS);
      const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
      const writing = w.run(3000, 120, 10, rng(2));
      await sleep(5000);
      await env.sink!.kill9();
      const killedAt = Date.now();
      env.log(`${sink} killed (SIGKILL)`);
      await sleep(4000);
      await env.sink!.restart();
      const backAt = Date.now();
      env.log(`${sink} back after ${backAt - killedAt} ms`);
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
          `server down ${backAt - killedAt} ms; publishing resumed ${recovery ?? '–'} ms after the kill, ${recovery === null ? '–' : recovery - (backAt - killedAt)} ms after the server was back`,
        ],
      };
    },
  };
}

function serverFreeze(sink: SinkServerName, frozenMs: number): Scenario {
  return {
    name: `${sink}-freeze`,
    summary: `the ${sink} server frozen (SIGSTOP) ${frozenMs / 1000} s mid-stream, then SIGCONT (3,000 events, 30 keys)`,
    budgetMs: 200_000,
    async run(env) {
      await setUp(env, sink);
      const relay = env.spawnRelay();
      await relay.waitForLog(STREAMING, START_WAIT_MS);
      const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('k', 30) });
      const writing = w.run(3000, 120, 10, rng(3));
      await sleep(5000);
      const checks: string[] = [];
      const before = await env.publishedNow();
      env.sink!.freeze();
      const frozenAt = Date.now();
      env.log(`${sink} frozen (SIGSTOP)`);
      // Acknowledgements already on their way land within a second; after that nothing may be
      // recorded published while the server cannot have stored anything.
      await sleep(1500);
      const settled = await env.publishedNow();
      await sleep(frozenMs - 1500);
      const during = await env.publishedNow();
      if (during !== settled)
        checks.push(`${during - settled} events recorded published while the server was frozen`);
      env.sink!.thaw();
      const thawedAt = Date.now();
      env.log(`${sink} thawed (SIGCONT) after ${thawedAt - frozenAt} ms`);
      await writing;
      const out = await drainAndRead(env, [w], [TOPIC_OF('Chaos')], checks);
      if (!alive(relay)) checks.push('the relay exited');
      await w.close();
      const recovery = env.progressSince(thawedAt, during);
      return {
        ...out,
        checks,
        recoveryMs: recovery,
        notes: [
          `${settled - before} acknowledgements landed in the first 1.5 s of the freeze, none after; publishing resumed ${recovery ?? '–'} ms after SIGCONT`,
        ],
      };
    },
  };
}

function relayKillStorm(sink: SinkServerName): Scenario {
  return {
    name: `${sink}-kill9-storm`,
    summary: `relay SIGKILLed 10× at random moments while 4,000 events are written (40 keys) to ${sink}`,
    budgetMs: 200_000,
    async run(env) {
      await setUp(env, sink);
      const w = new Writer({ url: env.url, type: 'Chaos', keys: keys('acct-', 40) });
      const writing = w.run(4000, 200, 20, rng(20261123));
      const { last, recoveries } = await killStorm(env, rng(7), async () => {
        env.log(`10 kills done; ${w.written.length} events written so far`);
        await writing;
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
}

/**
 * `npm run chaos -- --group nats` / `rabbitmq` / `http` / `redis` / `sqs`. Frozen longer than the PubAck /
 * confirm / request / command timeout (5 s here) and than the client's liveness check: NATS pings
 * every 5 s and gives up after 2 unanswered, RabbitMQ's heartbeat is 10 s; the webhook receiver
 * (SIGSTOP: connections are still accepted by the kernel, requests wait) has none; the Redis
 * sink's command timeout drops the connection.
 */
export const SINK_SCENARIOS: Scenario[] = (['nats', 'rabbitmq', 'http', 'redis', 'sqs'] as const).flatMap(
  (s) => [serverKill(s), serverFreeze(s, s === 'rabbitmq' ? 25_000 : 15_000), relayKillStorm(s)],
);
