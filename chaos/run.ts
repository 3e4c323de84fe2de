/**
 * The chaos suite (issue 10): each scenario starts its own throwaway PostgreSQL and its own real
 * Kafka broker(s) (or NATS / RabbitMQ server, issue 23), runs the relay as a child process of the real CLI, writes events (several
 * keys, a seq per key) while a fault happens, and reads the topics back with a separate consumer.
 *
 *   npm run chaos                          every scenario, one after the other
 *   npm run chaos -- --scenario NAME       one (repeat the flag for several)
 *   npm run chaos -- --group cluster       the cluster-fault matrix (every cluster-* scenario)
 *   npm run chaos -- --group nats          the NATS JetStream sink's (nats-*; rabbitmq-*, http-*, redis-* likewise)
 *   npm run chaos -- --group pg-failover   a primary killed with its async standby 2 s behind, on PostgreSQL 14, 16, 17, 18;
 *                                          a temporary synced slot at the promotion, a standby of
 *                                          synchronized_standby_slots down, an idle-timeout invalidation
 *   npm run chaos -- --runs 5 …            each chosen scenario 5 times, one after the other
 *   npm run chaos -- --delivery exactly-once …   relays in exactly-once mode, read back read_committed:
 *                                          a duplicate then fails the scenario
 *   npm run chaos -- --list
 *
 * Prints one line per scenario, then a markdown table and one JSON line. Exit 1 on any loss,
 * per-key order violation or broken check. Relay logs: the directory printed at the start.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';
import { Env } from './lib/env.ts';
import { json, line, type Result, summary, table } from './lib/format.ts';
import type { Scenario } from './lib/scenario.ts';
import { tally } from './lib/tally.ts';
import { SCENARIOS } from './scenarios/index.ts';

hideKafkajsTimeoutWarnings();

type Delivery = 'at-least-once' | 'exactly-once';

function parseArgs(argv: string[]): { list: boolean; names: string[]; runs: number; delivery: Delivery } {
  const names: string[] = [];
  let list = false;
  let runs = 1;
  let delivery: Delivery = 'at-least-once';
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--list') list = true;
    else if (a === '--runs' || a.startsWith('--runs=')) {
      const v = a === '--runs' ? argv[++i] : a.slice('--runs='.length);
      runs = Number(v);
      if (!Number.isInteger(runs) || runs < 1 || runs > 100) {
        console.error(`--runs takes a whole number 1..100; got ${v}`);
        process.exit(64);
      }
    } else if (a === '--group' || a.startsWith('--group=')) {
      const g = a === '--group' ? argv[++i] : a.slice('--group='.length);
      const members = SCENARIOS.filter((s) => s.name.startsWith(`${g}-`)).map((s) => s.name);
      if (members.length === 0) {
        console.error(`no scenario in group ${g} (try --list)`);
        process.exit(64);
      }
      names.push(...members);
    } else if (a === '--delivery' || a.startsWith('--delivery=')) {
      const v = a === '--delivery' ? argv[++i] : a.slice('--delivery='.length);
      if (v !== 'at-least-once' && v !== 'exactly-once') {
        console.error(`--delivery takes at-least-once or exactly-once; got ${v}`);
        process.exit(64);
      }
      delivery = v;
    } else if (a === '--scenario') names.push(argv[++i] ?? '');
    else if (a.startsWith('--scenario=')) names.push(a.slice('--scenario='.length));
    else if (a === '--help' || a === '-h') {
      console.log(
        'npm run chaos [-- --list] [-- --scenario NAME ...] [-- --group cluster] [-- --runs N] [-- --delivery exactly-once]',
      );
      process.exit(0);
    } else {
      console.error(`unknown argument ${a} (try --list or --scenario NAME)`);
      process.exit(64);
    }
  }
  return { list, names, runs, delivery };
}

const live = new Set<Env>();

async function runOne(s: Scenario, outRoot: string, run: number | null, delivery: Delivery): Promise<Result> {
  const label = run === null ? s.name : `${s.name}#${run}`;
  const env = new Env(label, outRoot, (l) => console.error(l), delivery);
  live.add(env);
  const started = Date.now();
  const failures: string[] = [];
  let outcome = null as Awaited<ReturnType<Scenario['run']>> | null;
  let timer: NodeJS.Timeout | undefined;
  // Exactly-once: every relay start also waits for InitProducerId (the killed relay's open
  // transaction is aborted first) and reads the progress topic back; each batch is a transaction.
  const budgetMs = delivery === 'exactly-once' ? 2 * s.budgetMs : s.budgetMs;
  try {
    outcome = await Promise.race([
      s.run(env),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not finish within ${budgetMs / 1000} s`)), budgetMs);
      }),
    ]);
  } catch (e) {
    failures.push(`error: ${(e as Error).message.split('\n')[0]}`);
  } finally {
    clearTimeout(timer);
  }
  const durationMs = Date.now() - started;
  const problems = env.relayProblems();
  await env.close().catch((e) => failures.push(`cleanup: ${(e as Error).message}`));
  live.delete(env);
  const t = tally(outcome?.written ?? [], outcome?.read ?? []);
  if (t.lost > 0) failures.push(`${t.lost} lost, e.g. ${t.lostSample.join(', ')}`);
  // Exactly-once promises read_committed consumers every event once (the read-back reads so).
  if (delivery === 'exactly-once' && t.duplicates > 0 && !outcome?.duplicatesExpected)
    failures.push(`${t.duplicates} duplicates under exactly-once`);
  if (t.orderViolations > 0)
    failures.push(`${t.orderViolations} order violations, e.g. ${t.violationSample.join('; ')}`);
  failures.push(...(outcome?.checks ?? []));
  const { lostSample: _l, violationSample: _v, ...counts } = t;
  const result: Result = {
    scenario: label,
    delivery,
    pass: failures.length === 0,
    ...counts,
    maxRetainedWalBytes: env.maxRetainedWal,
    takeoverMs: outcome?.takeoverMs ?? null,
    recoveryMs: outcome?.recoveryMs ?? null,
    durationMs,
    failures,
    notes: [
      ...(outcome?.notes ?? []),
      ...(outcome?.duplicatesExpected && t.duplicates > 0
        ? [`${t.duplicates} duplicates: ${outcome.duplicatesExpected}`]
        : []),
    ],
    ...(outcome?.phantoms === undefined ? {} : { phantoms: outcome.phantoms }),
  };
  console.log(line(result));
  for (const f of failures) console.log(`    ✗ ${f}`);
  for (const n of result.notes) console.log(`    · ${n}`);
  if (!result.pass && problems.length > 0) {
    console.log(`    relay warnings/errors (logs in ${env.outDir}):`);
    for (const p of problems) console.log(`      ${p}`);
  }
  return result;
}

async function main(): Promise<number> {
  const { list, names, runs, delivery } = parseArgs(process.argv.slice(2));
  if (list) {
    for (const s of SCENARIOS) console.log(`${s.name.padEnd(26)} ${s.summary}`);
    return 0;
  }
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    console.error(`unknown scenario(s): ${unknown.join(', ')}; --list shows them`);
    return 2;
  }
  const chosen = names.length > 0 ? SCENARIOS.filter((s) => names.includes(s.name)) : SCENARIOS;
  const outRoot = mkdtempSync(join(tmpdir(), 'chaos-'));
  console.error(
    `chaos: ${chosen.length} scenario(s) × ${runs} run(s), delivery ${delivery}; relay logs under ${outRoot}`,
  );
  const results: Result[] = [];
  for (const s of chosen)
    for (let r = 1; r <= runs; r++) results.push(await runOne(s, outRoot, runs > 1 ? r : null, delivery));
  console.log('');
  console.log(table(results));
  if (runs > 1) {
    console.log('');
    console.log(summary(results));
  }
  console.log('');
  console.log(json(results));
  return results.every((r) => r.pass) ? 0 : 1;
}

// Ctrl-C: take the running scenario's relays, brokers and database down, then exit.
let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    console.error('chaos: interrupted, cleaning up (again to exit at once: brokers may then stay up)');
    void Promise.allSettled([...live].map((e) => e.close())).then(() => process.exit(130));
  });
}

// A stray error event (a library's connection dropped by a restart) must not leave brokers behind.
process.on('uncaughtException', (e) => {
  console.error(`chaos: uncaught ${e.stack ?? e}`);
  void Promise.allSettled([...live].map((env) => env.close())).then(() => process.exit(1));
});

process.exitCode = await main();
// kafkajs and pg may keep timers; the results are printed.
setTimeout(() => process.exit(process.exitCode), 500).unref();
