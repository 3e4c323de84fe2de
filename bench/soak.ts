/**
 * `npm run soak` (issue 25): does anything grow while a relay runs for long? On a throwaway
 * PostgreSQL (pg_stat_statements loaded) and one real Kafka broker, a paced writer commits
 * single-row transactions at --rate for --minutes, 1 % of them rolled back (gaps in ids) and 0.1 %
 * of the events for a topic that does not exist (refused, retried by the sweeper, dead-lettered),
 * while the relay runs with short retention (published and dead rows pruned after 60 s) and is
 * restarted once, in the middle (SIGTERM, then a new process on the same slot). Every 10 s a
 * sample: the relay's RSS and heap (its /metrics), lag, the progress record's size (ranges and
 * bytes), the progress statement's mean time (pg_stat_statements), the outbox table's rows and
 * bytes, PostgreSQL's CPU per event (the writer's backends excluded). The samples go to a JSON
 * lines file and an SVG (docs/soak.svg by default); at the end the topic and the dead-letter topic
 * are read back and every committed sequence number is accounted for.
 *
 *   npm run soak -- [--minutes 30] [--rate 2000] [--out .tmp/soak] [--svg docs/soak.svg]
 *                   [--rollback-every 100] [--refuse-every 1000]   (0: none)
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort, LocalKafkaCluster } from '../src/dev/local-kafka.ts';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafka/kafkajs/warnings.ts';
import { migrate } from '../src/store/migrate.ts';
import { createSlots, payload, seqOf } from './backlog.ts';
import { parseFlags, usageError } from './cli-flags.ts';
import { now } from './clock.ts';
import { postmasterPid } from './pg-cpu.ts';
import { childrenOf, machineNote, procStat, reapedChildrenCpu, sleep } from './proc.ts';
import { startRelay } from './relay.ts';
import { renderSoak, type SoakSample } from './soak-plot.ts';
import { growthPer10Min, minuteP99s, p99Drift, secondStats } from './soak-stats.ts';
import { percentile, round } from './stats.ts';
import { createLogAppendTopic, createTopic } from './topics.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const values = parseFlags(
  'npm run soak',
  'the relay for --minutes at --rate commits/s with rollbacks, refused events, retention and one restart; samples every 10 s, an SVG, every event accounted for (docs/benchmarks.md, the soak)',
  {
    minutes: { type: 'string', default: '30' },
    rate: { type: 'string', default: '2000' },
    out: { type: 'string', default: '.tmp/soak' },
    svg: { type: 'string', default: 'docs/soak.svg' },
    'rollback-every': { type: 'string', default: '100' },
    'refuse-every': { type: 'string', default: '1000' },
  },
);
const minutes = Number(values.minutes);
const rate = Number(values.rate);
if (!(minutes > 0) || !(rate > 0))
  usageError('npm run soak', `--minutes and --rate must be positive numbers; got ${minutes}, ${rate}`);
const rollbackEvery = Number(values['rollback-every']);
const refuseEvery = Number(values['refuse-every']);
if (
  !Number.isInteger(rollbackEvery) ||
  !Number.isInteger(refuseEvery) ||
  rollbackEvery < 0 ||
  refuseEvery < 0
)
  usageError('npm run soak', '--rollback-every and --refuse-every take a whole number (0: none)');

const TOPIC = 'outbox.event.Soak';
const DLQ = 'outbox.dlq';
const SAMPLE_MS = 10_000;
/**
 * Sequence numbers rolled back (1 in --rollback-every, 1 %) and refused (1 in --refuse-every,
 * 0.1 %: aggregate type Missing, a topic that does not exist); 0: none.
 */
const rolledBack = (i: number) => rollbackEvery > 0 && i % rollbackEvery === Math.floor(rollbackEvery / 3);
const refused = (i: number) => refuseEvery > 0 && i % refuseEvery === Math.floor(refuseEvery / 2) + 11;

/** The relay's flags: the sweeper and retention at soak speed, the dead-letter topic, /metrics. */
function relayArgs(bootstrap: string[], httpPort: number): string[] {
  return [
    ...['--kafka-brokers', bootstrap.join(',')],
    ...['--http-host', '127.0.0.1', '--http-port', String(httpPort)],
    ...['--max-attempts', '3', '--failure-backoff-ms', '1000'],
    ...['--dead-letter-topic', DLQ],
    ...['--retention-published-ms', '60000', '--retention-dead-ms', '60000', '--prune-interval-ms', '10000'],
  ];
}

