import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { type Config, loadConfig } from '../config/load.ts';
import { type HttpServer, startHttpServer } from '../http/server.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { sleep } from '../retry/backoff.ts';
import { createSink } from '../sinks/create.ts';
import { migrate } from '../store/migrate.ts';
import { qualified } from '../store/sql-ident.ts';
import { Relay } from '../supervisor/relay.ts';
import { insertSampleEvents, SAMPLE_AGGREGATE_TYPES } from './demo.ts';
import {
  cleanUpKafka,
  type Destination,
  type PlaygroundSink,
  startDestination,
  topicTemplateOf,
} from './playground-destinations.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.ts';

/**
 * `npm run playground`: everything the relay needs to publish, on this machine, in one command —
 * a throwaway PostgreSQL, a destination of its own (--sink: a one-node Apache Kafka from its jars
 * by default; a redis-server, a webhook receiver or ElasticMQ: playground-destinations.ts) with
 * the topics of the sample events and of the README's example, the relay with its console, and a
 * trickle of sample events, one of them to a topic that fails (so the console and `status` have a
 * failure and its remedy to show). It stops everything in reverse order once `stop` resolves
 * (scripts/playground.ts: the first Ctrl-C or SIGTERM); a process exit kills what is left.
 *
 * Everything lives in `dir` (default .tmp/playground): the destination's files, the relay's log,
 * `env` (DATABASE_URL and the destination's variables to export, for the README's commands) and
 * `pid` (one playground per directory).
 */
export interface PlaygroundOptions {
  dir: string;
  /** Lines for the user (stdout). */
  out: (line: string) => void;
  /** One sample event per this many ms. */
  everyMs: number;
  /** Resolves when the playground should stop (the first signal). */
  stop: Promise<void>;
  /** Where the events go (default kafka). */
  sink?: PlaygroundSink;
}

export { PLAYGROUND_KAFKA_PORT } from './playground-destinations.ts';

const DESTINATION_NAMES: Readonly<Record<PlaygroundSink, string>> = {
  kafka: 'Kafka',
  redis: 'Redis',
  http: 'the webhook receiver',
  sqs: 'ElasticMQ',
};
/** The aggregate type whose topic the playground does not create: its events fail. */
export const FAILING_AGGREGATE_TYPE = 'Shipment';
/** The README's example ("Write events in your own transaction"). */
const EXAMPLE_AGGREGATE_TYPE = 'Account';

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
  const sink = o.sink ?? 'kafka';
  const topicOf = (aggregateType: string) => topicTemplateOf(sink).replace('{aggregate_type}', aggregateType);
  const dir = resolve(o.dir);
  mkdirSync(dir, { recursive: true });
  const pidFile = claim(dir);
  const envFile = join(dir, 'env');
  const logFile = join(dir, 'relay.log');
  // A playground killed with -9 leaves its broker: stop it, and start from a clean directory.
  await cleanUpKafka(dir);
  rmSync(join(dir, 'kafka'), { recursive: true, force: true });
  const logFd = openSync(logFile, 'w');
  const log = await createLogger({ level: 'info', format: 'json', destination: logFd });

  let pgServer: ThrowawayPostgres | null = null;
  let destination: Destination | null = null;
  let watching: Promise<void> = Promise.resolve();
  let relay: Relay | null = null;
  let http: HttpServer | null = null;
  let stopping = false;
  void o.stop.then(() => {
    stopping = true;
  });
  // A second signal exits at once (the caller's choice): a destination's server runs as a process
  // of its own, so it is killed here; throwaway-postgres stops its server on exit by itself.
  const killDestination = () => destination?.kill();
  process.on('exit', killDestination);
  try {
    o.out('playground: starting a throwaway PostgreSQL (wal_level=logical)');
    pgServer = await startThrowawayPostgres({ logger: (m) => log.debug(m) });
    if (stopping) return;
    const created = [...SAMPLE_AGGREGATE_TYPES, EXAMPLE_AGGREGATE_TYPE].map(topicOf);
    destination = await startDestination(sink, {
      dir,
      out: o.out,
      topics: created,
      failing: topicOf(FAILING_AGGREGATE_TYPE),
      stop: o.stop,
      portIsFree,
    });
    if (stopping) return;

    const consoleToken = randomBytes(18).toString('base64url');
    const config: Config = {
      ...loadConfig(
        'run',
        [
          ...['--database-url', pgServer.url, ...destination.relayArgs],
          ...['--topic-template', topicTemplateOf(sink)],
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
      relay = new Relay({ config, sink: await createSink(config, log), log });
      await relay.start();
      http = await startPlaygroundHttp(relay, config, log);
      writeFileSync(envFile, [`export DATABASE_URL=${pgServer.url}`, ...destination.env, ''].join('\n'));
      watching = destination.watch();

      const consoleUrl = `http://127.0.0.1:${http.port}/console/`;
      o.out(
        [
          `playground: ready — PostgreSQL ${pgServer.url} (data in ${pgServer.dataDir}), ${destination.summary}`,
          ...destination.lines,
          `  console:  ${consoleUrl}  (operator token: ${consoleToken})`,
          `  status:   npm run -s relay -- status --database-url ${pgServer.url}${sink === 'sqs' ? ` --topic-template '${topicTemplateOf(sink)}'` : ''}`,
          `  env:      source ${envFile}   # export DATABASE_URL=…${sink === 'kafka' ? ' KAFKA_BROKERS=…' : ''} (the README's example)`,
          `  relay log: ${logFile}`,
          `playground: writing a sample event every ${o.everyMs / 1000} s; Ctrl-C stops everything`,
        ].join('\n'),
      );

      const table = qualified(config.schema, config.table);
      for (let i = 0; !stopping; i++) {
        if (relay.state === 'stopped')
          throw new Error(`the relay stopped unexpectedly (its log: ${logFile})`);
        // The third event and every tenth after it: to a topic that fails.
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
    await watching;
    await destination?.stop();
    process.off('exit', killDestination);
    await pgServer?.stop();
    rmSync(envFile, { force: true });
    rmSync(pidFile, { force: true });
    closeSync(logFd);
    o.out(`playground: stopped (PostgreSQL, ${DESTINATION_NAMES[sink]} and the relay)`);
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
