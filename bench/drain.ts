/**
 * Drain benchmark (issue: core relay §5). On one throwaway cluster and in one run:
 * a backlog of 100,000 outbox rows (500-byte payloads, 1,000 aggregates, 100 rows per
 * transaction) is drained by
 *   1. pg_recvlogical (the physical limit: raw decoding of the same slot data, to /dev/null),
 *   2. the relay with the stdout sink (to /dev/null),
 *   3. the relay with the Kafka sink into a real Apache Kafka broker (local, from Maven Central jars),
 * each from its own slot created before the backlog. Prints events/s, ratios and peak RSS.
 *
 *   npm run bench [-- --rows 100000 --txn-rows 100]
 */
import { spawn } from 'node:child_process';
import { openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { LocalKafkaCluster } from '../src/dev/local-kafka.ts';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { hideKafkajsTimeoutWarnings } from '../src/sinks/kafkajs-warnings.ts';
import { migrate } from '../src/store/migrate.ts';

const { values } = parseArgs({
  options: { rows: { type: 'string', default: '100000' }, 'txn-rows': { type: 'string', default: '100' } },
});
const ROWS = Number(values.rows);
const TXN_ROWS = Number(values['txn-rows']);
const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../', import.meta.url));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** utime + stime of a process, in seconds (/proc/PID/stat, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function confirmedReached(db: pg.Client, slot: string, lsn: string): Promise<boolean> {
  const r = await db.query<{ ok: boolean }>(
    'SELECT confirmed_flush_lsn >= $2::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = $1',
    [slot, lsn],
  );
  return r.rows[0]?.ok === true;
}

/** Runs the relay CLI on `slot` until the slot is confirmed past `endLsn`; returns seconds and peak RSS. */
async function timeRelay(url: string, db: pg.Client, slot: string, endLsn: string, args: string[]) {
  const devnull = openSync('/dev/null', 'w');
  // BENCH_NODE_ARGS (e.g. --cpu-prof) and BENCH_RELAY_ARGS (relay flags) help profiling.
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const extra = process.env.BENCH_RELAY_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      CLI,
      'run',
      '--database-url',
      url,
      '--slot',
      slot,
      '--log-format',
      'json',
      ...args,
      ...extra,
    ],
    {
      stdio: ['ignore', devnull, 'pipe'],
    },
  );
  let logs = '';
  let streamingAt = 0;
  let cpuAtStreaming = 0;
  child.stderr!.on('data', (d: Buffer) => {
    logs += d.toString();
    if (!streamingAt && logs.includes('streaming from the slot')) {
      streamingAt = performance.now();
      cpuAtStreaming = cpuSeconds(child.pid!);
    }
  });
  const spawnedAt = performance.now();
  let peak = 0;
  const deadline = Date.now() + 600_000;
  while (!(await confirmedReached(db, slot, endLsn))) {
    peak = Math.max(peak, peakRssMb(child.pid!));
    if (child.exitCode !== null) throw new Error(`relay exited ${child.exitCode}:\n${logs.slice(-3000)}`);
    if (Date.now() > deadline) throw new Error('relay did not drain within 10 minutes');
    await sleep(20);
  }
  const end = performance.now();
  const cpu = cpuSeconds(child.pid!) - cpuAtStreaming;
  peak = Math.max(peak, peakRssMb(child.pid!));
  child.kill('SIGTERM');
  await new Promise((r) => child.on('exit', r));
  return {
    seconds: (end - (streamingAt || spawnedAt)) / 1000,
    withStartup: (end - spawnedAt) / 1000,
    peakRssMb: peak,
    cpuSeconds: cpu,
  };
}

