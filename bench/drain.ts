/**
 * `npm run bench` (issue 12). On one throwaway PostgreSQL cluster, one real Apache Kafka broker
 * (local, from Maven Central jars) and in one run:
 *   1. drains of a bulk backlog (100,000 × 500 B rows, 100 rows per transaction) by pg_recvlogical
 *      (raw decoding, /dev/null: the physical limit), the relay → stdout and the relay → Kafka;
 *   2. drains of a backlog of single-row transactions (100,000) by pg_recvlogical and the relay → Kafka;
 *   3. PostgreSQL's CPU per event during each drain, split into the walsender's decoding and the
 *      relay's own statements (the progress record, relay state) and background processes;
 *   4. live latency, commit → broker ack (LogAppendTime), at 2,000 single-row commits/s for 60 s,
 *      in 5 runs (--live-runs), each beside its floors (bench/floors.ts: PostgreSQL's commit →
 *      receipt by a reader on a slot of its own, of the relay pass's own commits, and Kafka's
 *      send → ack alone at the same rate, in a pass of its own), each process's CPU per event
 *      (the relay's ÷ the floors': live_relay_cpu_vs_floor; with --live-profile the relay's by
 *      stage, bench/live-stages.ts), then a short ramp for the
 *      highest rate where lag stays bounded, pg_recvlogical under the same writer at each step;
 *   5. peak RSS relaying one 200,000-row transaction;
 *   6. compression: the bulk drain into Kafka per codec (--compression, default every codec;
 *      '' skips it): drain ÷ pg_recvlogical and ÷ none, relay CPU and stored bytes per event;
 *   7. with `--peer debezium`: Debezium's PostgreSQL connector + Outbox Event Router on a Kafka
 *      Connect standalone worker, on the same backlogs, PostgreSQL and broker, and its live latency,
 *      with its defaults and tuned for throughput (bench/debezium.ts DEBEZIUM_TUNING);
 *   8. exactly-once (bench/eos.ts): the bulk drain with --delivery exactly-once beside the
 *      at-least-once one in every round, and a short live run of each mode (read_committed
 *      receipt time); `--delivery-modes at-least-once` skips it;
 *   9. NATS JetStream and RabbitMQ (issue 23; throwaway servers of their own, bench/sinks.ts): the
 *      bulk drain in the same rounds as pg_recvlogical and Kafka, and live commit → ack at the same
 *      rate, one relay at a time after Kafka's. By default where their servers are installed;
 *      `--sink nats|rabbitmq|nats,rabbitmq` runs only the bulk and live sections (Kafka's
 *      included, the reference), `--sink kafka` none of theirs.
 * The last line printed is one JSON object with every figure.
 *
 *   npm run bench [-- --rows 100000 --txn-rows 100 --txn-backlog 100000 --rounds 3 --live-seconds 60
 *                     --live-runs 5 --live-rate 2000 --ramp-rates 2000,4000,8000 --big-rows 200000 --peer debezium
 *                     --compression none,gzip,snappy,lz4,zstd --sink nats,rabbitmq
 *                     --delivery-modes at-least-once,exactly-once --eos-live-seconds 15 --live-profile
 *                     --relay-from dist|src]
 */
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Admin } from 'kafkajs';
import pg from 'pg';
import { LocalKafkaCluster } from '../src/dev/local-kafka.ts';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';
import { migrate } from '../src/store/migrate.ts';
import { args } from './args.ts';
import { applyAutogroup } from './autogroup.ts';
import { createSlots, currentLsn, dropSlot, insertBulk, insertSingles } from './backlog.ts';
import { clockStepNote, clockSteps } from './clock.ts';
import { compressionArgs, compressionTopic, storedBytes } from './compression.ts';
import { EOS_ARGS, eosLive } from './eos.ts';
import { createFloorTable, FLOOR_INSERT, FLOOR_PUBLICATION, FLOOR_TOPIC, Floors } from './floors.ts';
import { measureLive, measureLiveWith, ramp } from './live.ts';
import { type CpuProfile, stageTimes } from './live-stages.ts';
import { type PeerResult, runDebezium } from './peer.ts';
import { postmasterPid } from './pg-cpu.ts';
import { cpuSeconds, jitQuiet, machineNote, machineTicks, schedSeconds } from './proc.ts';
import { drainRecvlogical, recvlogicalRampStep } from './recvlogical.ts';
import { type Drain, drainRelay, type PgContext, startRelay, useRelayFrom } from './relay.ts';
import {
  type BulkRound,
  type CodecResult,
  type EosRound,
  type LiveRun,
  Report,
  type SinkLive,
  type TxnRound,
} from './report.ts';
import { type BenchSink, relayWindow, type SinkName, startBenchSink } from './sinks.ts';
import { createLogAppendTopic, createTopic } from './topics.ts';
import type { TrivialProducer, TrivialRun } from './trivial-producers.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PUBLICATION = 'outbox_pub';

