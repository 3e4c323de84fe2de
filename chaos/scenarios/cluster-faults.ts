/**
 * The cluster-fault matrix (issue 19): a 3-node cluster (replication factor 3, min.insync.replicas
 * 2; node 1 hosts the single KRaft controller), a topic of 3 or 6 partitions whose leaders Kafka
 * spreads itself, writers in multi-row transactions (up to 50 rows) so sends are in flight at the
 * fault, and one kind of fault per scenario. Each must end with 0 lost and 0 order violations;
 * duplicates are counted. Run each several times (`npm run chaos -- --runs 5 --scenario …`): the
 * loss these guard against showed in 3 of 4 runs.
 *
 * A faulted node is watched through the other nodes only (a frozen node would hang the watcher).
 */
import type { Env } from '../lib/env.ts';
import { alive, type Outcome, type Scenario, sleep } from '../lib/scenario.ts';
import { rng, Writer } from '../lib/writer.ts';
import { drainAndRead, keys, START_WAIT_MS, TOPIC_OF } from './common.ts';

const TOPIC = TOPIC_OF('Cluster');
const CONTROLLER = 1;

interface Fault {
  name: string;
  summary: string;
  partitions: 3 | 6;
  /** Events written; at ~250/s in transactions of 1–50 rows. */
  events: number;
  budgetMs: number;
  /** Relay flags beyond the harness's (e.g. a request timeout longer than the fencing). */
  relayArgs?: string[];
  /** Runs once the stream flows; returns notes for the report. */
  inject(f: FaultContext): Promise<string[]>;
}

interface FaultContext {
  env: Env;
  checks: string[];
  /** Partition leaders, asked of every node but `exclude`. */
  leaders(exclude?: number): Promise<number[]>;
  /** A node other than the controller that leads the most partitions. */
  busiestLeader(): Promise<number>;
  /** Until no partition is led by `node` (the controller fenced it); ms taken, null after 60 s. */
  movedOff(node: number): Promise<number | null>;
  /** Until every partition has all 3 replicas in sync again (bounded: 90 s). */
  fullIsr(): Promise<void>;
}

function context(env: Env, checks: string[]): FaultContext {
  const leaders = (exclude?: number) => env.leaders(TOPIC, exclude);
  return {
    env,
    checks,
    leaders,
    async busiestLeader() {
      const l = await leaders();
      const counts = [2, 3].map((n) => ({ n, c: l.filter((x) => x === n).length }));
      counts.sort((a, b) => b.c - a.c);
      return counts[0]!.n;
    },
    async movedOff(node) {
      const t0 = Date.now();
      while (Date.now() - t0 < 60_000) {
        const l = await leaders(node).catch(() => [-1]);
        if (l.every((x) => x >= 0 && x !== node)) return Date.now() - t0;
        await sleep(200);
      }
      checks.push(`leadership did not move off node ${node} within 60 s`);
      return null;
    },
    async fullIsr() {
      const t0 = Date.now();
      while (Date.now() - t0 < 90_000) {
        const isr = await env.isrSizes(TOPIC).catch(() => [0]);
        if (isr.every((n) => n === 3)) return;
        await sleep(300);
      }
      checks.push('the in-sync replicas did not recover to 3 within 90 s');
    },
  };
}

function clusterScenario(f: Fault): Scenario {
  return {
    name: f.name,
    summary: f.summary,
    budgetMs: f.budgetMs,
    async run(env): Promise<Outcome> {
      await env.startPostgres();
      await env.startKafka({ brokers: 3 });
      await env.createTopic(TOPIC, f.partitions);
      env.startSampling();
      const relay = env.spawnRelay(f.relayArgs ?? []);
      await relay.waitForLog(/"msg":"streaming from the slot"/, START_WAIT_MS);
      const w = new Writer({ url: env.url, type: 'Cluster', keys: keys('c', 40) });
      const writing = w.run(f.events, 250, 50, rng(f.name.length * 7919 + Date.now()));
      const checks: string[] = [];
      const ctx = context(env, checks);
      await sleep(4000);
      env.log(`leaders before the fault: ${(await ctx.leaders()).join(',')}`);
      const faultAt = Date.now();
      const notes = await f.inject(ctx);
      await writing;
      const out = await drainAndRead(env, [w], [TOPIC], checks, 120_000);
      if (!alive(relay)) checks.push('the relay exited');
      await w.close();
      return { ...out, checks, recoveryMs: env.progressAfter(faultAt), notes };
    },
  };
}

/** kill -9 of `node`, until its partitions moved (if it led any), then restarted; ISR back to 3. */
async function killAndRestart(
  ctx: FaultContext,
  node: number,
  signal: NodeJS.Signals,
  downMs = 0,
): Promise<string> {
  const led = (await ctx.leaders()).filter((l) => l === node).length;
  await ctx.env.cluster!.kill(node, signal);
  const t0 = Date.now();
  ctx.env.log(`node ${node} (leader of ${led}) stopped by ${signal}`);
  const moved = node === CONTROLLER ? null : await ctx.movedOff(node);
  if (downMs > 0) await sleep(downMs);
  await ctx.env.cluster!.start(node);
  await ctx.fullIsr();
  return `node ${node} (led ${led}) ${signal}: leaders moved in ${moved ?? '–'} ms, back and in sync ${Date.now() - t0} ms after`;
}

export const clusterKillController: Scenario = clusterScenario({
  name: 'cluster-kill-controller',
  summary: '3 nodes, 3 partitions: node 1 (the KRaft controller, leads one) kill -9, restarted after 8 s',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  async inject(ctx) {
    return [await killAndRestart(ctx, CONTROLLER, 'SIGKILL', 8000)];
  },
});

