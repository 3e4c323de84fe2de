/**
 * A/B of two relays on the same bulk backlog, interleaved, for changes smaller than the noise of
 * one `npm run bench` drain (±10 % on this machine). Each round drains one slot per variant, in
 * alternating order; the figures are medians over the rounds.
 *
 *   npm run bench:ab -- --a /tmp/base [--b .] [--sink stdout|kafka|nats|rabbitmq|redis] [--rounds 5] [--rows 100000]
 *                       [--a-node-args='--max-semi-space-size=16'] [--b-node-args=…]
 *                       [--a-args='--batch-size 1000'] [--b-args=…]   (relay flags)
 *                       [--live 30 [--live-rate 2000]] [--autogroup off|keep]
 *
 * --live SECONDS (Kafka, NATS, RabbitMQ): instead of bulk drains, live runs (bench/live.ts: a paced
 * writer, commit → ack time as the sink's reader sees it: Kafka's LogAppendTime, bench/sinks.ts for
 * the others) of each variant in turn on one server, after the bulk warm-up drain and one
 * uncounted 20 s live run: a latency tail moves by more between two runs than most changes move
 * it, so only interleaved rounds compare. Beside the tail and the relay's CPU per event, each live
 * run prints the relay's write syscalls per event (/proc/PID/io syscw over the run ÷ events: its
 * socket writes to the broker and to PostgreSQL — progress statements, standby status updates —
 * and any other write(2)/writev(2), e.g. a worker thread's wake-up) and events per publish (the
 * events ÷ the batches published, its /metrics outbox_publish_batch_seconds_count over the run:
 * with one broker, a batch is one Produce request, one write); "besides a publish's" = writes per
 * event − publishes per event: mostly the progress statements and status updates.
 *
 * --autogroup: as `npm run bench`'s (bench/autogroup.ts): the kernel's session autogroups are
 * turned off for the run (root) and put back at its end; `keep` leaves them.
 *
 * --a / --b: checkouts of the project (their src/cli/main.ts runs; `git worktree add /tmp/base
 * HEAD~1` and a node_modules symlink make one). With --sink kafka, one real broker (local jars),
 * warmed by a first drain that is not counted; with --sink nats or rabbitmq, the bench's throwaway
 * server of that sink (bench/sinks.ts), warmed the same way, every drain checked to have stored
 * every event. The server's CPU per event is printed beside the relay's.
 */
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, LocalKafkaCluster } from '../src/dev/local-kafka.ts';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';
import { migrate } from '../src/store/migrate.ts';
import { type AutogroupChoice, applyAutogroup } from './autogroup.ts';
import { createSlots, currentLsn, dropSlot, insertBulk } from './backlog.ts';
import { parseFlags, usageError } from './cli-flags.ts';
import { measureLive, measureLiveWith } from './live.ts';
import { postmasterPid } from './pg-cpu.ts';
import { cpuSeconds, jitQuiet, writeSyscalls } from './proc.ts';
import { type Drain, drainRelay, type PgContext, startRelay } from './relay.ts';
import { type BenchSink, BROKER_SINKS, type SinkName, startBenchSink } from './sinks.ts';
import { type Dist, median, us } from './stats.ts';
import { createLogAppendTopic, createTopic } from './topics.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const values = parseFlags(
  'npm run bench:ab',
  'two checkouts of the relay (--a, --b) on the same backlog, interleaved drains (or --live SECONDS runs), medians over --rounds',
  {
    a: { type: 'string', default: '' },
    b: { type: 'string', default: '.' },
    'a-node-args': { type: 'string', default: '' },
    'b-node-args': { type: 'string', default: '' },
    'a-args': { type: 'string', default: '' },
    'b-args': { type: 'string', default: '' },
    sink: { type: 'string', default: 'stdout' },
    rounds: { type: 'string', default: '5' },
    rows: { type: 'string', default: '100000' },
    live: { type: 'string', default: '0' },
    'live-rate': { type: 'string', default: '2000' },
    autogroup: { type: 'string', default: 'off' },
  },
);
const usage = (m: string) => usageError('npm run bench:ab', m);
if (!values.a) usage('--a <checkout> is required (e.g. a git worktree of the base commit)');
const SINKS = ['stdout', 'kafka', ...BROKER_SINKS];
if (!SINKS.includes(values.sink)) usage(`--sink must be one of ${SINKS.join(', ')}; got "${values.sink}"`);
const brokerSink = BROKER_SINKS.includes(values.sink as SinkName) ? (values.sink as SinkName) : null;
const rounds = Number(values.rounds);
const rows = Number(values.rows);
const liveSeconds = Number(values.live);
const liveRate = Number(values['live-rate']);
for (const [name, n] of [
  ['rounds', rounds],
  ['rows', rows],
  ['live', liveSeconds],
  ['live-rate', liveRate],
] as const)
  if (!Number.isInteger(n) || n < 0) usage(`--${name} must be a whole number; got "${values[name]}"`);
