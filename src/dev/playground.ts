import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { type Config, loadConfig } from '../config/load.ts';
import { type HttpServer, startHttpServer } from '../http/server.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { sleep } from '../retry/backoff.ts';
import { DEFAULT_TOPIC_TEMPLATE } from '../route/router.ts';
import { KafkaSink } from '../sinks/kafka/kafka-sink.ts';
import { migrate } from '../store/migrate.ts';
import { qualified } from '../store/sql-ident.ts';
import { Relay } from '../supervisor/relay.ts';
import { insertSampleEvents, SAMPLE_AGGREGATE_TYPES } from './demo.ts';
import { kafkaVersionFromEnv, LocalKafkaCluster } from './local-kafka.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.ts';

/**
 * `npm run playground`: everything the relay needs to publish to Kafka, on this machine, in one
 * command — a throwaway PostgreSQL, a one-node Apache Kafka from its jars (local-kafka.ts), the
 * topics of the sample events and of the README's example, the relay with its console, and a
 * trickle of sample events, one of them to a topic that does not exist (so the console and
 * `status` have a failure to show). It stops everything in reverse order once `stop` resolves
 * (scripts/playground.ts: the first Ctrl-C or SIGTERM); a process exit kills what is left.
 *
 * Everything lives in `dir` (default .tmp/playground): the Kafka cluster, the relay's log, `env`
 * (the DATABASE_URL and KAFKA_BROKERS to export, for the README's commands) and `pid` (one
 * playground per directory).
 */
export interface PlaygroundOptions {
  dir: string;
  /** Lines for the user (stdout). */
  out: (line: string) => void;
  /** One sample event per this many ms. */
  everyMs: number;
  /** Resolves when the playground should stop (the first signal). */
  stop: Promise<void>;
}

/** The Kafka port `npm run kafka` documents; the playground takes it when free, else any. */
export const PLAYGROUND_KAFKA_PORT = 19092;
/** The aggregate type whose topic the playground does not create: its events fail. */
export const FAILING_AGGREGATE_TYPE = 'Shipment';
/** The README's example ("Write events in your own transaction"). */
const EXAMPLE_AGGREGATE_TYPE = 'Account';

const topicOf = (aggregateType: string) => DEFAULT_TOPIC_TEMPLATE.replace('{aggregate_type}', aggregateType);

function portIsFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const srv = createServer();
    srv.once('error', () => done(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => done(true)));
  });
}

/** Refuses a second playground on the same directory (its Kafka and env file would be taken over). */
function claim(dir: string): string {
  const pidFile = join(dir, 'pid');
  if (existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, 'utf8'));
    let alive = false;
    try {
      process.kill(pid, 0);
      alive = pid !== process.pid;
    } catch {
      // gone: a playground that was killed; its leftovers are cleaned below
    }
    if (alive)
      throw new Error(`a playground is already running in ${dir} (pid ${pid}): stop it first (Ctrl-C)`);
  }
  writeFileSync(pidFile, `${process.pid}\n`);
  return pidFile;
}