export const clusterKillLeader: Scenario = clusterScenario({
  name: 'cluster-kill-leader',
  summary: '3 nodes, 3 partitions: the leader of one (not the controller) kill -9, restarted once fenced',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  async inject(ctx) {
    return [await killAndRestart(ctx, await ctx.busiestLeader(), 'SIGKILL')];
  },
});

export const clusterKillMultiLeader: Scenario = clusterScenario({
  name: 'cluster-kill-multi-leader',
  summary:
    '3 nodes, 6 partitions: the node leading the most (not the controller) kill -9, restarted once fenced',
  partitions: 6,
  events: 6000,
  budgetMs: 300_000,
  async inject(ctx) {
    return [await killAndRestart(ctx, await ctx.busiestLeader(), 'SIGKILL')];
  },
});

export const clusterSigtermLeader: Scenario = clusterScenario({
  name: 'cluster-sigterm-leader',
  summary: '3 nodes, 3 partitions: controlled shutdown (SIGTERM) of a leader, restarted',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  async inject(ctx) {
    return [await killAndRestart(ctx, await ctx.busiestLeader(), 'SIGTERM')];
  },
});

export const clusterRollingRestart: Scenario = clusterScenario({
  name: 'cluster-rolling-restart',
  summary:
    '3 nodes, 6 partitions: rolling restart (SIGTERM, start, wait for full ISR) of nodes 2, 3, 1 under load',
  partitions: 6,
  events: 16_000,
  budgetMs: 420_000,
  async inject(ctx) {
    const notes: string[] = [];
    for (const node of [2, 3, 1]) notes.push(await killAndRestart(ctx, node, 'SIGTERM'));
    return notes;
  },
});

/** The busiest non-controller leader frozen (SIGSTOP) until the controller moved its partitions. */
async function freezeUntilFenced(ctx: FaultContext): Promise<{ node: number; moved: number | null }> {
  const node = await ctx.busiestLeader();
  ctx.env.cluster!.signal(node, 'SIGSTOP');
  return { node, moved: await ctx.movedOff(node) };
}

/**
 * Requests swallowed, not refused: the node is frozen (SIGSTOP), so its sockets accept and never
 * answer, and it stops heartbeating: the controller fences it and moves its partitions while the
 * relay's request to it is still in flight (request timeout 30 s). Thawed after, it rejoins.
 */
export const clusterFrozenLeader: Scenario = clusterScenario({
  name: 'cluster-frozen-leader',
  summary: '3 nodes, 3 partitions: a leader frozen (SIGSTOP: requests swallowed) until fenced, then thawed',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  relayArgs: ['--kafka-request-timeout-ms', '30000'],
  async inject(ctx) {
    const { node, moved } = await freezeUntilFenced(ctx);
    await sleep(2000);
    ctx.env.cluster!.signal(node, 'SIGCONT');
    await ctx.fullIsr();
    return [`node ${node} frozen: fenced and leaders moved in ${moved ?? '–'} ms; thawed and back in sync`];
  },
});

/** Issue 19's loss, exactly: frozen with a request in flight, fenced, then kill -9'd (ECONNRESET). */
export const clusterFrozenThenKilled: Scenario = clusterScenario({
  name: 'cluster-frozen-killed',
  summary: '3 nodes, 3 partitions: a leader frozen with a send in flight, fenced, then kill -9 (issue 19)',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  relayArgs: ['--kafka-request-timeout-ms', '30000'],
  async inject(ctx) {
    const { node, moved } = await freezeUntilFenced(ctx);
    await ctx.env.cluster!.kill(node, 'SIGKILL');
    await ctx.env.cluster!.start(node);
    await ctx.fullIsr();
    return [`node ${node} frozen: fenced and leaders moved in ${moved ?? '–'} ms, then killed and restarted`];
  },
});

/** In-sync replicas below min.insync.replicas: NOT_ENOUGH_REPLICAS until the followers return. */
export const clusterMinIsr: Scenario = clusterScenario({
  name: 'cluster-min-isr',
  summary: '3 nodes, 3 partitions: nodes 2 and 3 kill -9 (ISR 1 < min.insync.replicas 2) for 10 s, then back',
  partitions: 3,
  events: 6000,
  budgetMs: 300_000,
  async inject(ctx) {
    const { env } = ctx;
    await Promise.all([env.cluster!.kill(2), env.cluster!.kill(3)]);
    const t0 = Date.now();
    await sleep(10_000);
    await Promise.all([env.cluster!.start(2), env.cluster!.start(3)]);
    await ctx.fullIsr();
    return [`nodes 2 and 3 down ${Date.now() - t0} ms until back in sync`];
  },
});

/** Repeated leader kills over about three minutes (a non-controller leader every round). */
export const clusterRepeatedKills: Scenario = clusterScenario({
  name: 'cluster-repeated-kills',
  summary: '3 nodes, 6 partitions: 5 rounds of kill -9 of a leader (nodes 2/3), each restarted once fenced',
  partitions: 6,
  events: 40_000,
  budgetMs: 600_000,
  async inject(ctx) {
    const notes: string[] = [];
    for (let round = 0; round < 5; round++) {
      notes.push(await killAndRestart(ctx, round % 2 === 0 ? 2 : 3, 'SIGKILL'));
      await sleep(3000);
    }
    return notes;
  },
});

export const CLUSTER_SCENARIOS: Scenario[] = [
  clusterKillController,
  clusterKillLeader,
  clusterKillMultiLeader,
  clusterSigtermLeader,
  clusterRollingRestart,
  clusterFrozenLeader,
  clusterFrozenThenKilled,
  clusterMinIsr,
  clusterRepeatedKills,
];