async function stored(admin: Admin, topic: string): Promise<number> {
  return (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
}

/** The one .cpuprofile node --cpu-prof wrote into `dir` (the live relay's, at its exit). */
function readProfile(dir: string): CpuProfile {
  const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')) : [];
  if (files.length !== 1)
    throw new Error(`--live-profile: expected the relay's one .cpuprofile in ${dir}, found ${files.length}`);
  return JSON.parse(readFileSync(join(dir, files[0]!), 'utf8')) as CpuProfile;
}

/** Every drain starts from the same state: no row moved by a previous one, no progress recorded. */
async function resetStatus(db: pg.Client): Promise<void> {
  await db.query(`UPDATE outbox SET status = 'pending', published_at = NULL WHERE status <> 'pending'`);
  await db.query('DELETE FROM outbox_relay_progress');
}

async function main() {
  const a = args;
  const report = new Report();
  report.note(`machine: ${machineNote()} at start`);
  const autogroup = applyAutogroup(args.autogroup);
  report.note(autogroup.note);
  report.note(
    `bulk backlog: ${a.rows} rows × 500 B, ${a.txnRows} rows per transaction; single-row backlog: ${a.txnBacklog} transactions`,
  );
  const buildSeconds = useRelayFrom(a.relayFrom);
  report.set('relay_from', a.relayFrom);
  report.note(
    a.relayFrom === 'dist'
      ? `relay: the compiled CLI (dist/cli/main.js, built by npm run build in ${buildSeconds.toFixed(1)} s), as the npm package and the image run it`
      : 'relay: src/cli/main.ts (node strips the types as it loads each module: ~30 MB more RSS than the compiled CLI)',
  );
  hideKafkajsTimeoutWarnings();
  // synchronous_commit as shipped (on): a commit flushes its WAL and wakes the walsender at once.
  // The throwaway default (off) leaves commits to the WAL writer's 200 ms rounds, which is what
  // live latency would then measure. fsync stays off: the disk is shared, not ours to measure.
  const server = await startThrowawayPostgres({ settings: { synchronous_commit: 'on' } });
  const db = new pg.Client({ connectionString: server.url });
  await db.connect();
  const brokerDir = join(ROOT, '.tmp', `bench-kafka-${process.pid}`);
  const broker = await LocalKafkaCluster.up({
    dir: brokerDir,
    port: 0,
    heapMb: 1024,
    log: (line) => console.log(line),
  });
  const kafka = broker.client('bench');
  const admin = kafka.admin();
  await admin.connect();
  const kafkaArgs = ['--kafka-brokers', broker.bootstrap.join(',')];
  const cleanup: (() => Promise<unknown>)[] = [];
  const sinks: BenchSink[] = [];
  try {
    for (const name of a.sinks) {
      const s = await startBenchSink(name);
      cleanup.push(s.stop);
      sinks.push(s);
    }
    if (sinks.length > 0)
      report.note(`broker sinks: ${sinks.map((s) => s.name).join(', ')} (throwaway servers)`);
    await migrate(db, { schema: 'public', table: 'outbox', publication: PUBLICATION });
    const benchPid = (await db.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
    const ctx: PgContext = {
      db,
      postmaster: postmasterPid(server.dataDir),
      exclude: [benchPid],
      brokerPid: broker.pidOf(1) ?? undefined,
    };
    report.set('kafka_version', broker.version);
    report.set('pg_version', (await db.query('SHOW server_version')).rows[0].server_version);

    // Backlogs: each drain's slot exists before its backlog; the single-row backlog comes after
    // the bulk one's end LSN and has slots of its own.
    if (a.peer) await db.query(`CREATE PUBLICATION dbz_pub FOR TABLE outbox WITH (publish = 'insert')`);
    const rounds = Array.from({ length: a.rounds }, (_, r) => r);
    await createSlots(db, [
      ...rounds.flatMap((r) => [`b_recv_${r}`, `b_stdout_${r}`, `b_kafka_${r}`]),
      'b_kafka_cold',
      'b_kafka_warm',
      ...(a.eos ? ['b_eos_warm', ...rounds.map((r) => `b_eos_${r}`)] : []),
      ...rounds.flatMap((r) => a.compression.map((codec) => `c_${codec}_${r}`)),
      ...sinks.flatMap((s) => [`b_${s.name}_warm`, ...rounds.map((r) => `b_${s.name}_${r}`)]),
      ...(a.peer ? ['b_debezium', 'b_debezium_tuned'] : []),
    ]);
    let t0 = performance.now();
    await insertBulk(db, 'Bulk', a.rows, a.txnRows);
    const endBulk = await currentLsn(db);
    report.note(
      `bulk backlog inserted in ${((performance.now() - t0) / 1000).toFixed(1)} s (end ${endBulk})`,
    );
    // (None with --sink nats|rabbitmq: undrained slots would only hold WAL.)
    if (a.txnBacklog > 0)
      await createSlots(
        db,
        rounds.flatMap((r) => [`t_recv_${r}`, `t_kafka_${r}`]),
      );
    t0 = performance.now();
    await insertSingles(server.url, 'Txn', a.txnBacklog);
    const endTxn = await currentLsn(db);
    report.note(
      `single-row backlog inserted in ${((performance.now() - t0) / 1000).toFixed(1)} s (end ${endTxn})`,
    );
    for (const topic of ['outbox.event.Bulk', 'outbox.event.Txn', ...a.compression.map(compressionTopic)])
      await createTopic(admin, topic);

    // 1. Bulk drains, in rounds: pg_recvlogical, the relay → stdout and the relay → Kafka one after
    // the other, so each round's ratios compare drains minutes apart at most; the figures are the
    // median round's (one drain alone moved ±10 % with the machine's other work).
    // Into Kafka first twice to warm the broker up: the first drain, into a broker that has served
    // no produce yet, is reported apart ('broker cold': its JIT compiles the produce path meanwhile,
    // 2 – 2.5 × the broker CPU per event of a warm one); the second was still 20 – 25 % slower
    // than the ones after it.
    const kafkaDrain = async (
      slot: string,
      end: string,
      topic: string,
      rows: number,
      extra: string[] = [],
    ): Promise<Drain> => {
      await resetStatus(db);
      const base = await stored(admin, topic);
      const d = await drainRelay(server.url, ctx, slot, end, [...kafkaArgs, ...extra]);
      await dropSlot(db, slot);
      const held = (await stored(admin, topic)) - base;
      if (held < rows) throw new Error(`the broker holds ${held} records of ${topic}, expected ${rows}`);
      return d;
    };
    const kafkaCold = await kafkaDrain('b_kafka_cold', endBulk, 'outbox.event.Bulk', a.rows);
    await kafkaDrain('b_kafka_warm', endBulk, 'outbox.event.Bulk', a.rows);
    // A broker sink's drain: its server's CPU instead of Kafka's; every event must be stored.
    /** Per sink, the most messages of the single-row backlog one drain sent past the bulk end. */
    const pastEnd = new Map<SinkName, number>();
    const sinkDrain = async (s: BenchSink, slot: string): Promise<Drain> => {
      await resetStatus(db);
      await s.takeStored('Bulk');
      const d = await drainRelay(
        server.url,
        { ...ctx, brokerPid: s.brokerPid() },
        slot,
        endBulk,
        s.relayArgs,
      );
      await dropSlot(db, slot);
      const held = await s.takeStored('Bulk');
      // The slot was made before the single-row backlog too, and the relay streams on past the
      // bulk end until it is stopped: what it sent of that backlog is emptied here, or the
      // server keeps it (ElasticMQ held 333,000 such messages by the SQS live pass, its heap full
      // and collecting back to back: docs/benchmarks.md, "Stop 48").
      const past = await s.takeStored('Txn');
      pastEnd.set(s.name, Math.max(pastEnd.get(s.name) ?? 0, past));
      if (held < a.rows) throw new Error(`${s.name} holds ${held} messages of Bulk, expected ${a.rows}`);
      return d;
    };
    // Each broker's ceiling (bench/trivial-producers.ts): its trivial producer, the relay's message size,
    // acknowledgement rule and window, into the same destination; one uncounted run first (a JVM's
    // JIT, a fresh stream).
    const trivialDrain = async (s: BenchSink, f: TrivialProducer): Promise<TrivialRun> => {
      await s.takeStored('Bulk');
      const brokerPid = s.brokerPid();
      const cpu0 = cpuSeconds(f.pid);
      const broker0 = brokerPid ? cpuSeconds(brokerPid) : Number.NaN;
      const seconds = await f.run(a.rows);
      const run = {
        seconds,
        cpuSeconds: cpuSeconds(f.pid) - cpu0,
        brokerCpuSeconds: brokerPid ? cpuSeconds(brokerPid) - broker0 : Number.NaN,
      };
      const held = await s.takeStored('Bulk');
      if (held < a.rows) throw new Error(`${f.label} left ${held} messages of ${a.rows} in ${s.name}`);
      return run;
    };
    const producers = new Map<SinkName, TrivialProducer>();
    for (const s of sinks) {
      await sinkDrain(s, `b_${s.name}_warm`);
      const f = await s.startTrivial(relayWindow(s.name));
      cleanup.push(() => f.stop());
      producers.set(s.name, f);
      report.note(`${s.name}: ${f.label}`);
      await trivialDrain(s, f);
    }
    if (a.eos) await kafkaDrain('b_eos_warm', endBulk, 'outbox.event.Bulk', a.rows, EOS_ARGS);
    const bulk: BulkRound[] = [];
    const eosBulk: EosRound[] = [];
    for (const r of rounds) {
      const recv = await drainRecvlogical(server, ctx, `b_recv_${r}`, endBulk, PUBLICATION);
      if (r === 0) report.note(`pg_recvlogical ${recv.options.join(' ')} (the relay's pgoutput options)`);
      await dropSlot(db, `b_recv_${r}`);
      await resetStatus(db);
      const stdout = await drainRelay(server.url, ctx, `b_stdout_${r}`, endBulk, ['--sink', 'stdout']);
      await dropSlot(db, `b_stdout_${r}`);
      // Exactly-once beside at-least-once, the order alternating by round.
      const eosDrain = () => kafkaDrain(`b_eos_${r}`, endBulk, 'outbox.event.Bulk', a.rows, EOS_ARGS);
      const eosFirst = a.eos && r % 2 === 1 ? await eosDrain() : null;
      const kafka = await kafkaDrain(`b_kafka_${r}`, endBulk, 'outbox.event.Bulk', a.rows);
      const eos = eosFirst ?? (a.eos ? await eosDrain() : null);
      if (eos) eosBulk.push({ alo: kafka, eos });
      const bySink: BulkRound['sinks'] = {};
      const byTrivial: BulkRound['trivial'] = {};
      for (const s of sinks) {
        // The relay and its broker's trivial producer, seconds apart, the order alternating by round.
        const trivial = () => trivialDrain(s, producers.get(s.name)!);
        const trivialFirst = r % 2 === 1 ? await trivial() : null;
        bySink[s.name] = await sinkDrain(s, `b_${s.name}_${r}`);
        byTrivial[s.name] = trivialFirst ?? (await trivial());
      }
      bulk.push({ recv, stdout, kafka, sinks: bySink, trivial: byTrivial });
    }
    report.bulk(a.rows, bulk, kafkaCold);
    if (pastEnd.size > 0)
      report.note(
        `each broker sink's drain was stopped once it had confirmed the bulk end; the most single-row backlog events one drain had sent by its stop (emptied after each, not counted): ${[...pastEnd].map(([n, c]) => `${n} ${c.toLocaleString('en')}`).join(', ')}`,
      );
    if (a.eos) report.eosBulk(a.rows, eosBulk);

    // Compression: the bulk backlog per codec, codecs interleaved within each round.
    if (a.compression.length > 0) {
      const codecs: CodecResult[] = a.compression.map((codec) => ({ codec, drains: [], storedBytes: 0 }));
      for (const r of rounds)
        for (const c of codecs)
          c.drains.push(
            await kafkaDrain(
              `c_${c.codec}_${r}`,
              endBulk,
              compressionTopic(c.codec),
              a.rows,
              compressionArgs(c.codec),
            ),
          );
      for (const c of codecs) c.storedBytes = storedBytes(brokerDir, compressionTopic(c.codec));
      report.compression(a.rows, codecs);
    }

    // 2. Single-row transactions, in rounds as well.
    if (a.txnBacklog > 0) {
      const txn: TxnRound[] = [];
      for (const r of rounds) {
        const recv = await drainRecvlogical(server, ctx, `t_recv_${r}`, endTxn, PUBLICATION);
        await dropSlot(db, `t_recv_${r}`);
        const kafka = await kafkaDrain(`t_kafka_${r}`, endTxn, 'outbox.event.Txn', a.txnBacklog);
        txn.push({ recv, kafka });
      }
      report.txn(a.txnBacklog, txn);
    }

    // 3. The peer, on the same backlogs (its slots were created with ours), then live: with its
    // defaults, then tuned for throughput (DEBEZIUM_TUNING), each on a slot of its own.
    if (a.peer) {
      const peers: PeerResult[] = [];
      for (const tuned of [false, true])
        peers.push(
          await runDebezium({
            dir: join(ROOT, '.tmp', `bench-debezium-${process.pid}${tuned ? '-tuned' : ''}`),
            server,
            db,
            kafka,
            admin,
            bootstrap: broker.bootstrap,
            brokerPid: broker.pidOf(1) ?? undefined,
            slot: tuned ? 'b_debezium_tuned' : 'b_debezium',
            rows: a.rows,
            txnBacklog: a.txnBacklog,
            liveRate: a.liveRate,
            liveSeconds: a.liveSeconds,
            pollIntervalMs: a.debeziumPollMs,
            tuned,
            cleanup,
          }),
        );
      report.peer(peers[0]!, peers[1]!);
    }

    // 4. Live, then the ramp, on one relay streaming from a fresh slot: --live-runs runs, each a
    // relay pass (the PG floor's reader streaming the same commits on a slot of its own) and a
    // Kafka floor pass (bench/floors.ts) in alternating order, each with its own warm-up; a topic
    // per relay pass (its consumer reads it from the beginning).
    if (a.liveSeconds > 0) {
      await createSlots(db, ['live']);
      await createFloorTable(db);
      await createTopic(admin, FLOOR_TOPIC);
      await createTopic(admin, 'outbox.event.Ramp');
      // --live-profile: the relay under node --cpu-prof (written when it exits, kept after the
      // run), its samples of the relay passes charged to stages (bench/live-stages.ts).
      const profileDir = join(ROOT, '.tmp', `live-profile-${process.pid}`);
      const relay = a.liveProfile
        ? startRelay(server.url, 'live', kafkaArgs, undefined, [
            ...(process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? []),
            '--cpu-prof',
            `--cpu-prof-dir=${profileDir}`,
          ])
        : startRelay(server.url, 'live', kafkaArgs);
      const passWindows: [number, number][] = [];
      const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);
      cleanup.push(relay.stop);
      await relay.streaming;
      const brokerPid = broker.pidOf(1) ?? undefined;
      const floors = await Floors.start({
        db,
        url: server.url,
        bootstrap: broker.bootstrap,
        brokerPid,
        slot: 'floor_live',
        rate: a.liveRate,
        seconds: a.liveSeconds,
        tmpDir: brokerDir,
      });
      cleanup.push(() => floors.stop());
      const runs: LiveRun[] = [];
      let achieved = a.liveRate;
      for (let i = 0; i < a.liveRuns; i++) {
        const floorFirst = i % 2 === 1;
        const relayPass = async () => {
          await createLogAppendTopic(admin, `outbox.event.Live${i}`);
          const cpu0 = cpuSeconds(relay.child.pid!);
          const readerCpu0 = floors.readerCpu();
          const sched = await walsenderSched(db, ['live', 'floor_live']);
          const from = monotonicUs();
          const live = await measureLive(
            kafka,
            server.url,
            `outbox.event.Live${i}`,
            `Live${i}`,
            a.liveRate,
            a.liveSeconds,
            jitQuiet([brokerPid ?? 0].filter(Boolean)),
          );
          const cpu = cpuSeconds(relay.child.pid!) - cpu0;
          passWindows.push([from, monotonicUs()]);
          report.note(`live run ${i + 1}, the relay's pass (warm-up included): ${sched.done()}`);
          return { live, cpu, readerCpu0 };
        };
        // The Kafka floor at the rate the relay's writer achieved: this run's when it comes after
        // the relay's pass, the previous run's (the asked rate for the first) when before.
        const kafkaFirst = floorFirst ? await floors.kafkaPass(achieved) : undefined;
        const r = await relayPass();
        achieved = Math.min(a.liveRate, r.live.achievedRate);
        const pgFloor = await floors.pgFloor(i, r.live.events, r.readerCpu0);
        const kafkaFloor = kafkaFirst ?? (await floors.kafkaPass(achieved));
        runs.push({ relay: r.live, relayCpu: r.cpu, floor: { ...pgFloor, ...kafkaFloor }, floorFirst });
        report.note(`live run ${i + 1} of ${a.liveRuns} done (${machineNote()})`);
      }
      await floors.stop();
      report.live(a.liveRate, a.liveSeconds, runs);
      if (a.rampRates.length) {
        const steps = await ramp(
          admin,
          server.url,
          'outbox.event.Ramp',
          'Ramp',
          a.rampRates,
          a.rampSeconds,
          (rate) =>
            recvlogicalRampStep({
              server,
              db,
              slot: `floor_ramp_${rate}`,
              publication: FLOOR_PUBLICATION,
              insert: FLOOR_INSERT,
              rate,
              seconds: a.rampSeconds,
            }),
        );
        report.ramp(steps.relay, steps.alongside, a.rampSeconds);
      }
      await relay.stop();
      if (a.liveProfile) report.liveStages(stageTimes(readProfile(profileDir), passWindows));
      await dropSlot(db, 'live');
      // Each broker sink on a relay of its own, from a fresh slot, at the same rate.
      const sinkRuns: SinkLive[] = [];
      for (const s of sinks) {
        const slot = `live_${s.name}`;
        const type = `Live${s.name[0]!.toUpperCase()}${s.name.slice(1)}`;
        await createSlots(db, [slot]);
        const r = startRelay(server.url, slot, s.relayArgs);
        cleanup.push(r.stop);
        await r.streaming;
        const c0 = cpuSeconds(r.child.pid!);
        const live = await measureLiveWith(s.liveReader(type), server.url, type, a.liveRate, a.liveSeconds);
        sinkRuns.push({ name: s.name, live, relayCpu: cpuSeconds(r.child.pid!) - c0 });
        await r.stop();
        await dropSlot(db, slot);
      }
      report.sinksLive(a.liveRate, a.liveSeconds, sinkRuns);
    }
    if (a.eos && a.eosLiveSeconds > 0)
      report.eosLive(
        a.liveRate,
        a.eosLiveSeconds,
        await eosLive({
          kafka,
          admin,
          url: server.url,
          kafkaArgs,
          rate: a.liveRate,
          seconds: a.eosLiveSeconds,
          createSlot: (slot) => createSlots(db, [slot]),
          dropSlot: (slot) => dropSlot(db, slot),
          cleanup,
        }),
      );

    // 5. One big transaction.
    if (a.bigRows > 0) {
      await createSlots(db, ['big']);
      await createTopic(admin, 'outbox.event.Big');
      await resetStatus(db);
      t0 = performance.now();
      await insertBulk(db, 'Big', a.bigRows, a.bigRows);
      const endBig = await currentLsn(db);
      report.note(
        `one ${a.bigRows}-row transaction inserted in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
      const big = await drainRelay(server.url, ctx, 'big', endBig, kafkaArgs);
      report.big(a.bigRows, big);
    }
    report.note(`machine: ${machineNote()} at the end`);
    const stepped = clockStepNote();
    if (stepped) {
      report.note(stepped);
      report.set('clock_steps', clockSteps().length);
    }
    report.print();
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
    // With BENCH_LIVE_DUMP, the broker's GC log goes beside the dump (the broker's directory goes).
    const gcLog = join(ROOT, '.tmp', `bench-kafka-${process.pid}`, 'node-1', 'gc.log');
    if (process.env.BENCH_LIVE_DUMP && existsSync(gcLog))
      copyFileSync(gcLog, `${process.env.BENCH_LIVE_DUMP}.broker-gc.log`);
    await admin.disconnect().catch(() => {});
    await broker.destroy();
    await db.end();
    await server.stop();
    autogroup.restore();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});

/**
 * Over a live pass: how busy the machine was, and what each slot's walsender spent on a CPU and
 * waiting for one (docs/benchmarks.md, "Stop 47": on a saturated machine the relay's tail was
 * its walsender waiting for a CPU, not the relay).
 */
async function walsenderSched(db: pg.Client, slots: string[]): Promise<{ done(): string }> {
  const { rows } = await db.query<{ slot_name: string; active_pid: number | null }>(
    'SELECT slot_name, active_pid FROM pg_replication_slots WHERE slot_name = ANY($1)',
    [slots],
  );
  const pids = slots.map((slot) => ({
    slot,
    pid: rows.find((r) => r.slot_name === slot)?.active_pid ?? 0,
  }));
  const at0 = pids.map((p) => schedSeconds(p.pid));
  const m0 = machineTicks();
  return {
    done() {
      const m1 = machineTicks();
      const busy = (100 * (m1.busy - m0.busy)) / (m1.total - m0.total);
      const each = pids.map((p, k) => {
        const s = schedSeconds(p.pid);
        const run = s.run - at0[k]!.run;
        const wait = s.wait - at0[k]!.wait;
        return `slot ${p.slot}'s walsender ran ${run.toFixed(1)} s and waited ${wait.toFixed(1)} s for a CPU`;
      });
      return `machine ${busy.toFixed(0)} % busy (${cpus().length} cores); ${each.join('; ')}`;
    },
  };
}