/** Prometheus text: the value of an unlabelled metric (NaN if absent). */
export function metricValue(text: string, name: string): number {
  const m = new RegExp(`^${name} ([^\\s]+)`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

async function main() {
  hideKafkajsTimeoutWarnings();
  mkdirSync(values.out!, { recursive: true });
  const samplesFile = join(values.out!, 'samples.jsonl');
  console.log(`soak: ${minutes} min at ${rate} commits/s; ${machineNote()}`);
  const server = await startThrowawayPostgres({
    settings: {
      synchronous_commit: 'on',
      shared_preload_libraries: 'pg_stat_statements',
      // In the server log kept beside the samples: what PostgreSQL did when a minute was slow.
      log_checkpoints: 'on',
      log_autovacuum_min_duration: 0,
      log_line_prefix: '%m [%p] ',
    },
  });
  const db = new pg.Client({ connectionString: server.url, application_name: 'soak-sampler' });
  await db.connect();
  const broker = await LocalKafkaCluster.up({
    dir: join(ROOT, '.tmp', `soak-kafka-${process.pid}`),
    port: 0,
    heapMb: 1024,
  });
  const kafka = broker.client('soak');
  const admin = kafka.admin();
  await admin.connect();
  const stops: (() => Promise<unknown>)[] = [];
  try {
    await migrate(db, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
    const statements = await db
      .query('CREATE EXTENSION pg_stat_statements')
      .then(() => true)
      .catch(() => false);
    await createSlots(db, ['soak']);
    await createLogAppendTopic(admin, TOPIC);
    await createTopic(admin, DLQ, 1);
    const httpPort = await freePort();
    let relay = startRelay(server.url, 'soak', relayArgs(broker.bootstrap, httpPort));
    stops.push(() => relay.stop());
    await relay.streaming;

    const total = Math.round(rate * minutes * 60);
    const commitAt = new Float64Array(total).fill(Number.NaN);
    const appendAt = new Float64Array(total).fill(Number.NaN);
    const dead = new Uint8Array(total);
    let duplicates = 0;
    let stored = 0;
    // The topic's times are the broker's (LogAppendTime): when this reader gets a record changes
    // no latency, so it fetches 64 KB or 250 ms at a time. With 20 ms and any byte it fetched
    // hundreds of times a second: the broker's CPU 39 % → 17 % and its young GCs halved when it
    // stopped (a 4-minute A/B, docs/benchmarks.md) — load of the harness's, not the relay's.
    const consumer = kafka.consumer({
      groupId: `soak-${process.pid}`,
      maxWaitTimeInMs: 250,
      minBytes: 65_536,
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [TOPIC, DLQ], fromBeginning: true });
    await consumer.run({
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          const seq = seqOf(m.value);
          if (seq < 0 || seq >= total) continue;
          if (batch.topic === DLQ) dead[seq] = 1;
          else if (!Number.isNaN(appendAt[seq]!)) duplicates++;
          else {
            appendAt[seq] = Number(m.timestamp);
            stored++;
          }
        }
      },
    });
    stops.push(() => consumer.disconnect());

    // The writer: paced, over enough connections; each one's backend is left out of PG's CPU.
    const conns = Math.max(4, Math.ceil(rate / 1000));
    const clients = await Promise.all(
      Array.from({ length: conns }, async () => {
        const c = new pg.Client({ connectionString: server.url, application_name: 'soak-writer' });
        await c.connect();
        return c;
      }),
    );
    stops.push(() => Promise.all(clients.map((c) => c.end())));
    const start = now() + 20;
    let next = 0;
    let committed = 0;
    const insert = (c: pg.Client, i: number) =>
      c.query({
        name: 'soak',
        text: `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, 'SoakEvent', $3)`,
        // A refused event is an aggregate of its own: in strict ordering, later events of a failed
        // or dead event's aggregate are parked behind it until an operator resolves it.
        values: refused(i)
          ? ['Missing', `missing-${i}`, payload(i)]
          : ['Soak', `agg-${i % 1000}`, payload(i)],
      });
    const writer = Promise.all(
      clients.map(async (c) => {
        // Paced, and over at --minutes of wall time: a writer that fell behind on a busy machine
        // does not stretch the soak (the rate it achieved is reported).
        for (let i = next++; i < total && now() < start + minutes * 60_000; i = next++) {
          const wait = start + (i * 1000) / rate - now();
          if (wait > 1) await sleep(wait);
          if (rolledBack(i)) {
            await c.query('BEGIN');
            await insert(c, i);
            await c.query('ROLLBACK');
            continue;
          }
          await insert(c, i);
          commitAt[i] = now();
          committed++;
        }
      }),
    );

    // The restart, in the middle.
    const restartMinute = minutes / 2;
    const restart = (async () => {
      await sleep(restartMinute * 60_000);
      await relay.stop();
      writeFileSync(join(values.out!, 'relay-1.log'), relay.logs());
      relay = startRelay(server.url, 'soak', relayArgs(broker.bootstrap, httpPort));
      await relay.streaming;
      console.log(`relay restarted at ${restartMinute} min`);
    })();

    // The sampler.
    const postmaster = postmasterPid(server.dataDir);
    const pgCpu = async () => {
      const skip = new Set(
        (
          await db.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE application_name IN ('soak-writer', 'soak-sampler')`,
          )
        ).rows.map((r) => r.pid),
      );
      let cpu = reapedChildrenCpu(postmaster);
      for (const pid of childrenOf(postmaster)) if (!skip.has(pid)) cpu += procStat(pid)?.cpu ?? 0;
      return cpu;
    };
    const statement = async () => {
      if (!statements) return { calls: 0, ms: 0 };
      const r = await db.query<{ calls: string; ms: number }>(
        `SELECT coalesce(sum(calls), 0)::text AS calls, coalesce(sum(total_exec_time), 0) AS ms
           FROM pg_stat_statements WHERE query LIKE 'UPDATE %relay_progress% SET published = published +%'`,
      );
      return { calls: Number(r.rows[0]!.calls), ms: r.rows[0]!.ms };
    };
    const samples: SoakSample[] = [];
    writeFileSync(samplesFile, '');
    let prev = { t: now(), cpu: await pgCpu(), committed: 0, st: await statement() };
    let writing = true;
    const sampler = (async () => {
      while (writing) {
        await sleep(SAMPLE_MS - ((now() - start) % SAMPLE_MS));
        const t = now();
        const metrics = await fetch(`http://127.0.0.1:${httpPort}/metrics`)
          .then((r) => r.text())
          .catch(() => '');
        const progress = await db.query<{ ranges: string; bytes: number }>(
          `SELECT (SELECT count(*) FROM unnest(published))::text AS ranges, pg_column_size(published) AS bytes
             FROM outbox_relay_progress WHERE slot_name = 'soak'`,
        );
        const table = await db.query<{ rows: string; bytes: string }>(
          `SELECT count(*)::text AS rows, pg_total_relation_size('outbox')::text AS bytes FROM outbox`,
        );
        const slot = await db.query<{ lag: string }>(
          `SELECT (pg_current_wal_lsn() - confirmed_flush_lsn)::text AS lag FROM pg_replication_slots WHERE slot_name = 'soak'`,
        );
        const cpu = await pgCpu();
        const st = await statement();
        const events = committed - prev.committed;
        const recent = lastWindowP99(commitAt, appendAt, next, t - 2 * SAMPLE_MS, t - SAMPLE_MS);
        const s: SoakSample = {
          t: (t - start) / 60_000,
          rss_mb: metricValue(metrics, 'process_resident_memory_bytes') / 2 ** 20,
          heap_mb: metricValue(metrics, 'nodejs_heap_size_used_bytes') / 2 ** 20,
          p99_ms: recent,
          // Committed and not yet read back (the reader fetches every ≤ 250 ms: up to ~rate/4 of it).
          lag_events: committed - stored - countDead(dead, next),
          slot_lag_bytes: Number(slot.rows[0]?.lag ?? Number.NaN),
          progress_ranges: Number(progress.rows[0]?.ranges ?? 0),
          progress_bytes: progress.rows[0]?.bytes ?? 0,
          progress_statement_ms:
            st.calls > prev.st.calls ? (st.ms - prev.st.ms) / (st.calls - prev.st.calls) : Number.NaN,
          outbox_rows: Number(table.rows[0]!.rows),
          outbox_mb: Number(table.rows[0]!.bytes) / 2 ** 20,
          // None for a window with few events (the writer's last seconds) or a backend's exit
          // not yet in the postmaster's reaped CPU (the restart): a gap, not a spike.
          pg_cpu_us_per_event:
            events >= (rate * SAMPLE_MS) / 10_000 && cpu >= prev.cpu
              ? ((cpu - prev.cpu) / events) * 1e6
              : Number.NaN,
          committed,
        };
        prev = { t, cpu, committed, st };
        samples.push(s);
        writeFileSync(samplesFile, `${JSON.stringify(s)}\n`, { flag: 'a' });
        console.log(
          `${s.t.toFixed(1)} min: RSS ${s.rss_mb.toFixed(0)} MB, heap ${s.heap_mb.toFixed(0)} MB, p99 ${s.p99_ms.toFixed(1)} ms, lag ${s.lag_events}, progress ${s.progress_ranges} ranges / ${s.progress_bytes} B, statement ${s.progress_statement_ms.toFixed(3)} ms, outbox ${s.outbox_rows} rows, PG ${s.pg_cpu_us_per_event.toFixed(0)} µs/event`,
        );
      }
    })();
    await writer;
    writing = false;
    await restart;
    await sampler;
    const endAt = now();

    // Read back: every commit relayed or dead-lettered (the refused ones), none rolled back. First
    // the relay confirms past the writer's last commit (or 10 minutes pass: not drained), then
    // the consumer and the sweeper's dead-letter copies get a minute.
    const endLsn = (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
    const confirmedPast = async () =>
      (
        await db.query<{ ok: boolean }>(
          `SELECT confirmed_flush_lsn >= $1::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = 'soak'`,
          [endLsn],
        )
      ).rows[0]?.ok === true;
    const wanted = (i: number) => !Number.isNaN(commitAt[i]!);
    const missingNow = () => {
      let n = 0;
      for (let i = 0; i < total; i++)
        if (wanted(i) && (refused(i) ? !dead[i] : Number.isNaN(appendAt[i]!))) n++;
      return n;
    };
    let drained = false;
    for (const deadline = Date.now() + 600_000; Date.now() < deadline; await sleep(5000)) {
      if ((drained = await confirmedPast())) break;
      console.log(`draining: ${missingNow()} committed events not relayed (or dead-lettered) yet`);
    }
    for (const deadline = Date.now() + 60_000; missingNow() > 0 && Date.now() < deadline; ) await sleep(1000);
    writeFileSync(join(values.out!, 'relay-2.log'), relay.logs());
    const statuses = await db.query<{ status: string; n: string }>(
      `SELECT status, count(*)::text AS n FROM outbox_with_status WHERE aggregate_type = 'Missing' GROUP BY 1`,
    );
    let lost = 0;
    let notDeadYet = 0;
    let phantom = 0;
    let deadLettered = 0;
    for (let i = 0; i < total; i++) {
      if (!wanted(i)) {
        if (!Number.isNaN(appendAt[i]!) || dead[i]) phantom++;
        continue;
      }
      if (refused(i)) {
        // Not on the dead-letter topic yet: still 'failed' between retries (soak_refused_rows_by_status).
        if (dead[i]) deadLettered++;
        else notDeadYet++;
      } else if (Number.isNaN(appendAt[i]!)) lost++;
    }
    const perMinute = minuteP99s(commitAt, appendAt, total, start);
    // Per second as well (t: the wall clock, ms): a slow minute's seconds, to set beside the logs.
    const lines = [
      ...perMinute.map((m) => ({ kind: 'minute', ...m })),
      ...secondStats(commitAt, appendAt, total, start).map((sec) => ({
        kind: 'second',
        ...sec,
        t: Math.round(start + sec.second * 1000),
      })),
    ];
    writeFileSync(samplesFile, lines.map((l) => `${JSON.stringify(l)}\n`).join(''), { flag: 'a' });
    const restartMinutes = [Math.floor(restartMinute)];
    // Minute 0 is the relay's start-up (JIT, the broker's first produces) while the writer already
    // commits at full rate: left out like the live bench's warm-up, and reported apart.
    const drift = p99Drift(perMinute, minutes, [0, ...restartMinutes]);
    const withRestart = p99Drift(perMinute, minutes, [0]);
    const rss = samples.map((s) => ({ t: s.t, y: s.rss_mb }));
    const heap = samples.map((s) => ({ t: s.t, y: s.heap_mb }));
    const finite = (xs: number[]) => xs.filter(Number.isFinite);
    const after = samples.filter((s) => s.t >= Math.min(2, minutes / 3));
    const result = {
      soak_minutes: minutes,
      soak_rate: rate,
      soak_rollback_every: rollbackEvery,
      soak_refuse_every: refuseEvery,
      soak_achieved_rate: Math.round(committed / ((endAt - start) / 1000)),
      soak_committed: committed,
      soak_refused: Array.from({ length: total }, (_, i) => i).filter((i) => wanted(i) && refused(i)).length,
      soak_dead_lettered: deadLettered,
      // Drained: the relay confirmed past the last commit; then "lost" (events not refused and
      // not on the topic) is lost. Not drained: what had not arrived 10 minutes after the writer.
      soak_drained: drained,
      soak_lost: lost,
      soak_refused_not_dead_lettered_yet: notDeadYet,
      soak_phantom: phantom,
      soak_duplicates: duplicates,
      soak_rss_slope_mb_per_10min: round(growthPer10Min(rss, minutes, restartMinute), 2),
      soak_heap_slope_mb_per_10min: round(growthPer10Min(heap, minutes, restartMinute), 2),
      soak_rss_mb_last: round(rss.at(-1)?.y ?? Number.NaN),
      soak_p99_drift: round(drift.drift, 2),
      soak_p99_baseline_ms: round(drift.baseline, 2),
      soak_p99_worst_minute_ms: round(drift.worst, 2),
      soak_p99_drift_with_restart: round(withRestart.drift, 2),
      soak_p99_first_minute_ms: round(perMinute.find((m) => m.minute === 0)?.p99 ?? Number.NaN, 2),
      soak_progress_ranges_max: Math.max(0, ...samples.map((s) => s.progress_ranges)),
      soak_progress_bytes_max: Math.max(0, ...samples.map((s) => s.progress_bytes)),
      soak_progress_statement_ms_first_last: [
        round(finite(samples.map((s) => s.progress_statement_ms))[0] ?? Number.NaN, 3),
        round(finite(samples.map((s) => s.progress_statement_ms)).at(-1) ?? Number.NaN, 3),
      ],
      soak_outbox_rows_min_max_after_2min: [
        Math.min(...after.map((s) => s.outbox_rows)),
        Math.max(...after.map((s) => s.outbox_rows)),
      ],
      soak_pg_cpu_us_per_event_first_last: [
        round(finite(samples.map((s) => s.pg_cpu_us_per_event))[0] ?? Number.NaN),
        round(finite(samples.map((s) => s.pg_cpu_us_per_event)).at(-1) ?? Number.NaN),
      ],
      soak_pg_stat_statements: statements,
      soak_refused_rows_by_status: Object.fromEntries(statuses.rows.map((r) => [r.status, Number(r.n)])),
    };
    if (values.svg)
      writeFileSync(
        values.svg,
        renderSoak(samples, perMinute, {
          minutes,
          rate,
          restartMinute,
          rollbackEvery,
          refuseEvery,
          note: `${new Date().toISOString().slice(0, 16)} UTC, ${machineNote().split(';')[0]} at the end`,
        }),
      );
    console.log(`machine: ${machineNote()} at the end`);
    console.log(JSON.stringify(result));
  } finally {
    for (const s of stops.reverse()) await s().catch(() => {});
    await admin.disconnect().catch(() => {});
    // The server log (checkpoints, autovacuum) and the broker's GC log outlive their directories.
    for (const [from, to] of [
      [join(server.dataDir, 'server.log'), 'postgres.log'],
      [join(broker.dir, 'node-1', 'gc.log'), 'broker-gc.log'],
    ] as const)
      try {
        copyFileSync(from, join(values.out!, to));
      } catch {}
    await broker.destroy();
    await db.end();
    await server.stop();
  }
}

/** p99 (ms) of the events committed in [from, to) that were relayed; NaN if none. */
function lastWindowP99(
  commitAt: Float64Array,
  appendAt: Float64Array,
  upTo: number,
  from: number,
  to: number,
): number {
  const lat: number[] = [];
  for (let i = upTo - 1; i >= 0; i--) {
    const c = commitAt[i]!;
    if (c < from) break;
    if (c < to && !Number.isNaN(appendAt[i]!)) lat.push(appendAt[i]! - c);
  }
  return percentile(Float64Array.from(lat).sort(), 99);
}

function countDead(dead: Uint8Array, upTo: number): number {
  let n = 0;
  for (let i = 0; i < upTo; i++) n += dead[i]!;
  return n;
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