export async function runPlayground(o: PlaygroundOptions): Promise<void> {
  const dir = resolve(o.dir);
  mkdirSync(dir, { recursive: true });
  const pidFile = claim(dir);
  const kafkaDir = join(dir, 'kafka');
  const envFile = join(dir, 'env');
  const logFile = join(dir, 'relay.log');
  // A playground killed with -9 leaves its broker: stop it, and start from a clean directory.
  await LocalKafkaCluster.down(kafkaDir);
  rmSync(kafkaDir, { recursive: true, force: true });
  const logFd = openSync(logFile, 'w');
  const log = await createLogger({ level: 'info', format: 'json', destination: logFd });

  let pgServer: ThrowawayPostgres | null = null;
  let kafka: LocalKafkaCluster | null = null;
  let relay: Relay | null = null;
  let http: HttpServer | null = null;
  let stopping = false;
  void o.stop.then(() => {
    stopping = true;
  });
  // A second signal exits at once (the caller's choice): the broker runs detached, so it is
  // killed here; throwaway-postgres stops its server on exit by itself.
  const killBroker = () => {
    for (const n of kafka?.nodes ?? []) {
      const pid = kafka!.pidOf(n.id);
      if (pid) process.kill(pid, 'SIGKILL');
    }
  };
  process.on('exit', killBroker);
  try {
    o.out('playground: starting a throwaway PostgreSQL (wal_level=logical)');
    pgServer = await startThrowawayPostgres({ logger: (m) => log.debug(m) });
    if (stopping) return;
    const port = (await portIsFree(PLAYGROUND_KAFKA_PORT)) ? PLAYGROUND_KAFKA_PORT : 0;
    o.out(`playground: starting Apache Kafka ${kafkaVersionFromEnv()} (one node, KRaft)`);
    kafka = await LocalKafkaCluster.up({ dir: kafkaDir, port, log: (line) => o.out(`playground: ${line}`) });
    if (stopping) return;
    const brokers = kafka.bootstrap.join(',');
    const created = [...SAMPLE_AGGREGATE_TYPES, EXAMPLE_AGGREGATE_TYPE].map(topicOf);
    const admin = kafka.client('playground').admin();
    await admin.connect();
    try {
      await admin.createTopics({
        topics: created.map((topic) => ({ topic, numPartitions: 3 })),
        waitForLeaders: true,
      });
    } finally {
      await admin.disconnect();
    }

    const consoleToken = randomBytes(18).toString('base64url');
    const config: Config = {
      ...loadConfig(
        'run',
        [
          ...['--database-url', pgServer.url, '--kafka-brokers', brokers],
          // Dead after three attempts within seconds, so the console shows a dead event soon.
          ...['--max-attempts', '3', '--failure-backoff-ms', '1000', '--sweep-interval-ms', '500'],
        ],
        {},
      ).config,
      console: true,
      consoleToken,
    };
    const db = new pg.Client({ connectionString: pgServer.url });
    await db.connect();
    try {
      await migrate(db, config, log);
      // The table of the README's example, so its transaction runs as written.
      await db.query(
        'CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (42, 100)',
      );
      relay = new Relay({ config, sink: new KafkaSink(config, log), log });
      await relay.start();
      http = await startPlaygroundHttp(relay, config, log);
      writeFileSync(envFile, `export DATABASE_URL=${pgServer.url}\nexport KAFKA_BROKERS=${brokers}\n`);

      const consoleUrl = `http://127.0.0.1:${http.port}/console/`;
      o.out(
        [
          `playground: ready — PostgreSQL ${pgServer.url} (data in ${pgServer.dataDir}), Kafka ${brokers} (pid ${kafka.pidOf(1)})`,
          `  topics:   ${created.join(', ')} (${topicOf(FAILING_AGGREGATE_TYPE)} is not created: its events fail)`,
          `  console:  ${consoleUrl}  (operator token: ${consoleToken})`,
          `  read:     kcat -b ${brokers} -C -t ${topicOf(SAMPLE_AGGREGATE_TYPES[0]!)} -f '%k %s\\n'`,
          `  status:   npm run -s relay -- status --database-url ${pgServer.url}`,
          `  env:      source ${envFile}   # export DATABASE_URL=… KAFKA_BROKERS=… (the README's example)`,
          `  relay log: ${logFile}`,
          `playground: writing a sample event every ${o.everyMs / 1000} s; Ctrl-C stops everything`,
        ].join('\n'),
      );

      const table = qualified(config.schema, config.table);
      for (let i = 0; !stopping; i++) {
        if (relay.state === 'stopped')
          throw new Error(`the relay stopped unexpectedly (its log: ${logFile})`);
        // The third event and every tenth after it: to a topic that does not exist.
        if (i % 10 === 2) await insertFailingEvent(db, table, i);
        else await insertSampleEvents(db, table, i, 1);
        await Promise.race([sleep(o.everyMs), o.stop]);
      }
    } finally {
      await db.end().catch(() => {});
    }
  } finally {
    o.out('playground: stopping (again to force)');
    await http?.close();
    await relay?.stop();
    await relay?.done();
    if (kafka) await kafka.destroy();
    process.off('exit', killBroker);
    await pgServer?.stop();
    rmSync(envFile, { force: true });
    rmSync(pidFile, { force: true });
    closeSync(logFd);
    o.out('playground: stopped (PostgreSQL, Kafka and the relay)');
  }
}

async function insertFailingEvent(db: pg.Client, table: string, seq: number): Promise<void> {
  await db.query(
    `INSERT INTO ${table} (aggregate_type, aggregate_id, event_type, payload) VALUES ($1, $2, 'ShipmentBooked', $3)`,
    [FAILING_AGGREGATE_TYPE, `shipment-${seq}`, Buffer.from(JSON.stringify({ seq }))],
  );
}

/** The usual HTTP port on loopback, or any free one when it is taken. */
async function startPlaygroundHttp(relay: Relay, config: Config, log: Logger): Promise<HttpServer> {
  const start = (port: number) =>
    startHttpServer({
      port,
      host: '127.0.0.1',
      relay,
      slot: config.slot,
      log,
      health: { config },
      console: { config },
    });
  return start(config.httpPort).catch(() => start(0));
}
