/**
 * The peer: Debezium's PostgreSQL connector with its Outbox Event Router on a Kafka Connect
 * standalone worker, all from Maven Central (resolved with `mvn dependency:copy-dependencies`
 * into .cache/debezium/<version>/libs on first use, offline afterwards).
 *
 * Configured for our outbox table (sql/000001_outbox.sql): route by aggregate_type, key
 * aggregate_id (text → StringConverter), value = payload (bytea; binary.handling.mode=bytes and
 * the ByteArrayConverter hand the bytes over as they are, as our `raw` format does), event id
 * event_id (uuid → the `id` header). Its own slot and publication (insert only, like ours),
 * created by the bench before the backlog; snapshot.mode=no_data.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, javaBinary } from '../src/dev/local-kafka.ts';
import { cpuSeconds, peakRssMb, sleep } from './proc.ts';

export const DEBEZIUM_VERSION = '3.6.1.Final';
/** The Connect runtime Debezium 3.6 is built against (4.4.0 is not on Maven Central yet). */
export const CONNECT_VERSION = '4.3.1';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

function pom(): string {
  const dep = (g: string, a: string, v: string) =>
    `<dependency><groupId>${g}</groupId><artifactId>${a}</artifactId><version>${v}</version></dependency>`;
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pg-outbox-relay</groupId><artifactId>debezium-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    ${dep('io.debezium', 'debezium-connector-postgres', DEBEZIUM_VERSION)}
    ${dep('org.apache.kafka', 'connect-runtime', CONNECT_VERSION)}
    ${dep('org.apache.kafka', 'connect-json', CONNECT_VERSION)}
    ${dep('org.apache.kafka', 'connect-file', CONNECT_VERSION)}
    ${dep('org.apache.logging.log4j', 'log4j-slf4j-impl', '2.24.3')}
  </dependencies>
</project>
`;
}

/** The directory of Debezium's and Connect's jars (resolved from Maven Central on first use). */
export function ensureDebeziumJars(log: (line: string) => void): string {
  const base = join(ROOT, '.cache', 'debezium', DEBEZIUM_VERSION);
  const libs = join(base, 'libs');
  if (existsSync(join(base, '.complete'))) return libs;
  mkdirSync(base, { recursive: true });
  writeFileSync(join(base, 'pom.xml'), pom());
  log(
    `debezium: resolving debezium-connector-postgres ${DEBEZIUM_VERSION} + connect-runtime ${CONNECT_VERSION} into ${libs}`,
  );
  const r = spawnSync(
    'mvn',
    ['-B', '-q', '-f', join(base, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (r.error) throw new Error(`mvn is needed to fetch Debezium's jars: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(`mvn could not resolve Debezium's jars:\n${(r.stdout + r.stderr).slice(-3000)}`);
  writeFileSync(join(base, '.complete'), `${new Date().toISOString()}\n`);
  return libs;
}

/**
 * Debezium as its users tune it for throughput (issue 25): the worker's producer batches up to
 * 1 MB and waits 10 ms to fill it, the connector hands Connect up to 20,480 records a poll from a
 * queue of 81,920.
 */
export const DEBEZIUM_TUNING = {
  worker: {
    'producer.batch.size': 1_048_576,
    'producer.linger.ms': 10,
    'producer.max.request.size': 10_485_760,
    'producer.buffer.memory': 268_435_456,
  },
  connector: { 'max.batch.size': 20_480, 'max.queue.size': 81_920 },
} as const;

/** The tuning as printed with the figures. */
export const tuningText = (t: typeof DEBEZIUM_TUNING) =>
  Object.entries({ ...t.worker, ...t.connector })
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');

export type DebeziumOptions = {
  dir: string;
  bootstrap: string[];
  pg: { host: string; port: number; user: string; db: string; password?: string };
  slot: string;
  publication: string;
  pollIntervalMs: number | null;
  /** Settings over the defaults (DEBEZIUM_TUNING); none: Debezium's and Connect's defaults. */
  tuning?: typeof DEBEZIUM_TUNING;
  heapMb?: number;
  /** Connector properties over the bench's (test/integration/debezium-compat.test.ts: its own table, converters, router options). */
  connector?: Record<string, string | number>;
  log: (line: string) => void;
};

export type DebeziumWorker = {
  pid: number;
  /** performance.now() when the connector's task logged that it streams. */
  streaming: Promise<number>;
  logFile: string;
  cpuSeconds: () => number;
  peakRssMb: () => number;
  stop: () => Promise<void>;
};

export async function startDebezium(o: DebeziumOptions): Promise<DebeziumWorker> {
  const libs = ensureDebeziumJars(o.log);
  mkdirSync(o.dir, { recursive: true });
  const rest = await freePort();
  const props = (entries: Record<string, string | number>) =>
    `${Object.entries(entries)
      .map(([k, v]) => `${k}=${v}`)
      .join('\n')}\n`;
  const worker = join(o.dir, 'worker.properties');
  writeFileSync(
    worker,
    props({
      'bootstrap.servers': o.bootstrap.join(','),
      'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
      'value.converter': 'org.apache.kafka.connect.converters.ByteArrayConverter',
      'offset.storage.file.filename': join(o.dir, 'offsets.dat'),
      'offset.flush.interval.ms': 1000,
      listeners: `http://127.0.0.1:${rest}`,
      'plugin.discovery': 'only_scan',
      // The same delivery guarantee as the relay: acks = all, idempotent.
      'producer.acks': 'all',
      'producer.enable.idempotence': 'true',
      ...o.tuning?.worker,
    }),
  );
  const connector = join(o.dir, 'connector.properties');
  const conn: Record<string, string | number> = {
    name: 'bench-debezium-outbox',
    'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
    'tasks.max': 1,
    'plugin.name': 'pgoutput',
    'database.hostname': o.pg.host,
    'database.port': o.pg.port,
    'database.user': o.pg.user,
    'database.password': o.pg.password ?? '',
    'database.dbname': o.pg.db,
    'topic.prefix': 'benchdbz',
    'slot.name': o.slot,
    'publication.name': o.publication,
    'publication.autocreate.mode': 'disabled',
    'snapshot.mode': 'no_data',
    'table.include.list': 'public.outbox',
    'binary.handling.mode': 'bytes',
    'key.converter': 'org.apache.kafka.connect.storage.StringConverter',
    'value.converter': 'org.apache.kafka.connect.converters.ByteArrayConverter',
    transforms: 'outbox',
    'transforms.outbox.type': 'io.debezium.transforms.outbox.EventRouter',
    'transforms.outbox.route.by.field': 'aggregate_type',
    'transforms.outbox.table.field.event.key': 'aggregate_id',
    'transforms.outbox.table.field.event.payload': 'payload',
    'transforms.outbox.table.field.event.id': 'event_id',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Debezium's own placeholder syntax.
    'transforms.outbox.route.topic.replacement': 'outbox.event.${routedByValue}',
  };
  if (o.pollIntervalMs !== null) conn['poll.interval.ms'] = o.pollIntervalMs;
  Object.assign(conn, o.tuning?.connector);
  Object.assign(conn, o.connector ?? {});
  writeFileSync(connector, props(conn));
  const logFile = join(o.dir, 'connect.log');
  const log4j = join(o.dir, 'log4j2.properties');
  writeFileSync(
    log4j,
    [
      'status = error',
      'appender.file.type = File',
      'appender.file.name = file',
      `appender.file.fileName = ${logFile}`,
      'appender.file.layout.type = PatternLayout',
      'appender.file.layout.pattern = [%d] %p %m (%c)%n',
      'rootLogger.level = INFO',
      'rootLogger.appenderRef.file.ref = file',
      '',
    ].join('\n'),
  );
  const out = openSync(join(o.dir, 'connect.out'), 'a');
  const child: ChildProcess = spawn(
    javaBinary(),
    [
      `-Xmx${o.heapMb ?? 1024}m`,
      '-XX:+UseG1GC',
      '-XX:MaxGCPauseMillis=20',
      '-Djava.awt.headless=true',
      `-Dlog4j2.configurationFile=${log4j}`,
      '-cp',
      join(libs, '*'),
      'org.apache.kafka.connect.cli.ConnectStandalone',
      worker,
      connector,
    ],
    { stdio: ['ignore', out, out] },
  );
  const pid = child.pid!;
  o.log(
    `debezium: Kafka Connect ${CONNECT_VERSION} standalone + Debezium ${DEBEZIUM_VERSION} (pid ${pid}), log ${logFile}`,
  );
  let peak = 0;
  const rss = setInterval(() => {
    peak = Math.max(peak, peakRssMb(pid) || 0);
  }, 200);
  const streaming = (async () => {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const text = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
      if (/Starting streaming|Processing messages/.test(text)) return performance.now();
      if (child.exitCode !== null)
        throw new Error(
          `Kafka Connect exited ${child.exitCode}:\n${text.slice(-4000)}${readFileSync(join(o.dir, 'connect.out'), 'utf8').slice(-2000)}`,
        );
      if (/ERROR/.test(text) && /Task threw an uncaught|Failed to start|ConnectException/.test(text))
        throw new Error(`Debezium failed to start:\n${text.slice(-6000)}`);
      if (Date.now() > deadline) throw new Error(`Debezium did not start streaming in 180 s; see ${logFile}`);
      await sleep(100);
    }
  })();
  streaming.catch(() => {});
  return {
    pid,
    streaming,
    logFile,
    cpuSeconds: () => cpuSeconds(pid),
    peakRssMb: () => Math.max(peak, peakRssMb(pid) || 0),
    stop: async () => {
      clearInterval(rss);
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.on('exit', r));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await gone;
      clearTimeout(t);
    },
  };
}