if (values.autogroup !== 'off' && values.autogroup !== 'keep')
  usage(`--autogroup must be "off" or "keep"; got "${values.autogroup}"`);
if (liveSeconds > 0 && values.sink === 'stdout') usage('--live needs a broker (--sink kafka|nats|rabbitmq)');
const variants = { a: resolve(values.a), b: resolve(values.b) };
const cli = (dir: string) => join(dir, 'src/cli/main.ts');
const relayArgs = {
  a: values['a-args'].split(' ').filter(Boolean),
  b: values['b-args'].split(' ').filter(Boolean),
};
const nodeArgs = {
  a: values['a-node-args'].split(' ').filter(Boolean),
  b: values['b-node-args'].split(' ').filter(Boolean),
};

async function main() {
  hideKafkajsTimeoutWarnings();
  const autogroup = applyAutogroup(values.autogroup as AutogroupChoice);
  console.log(autogroup.note);
  const server = await startThrowawayPostgres({ settings: { synchronous_commit: 'on' } });
  const db = new pg.Client({ connectionString: server.url });
  await db.connect();
  const broker =
    values.sink === 'kafka'
      ? await LocalKafkaCluster.up({
          dir: join(ROOT, '.tmp', `ab-kafka-${process.pid}`),
          port: 0,
          heapMb: 1024,
        })
      : null;
  const sink: BenchSink | null = brokerSink ? await startBenchSink(brokerSink) : null;
  try {
    await migrate(db, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
    const benchPid = (await db.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
    const ctx: PgContext = {
      db,
      postmaster: postmasterPid(server.dataDir),
      exclude: [benchPid],
      brokerPid: broker?.pidOf(1) ?? sink?.brokerPid(),
    };
    const slots = ['warm'];
    for (let r = 0; r < rounds; r++) slots.push(`a_${r}`, `b_${r}`);
    await createSlots(db, slots);
    await insertBulk(db, 'Bulk', rows, 100);
    const end = await currentLsn(db);
    const args = broker
      ? ['--kafka-brokers', broker.bootstrap.join(',')]
      : (sink?.relayArgs ?? ['--sink', 'stdout']);
    /** A drain; into a broker sink, checked to have stored every event (and the destination emptied). */
    const drain = async (slot: string, extra: string[] = [], dir = variants.b, node?: string[]) => {
      await db.query(`UPDATE outbox SET status = 'pending', published_at = NULL WHERE status <> 'pending'`);
      await db.query('DELETE FROM outbox_relay_progress');
      const d = await drainRelay(server.url, ctx, slot, end, [...args, ...extra], cli(dir), node);
      const held = sink ? await sink.takeStored('Bulk') : rows;
      if (held < rows) throw new Error(`${sink!.name} holds ${held} messages, expected ${rows}`);
      return d;
    };
    if (broker) {
      const admin = broker.client('ab').admin();
      await admin.connect();
      await createTopic(admin, 'outbox.event.Bulk');
      await admin.disconnect();
    }
    if (broker || sink) await drain('warm');
    await dropSlot(db, 'warm');
    if (liveSeconds > 0) {
      await liveRounds(server.url, db, (broker ?? sink)!, args);
      return;
    }
    const results: Record<'a' | 'b', Drain[]> = { a: [], b: [] };
    for (let r = 0; r < rounds; r++) {
      const order: ('a' | 'b')[] = r % 2 ? ['b', 'a'] : ['a', 'b'];
      for (const v of order) {
        const d = await drain(`${v}_${r}`, relayArgs[v], variants[v], nodeArgs[v]);
        await dropSlot(db, `${v}_${r}`);
        results[v].push(d);
        console.log(
          `round ${r + 1} ${v}: ${Math.round(rows / d.seconds).toLocaleString('en')} events/s, relay ${us(d.cpuSeconds, rows).toFixed(1)} µs/event${server_(d)}, peak RSS ${d.peakRssMb.toFixed(0)} MB`,
        );
      }
    }
    console.log(`\n${rows.toLocaleString('en')} rows into ${values.sink}, ${rounds} rounds (medians):`);
    for (const v of ['a', 'b'] as const) {
      const ds = results[v];
      console.log(
        `${v} (${variants[v]}${[...nodeArgs[v], ...relayArgs[v]].map((a) => ` ${a}`).join('')}): ${Math.round(median(ds.map((d) => rows / d.seconds))).toLocaleString('en')} events/s, relay ${median(ds.map((d) => us(d.cpuSeconds, rows))).toFixed(2)} µs/event${ctx.brokerPid ? `, server ${median(ds.map((d) => us(d.brokerCpuSeconds, rows))).toFixed(2)} µs/event` : ''}, peak RSS ${median(ds.map((d) => d.peakRssMb)).toFixed(0)} MB`,
      );
    }
  } finally {
    await sink?.stop();
    await broker?.destroy();
    await db.end();
    await server.stop();
    autogroup.restore();
  }
}

/** The server's CPU per event of a drain, when there is a server. */
const server_ = (d: Drain) =>
  Number.isNaN(d.brokerCpuSeconds) ? '' : `, server ${us(d.brokerCpuSeconds, rows).toFixed(1)} µs/event`;

/**
 * --live: interleaved live runs of a and b (one fresh slot and aggregate type each: a topic of its
 * own for Kafka), after an uncounted one.
 */
async function liveRounds(
  url: string,
  db: pg.Client,
  target: LocalKafkaCluster | BenchSink,
  args: string[],
): Promise<void> {
  const broker = target instanceof LocalKafkaCluster ? target : null;
  const sink = broker ? null : (target as BenchSink);
  const kafka = broker?.client('ab-live');
  const admin = kafka?.admin();
  await admin?.connect();
  type Run = { dist: Dist; cpuUs: number; missing: number; writesPerEvent: number; eventsPerPublish: number };
  const results: Record<'a' | 'b', Run[]> = { a: [], b: [] };
  let n = 0;
  const run = async (v: 'a' | 'b', seconds: number): Promise<Run> => {
    const name = `live_${v}_${n++}`;
    await createSlots(db, [name]);
    if (admin) await createLogAppendTopic(admin, `outbox.event.${name}`);
    // /metrics on a free port of its own: the batches it published.
    const port = await freePort();
    const http = ['--http-host', '127.0.0.1', '--http-port', String(port)];
    const relay = startRelay(url, name, [...args, ...http, ...relayArgs[v]], cli(variants[v]), nodeArgs[v]);
    try {
      await relay.streaming;
      const pid = relay.child.pid!;
      const published0 = await publishedBatches(port);
      const writes0 = writeSyscalls(pid);
      const cpu0 = cpuSeconds(relay.child.pid!);
      const live = broker
        ? await measureLive(
            kafka!,
            url,
            `outbox.event.${name}`,
            name,
            liveRate,
            seconds,
            jitQuiet([broker.pidOf(1) ?? 0].filter(Boolean)),
          )
        : await measureLiveWith(sink!.liveReader(name), url, name, liveRate, seconds);
      const cpu = cpuSeconds(relay.child.pid!) - cpu0;
      const writes = writeSyscalls(pid) - writes0;
      const published = (await publishedBatches(port)) - published0;
      const events = live.dist.n + live.warmup.n;
      return {
        dist: live.dist,
        cpuUs: us(cpu, events),
        missing: live.missing,
        writesPerEvent: writes / events,
        eventsPerPublish: events / published,
      };
    } finally {
      await relay.stop();
      await dropSlot(db, name);
    }
  };
  try {
    await run('b', 20);
    const f = (x: number) => x.toFixed(1);
    for (let r = 0; r < rounds; r++) {
      const order: ('a' | 'b')[] = r % 2 ? ['b', 'a'] : ['a', 'b'];
      for (const v of order) {
        const x = await run(v, liveSeconds);
        results[v].push(x);
        console.log(
          `round ${r + 1} ${v}: p50 ${f(x.dist.p50)} p99 ${f(x.dist.p99)} max ${f(x.dist.max)} ms, relay ${x.cpuUs.toFixed(0)} µs/event, ${x.writesPerEvent.toFixed(3)} writes/event (${(x.writesPerEvent - 1 / x.eventsPerPublish).toFixed(3)} besides a publish's), ${f(x.eventsPerPublish)} events/publish, missing ${x.missing}`,
        );
      }
    }
    console.log(
      `\nlive, ${liveRate.toLocaleString('en')} commits/s × ${liveSeconds} s, ${rounds} rounds (medians; max of the maxima):`,
    );
    for (const v of ['a', 'b'] as const) {
      const xs = results[v];
      console.log(
        `${v} (${variants[v]}${[...nodeArgs[v], ...relayArgs[v]].map((a) => ` ${a}`).join('')}): p50 ${f(median(xs.map((x) => x.dist.p50)))} p99 ${f(median(xs.map((x) => x.dist.p99)))} max ${f(median(xs.map((x) => x.dist.max)))} (${f(Math.max(...xs.map((x) => x.dist.max)))}) ms, relay ${median(xs.map((x) => x.cpuUs)).toFixed(0)} µs/event, ${median(xs.map((x) => x.writesPerEvent)).toFixed(3)} writes/event (${median(xs.map((x) => x.writesPerEvent - 1 / x.eventsPerPublish)).toFixed(3)} besides a publish's), ${f(median(xs.map((x) => x.eventsPerPublish)))} events/publish`,
      );
    }
  } finally {
    await admin?.disconnect();
  }
}

/** The batches a relay has published: outbox_publish_batch_seconds_count of its /metrics. */
async function publishedBatches(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = /^outbox_publish_batch_seconds_count(?:\{[^}]*\})? (\d+(?:\.\d+)?(?:e\+?\d+)?)$/m.exec(text);
  if (!m) throw new Error("the relay's /metrics has no outbox_publish_batch_seconds_count");
  return Number(m[1]);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