async function main() {
  console.log(`backlog: ${ROWS} rows, 500-byte payloads, 1,000 aggregates, ${TXN_ROWS} rows per transaction`);
  const server = await startThrowawayPostgres();
  const db = new pg.Client({ connectionString: server.url });
  await db.connect();
  hideKafkajsTimeoutWarnings();
  const broker = await LocalKafkaCluster.up({
    dir: join(ROOT, '.tmp', `bench-kafka-${process.pid}`),
    port: 0,
    heapMb: 1024,
    log: (line) => console.log(line),
  });
  const admin = broker.client('bench').admin();
  await admin.connect();
  try {
    await migrate(db, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
    for (const s of ['bench_recvlogical', 'bench_stdout', 'bench_kafka']) {
      await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [s]);
    }
    const t0 = performance.now();
    for (let done = 0; done < ROWS; done += TXN_ROWS) {
      const n = Math.min(TXN_ROWS, ROWS - done);
      await db.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
         SELECT 'Bench', 'agg-' || ((g + $1) % 1000), 'BenchEvent', convert_to(lpad((g + $1)::text, 500, 'x'), 'UTF8')
           FROM generate_series(1, $2::int) AS g`,
        [done, n],
      );
    }
    const endLsn = (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
    console.log(`backlog inserted in ${((performance.now() - t0) / 1000).toFixed(1)} s; end LSN ${endLsn}`);

    // 1. pg_recvlogical: raw decode of the same data.
    const r0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const p = spawn(
        join(server.binDir, 'pg_recvlogical'),
        [
          '-d',
          server.url,
          '--slot',
          'bench_recvlogical',
          '--start',
          '--endpos',
          endLsn,
          '--no-loop',
          '-o',
          'proto_version=1',
          '-o',
          'publication_names=outbox_pub',
          '-f',
          '/dev/null',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`pg_recvlogical exited ${code}: ${err}`)),
      );
    });
    const recvSeconds = (performance.now() - r0) / 1000;

    // 2. relay → stdout (/dev/null).
    const stdout = await timeRelay(server.url, db, 'bench_stdout', endLsn, ['--sink', 'stdout']);

    // 3. relay → real Kafka. Reset the rows the stdout run marked, so both runs do the same UPDATE work.
    await db.query(`UPDATE outbox SET status = 'pending', published_at = NULL`);
    await admin.createTopics({
      topics: [{ topic: 'outbox.event.Bench', numPartitions: 3 }],
      waitForLeaders: true,
    });
    const kafka = await timeRelay(server.url, db, 'bench_kafka', endLsn, [
      '--kafka-brokers',
      broker.bootstrap.join(','),
    ]);
    const stored = (await admin.fetchTopicOffsets('outbox.event.Bench')).reduce(
      (n, p) => n + Number(p.high),
      0,
    );
    if (stored < ROWS) throw new Error(`the broker holds ${stored} records, expected ${ROWS}`);

    const rate = (s: number) => Math.round(ROWS / s);
    const rows = [
      ['pg_recvlogical (raw decode, /dev/null)', rate(recvSeconds), recvSeconds, '—', '100 %'],
      [
        'relay → stdout sink (/dev/null)',
        rate(stdout.seconds),
        stdout.seconds,
        stdout.peakRssMb.toFixed(0),
        `${((rate(stdout.seconds) / rate(recvSeconds)) * 100).toFixed(0)} %`,
      ],
      [
        `relay → Apache Kafka ${broker.version} (acks=all)`,
        rate(kafka.seconds),
        kafka.seconds,
        kafka.peakRssMb.toFixed(0),
        `${((rate(kafka.seconds) / rate(recvSeconds)) * 100).toFixed(0)} %`,
      ],
    ] as const;
    console.log('\n| path | events/s | seconds | relay peak RSS (MB) | vs pg_recvlogical |');
    console.log('|---|---:|---:|---:|---:|');
    for (const r of rows)
      console.log(
        `| ${r[0]} | ${r[1].toLocaleString('en')} | ${Number(r[2]).toFixed(2)} | ${r[3]} | ${r[4]} |`,
      );
    console.log(
      `\n(relay seconds are from "streaming from the slot" to confirmed_flush_lsn ≥ end LSN; with process start: stdout ${stdout.withStartup.toFixed(2)} s, kafka ${kafka.withStartup.toFixed(2)} s)`,
    );
    const perEvent = (cpu: number) => `${((cpu / ROWS) * 1e6).toFixed(1)} µs`;
    console.log(
      `relay CPU per event (user + sys, while draining): stdout ${perEvent(stdout.cpuSeconds)}, kafka ${perEvent(kafka.cpuSeconds)}; the relay is one thread, so 1e6 / that is its ceiling in events/s on a free core`,
    );
    console.log(
      JSON.stringify({
        rows: ROWS,
        txn_rows: TXN_ROWS,
        kafka_version: broker.version,
        recvlogical_events_per_s: rate(recvSeconds),
        stdout_events_per_s: rate(stdout.seconds),
        kafka_events_per_s: rate(kafka.seconds),
        stdout_vs_recvlogical_bulk: Number((recvSeconds / stdout.seconds).toFixed(3)),
        kafka_vs_recvlogical_bulk: Number((recvSeconds / kafka.seconds).toFixed(3)),
        kafka_relay_cpu_us_per_event: Number(((kafka.cpuSeconds / ROWS) * 1e6).toFixed(1)),
        stdout_relay_cpu_us_per_event: Number(((stdout.cpuSeconds / ROWS) * 1e6).toFixed(1)),
        kafka_peak_rss_mb: Math.round(kafka.peakRssMb),
      }),
    );
  } finally {
    await admin.disconnect().catch(() => {});
    await broker.destroy();
    await db.end();
    await server.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
