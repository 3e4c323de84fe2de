#!/usr/bin/env node
// First: V8's heap settings, before any other module runs (heap-tuning.ts says why).
import './heap-tuning.ts';
import { createRequire } from 'node:module';
import pg from 'pg';
import { cutoverTarget, describeCutoverPlan, recordCutover } from '../compat/debezium/cutover.ts';
import { withPresetTable } from '../compat/facts.ts';
import { COMMAND_SUMMARY, COMPLETION_HELP, CONFIG_HELP, commandHelp, USAGE } from '../config/help.ts';
import { type Config, loadConfig, redactUrl, validate } from '../config/load.ts';
import { type Command, optionsFor, SUBCOMMANDS } from '../config/options.ts';
import { formatResolved, resolvedOptions } from '../config/print.ts';
import { UsageError } from '../config/usage-error.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { EXIT, exitCodeFor } from '../exit-codes.ts';
import { startHttpServer } from '../http/server.ts';
import { stuckAfterFor } from '../observability/health.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { OPS_COMMANDS, runOpsCommand } from '../ops/cli.ts';
import { OpsConflictError } from '../ops/input-error.ts';
import { readFailover } from '../replication/failover.ts';
import { checkDatabase, checkPartitions } from '../replication/preflight.ts';
import { keepTimestampMicroseconds } from '../route/timestamptz.ts';
import { createSink } from '../sinks/create.ts';
import { classifyKafkaError } from '../sinks/kafka/kafka-errors.ts';
import { KafkaSink } from '../sinks/kafka/kafka-sink.ts';
import { describeTopicProblems as describeTopics } from '../sinks/kafka/kafka-topics.ts';
import { hideKafkajsTimeoutWarnings } from '../sinks/kafka/kafkajs/warnings.ts';
import type { SchemaRegistrySink } from '../sinks/registry-sink.ts';
import type { Sink } from '../sinks/sink.ts';
import { classifySqsError } from '../sinks/sqs/sqs-errors.ts';
import { migrate } from '../store/migrate.ts';
import { planMigration } from '../store/migrate-plan.ts';
import { progressTable } from '../store/progress-table.ts';
import { hasTimelineColumn, missingTimelineColumn } from '../store/stored-timeline.ts';
import { Relay, toRelayError } from '../supervisor/relay.ts';
import { completionScript, SHELLS, type Shell } from './completion.ts';

/** From package.json, so `--version` is the installed package's version. */
const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

hideKafkajsTimeoutWarnings();
keepTimestampMicroseconds();

async function withClient<T>(c: Config, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: c.databaseUrl, application_name: 'pg-outbox-relay' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * The dead-letter topic is used only when an event dies, which may be weeks after a deployment:
 * say at start when it cannot work (missing with auto-creation off, or refused), not then.
 */
async function checkDeadLetterTopic(sink: KafkaSink, topic: string, log: Logger): Promise<void> {
  const verdict = await sink.checkTopic(topic).catch(() => 'unreachable' as const);
  if (verdict === 'missing' || verdict === 'unauthorized') {
    log.warn(
      { topic, problem: verdict },
      `dead-letter topic ${topic} is not usable (${verdict === 'missing' ? 'it does not exist and --kafka-auto-create-topics is off' : 'the brokers refuse this client access to it'}): events that become dead will stay 'dead' in the outbox but not reach it (outbox_dlq_publish_failed_total, alert OutboxDeadLetterPublishFailing). Create the topic or grant WRITE and DESCRIBE on it.`,
    );
  } else if (verdict === 'ok') log.info({ topic }, 'dead-letter topic checked');
}

/**
 * `check --sink redis`: the server answers with the URL's credentials and takes the dedup script;
 * the sink's start logs its warnings (no AOF, an eviction policy, too few replicas for
 * --redis-wait-replicas). Warnings do not fail the check: they are choices an operator may make.
 */
async function checkRedis(c: Config, log: Logger): Promise<void> {
  // Loaded only here: ioredis is not every command's start-up cost.
  const { RedisSink } = await import('../sinks/redis/redis-sink.ts');
  const { classifyRedisError } = await import('../sinks/redis/redis-errors.ts');
  const sink = new RedisSink(
    { ...c, redisStreamTemplate: '{topic}', redisMaxlen: 0, redisDedupTtlS: 1, redisMaxPending: 1 },
    log,
  );
  try {
    await sink.start();
  } catch (e) {
    throw new RelayError(
      ErrorCode.BROKER_UNAVAILABLE,
      `check could not reach Redis at ${redactUrl(c.redisUrl!)}: ${classifyRedisError(e).message}`,
      {
        cause: e,
        fix: 'check REDIS_URL (host, port, password, database), that Redis is up and reachable from here, and that its user may run SCRIPT, EVALSHA, INFO and CONFIG GET; then run check again.',
      },
    );
  } finally {
    await sink.stop();
  }
}

/**
 * `check` with brokers: the configured topics (--topic-override, --kafka-topic-override) that are
 * missing or have fewer partitions than --kafka-topic-partitions. With --kafka-topics verify a
 * problem fails the check (exit 78), as it would fail `run`; with create, missing topics are
 * what run creates; with off, a warning.
 */
async function checkTopics(c: Config, log: Logger): Promise<void> {
  // The sink only for its admin client: `check` has no producer options (compression, timeouts).
  const sink = new KafkaSink({ ...c, kafkaCompression: 'none', kafkaRequestTimeoutMs: 30_000 }, log);
  const reports = await sink.topicReport().catch((e: unknown) => {
    // `run` retries a broker or credentials problem; a one-shot check names it and gives up (69).
    const { message } = classifyKafkaError(e);
    throw new RelayError(ErrorCode.BROKER_UNAVAILABLE, `check could not query the brokers: ${message}`, {
      cause: e,
      fix: 'check --kafka-brokers, that the brokers are up and reachable from here, and the --kafka-sasl-* / --kafka-oauth-* options; then run check again.',
    });
  });
  const problems = reports.filter((r) => r.problem);
  if (c.kafkaTopics === 'verify' && problems.length > 0)
    throw new RelayError(
      ErrorCode.KAFKA_TOPICS_NOT_READY,
      `--kafka-topics verify: ${describeTopics(problems)}`,
      {
        details: { topics: problems },
      },
    );
  for (const r of reports) {
    if (!r.problem) log.info({ topic: r.topic, partitions: r.partitions }, 'topic checked');
    else if (r.problem === 'missing' && c.kafkaTopics === 'create')
      log.info(
        { topic: r.topic, aggregateType: r.aggregateType },
        'topic missing: run creates it (--kafka-topics create)',
      );
    else log.warn({ topic: r }, describeTopics([r]));
  }
}

/**
 * `check --sink sqs`: a region is known and, for a literal --sqs-queue-url-template, the queue
 * answers (a missing one fails the check, 78; SQS unreachable or credentials refused: 69). A
 * templated URL names queues per event: they are checked at first use.
 */
async function checkSqsQueue(c: Config, log: Logger): Promise<void> {
  // Loaded only here and in createSink: the AWS SDK is not every relay's memory (sinks/create.ts).
  const { SqsSink } = await import('../sinks/sqs/sqs-sink.ts');
  const sink = new SqsSink(c, log);
  const url = c.sqsQueueUrlTemplate!;
  try {
    await sink.start();
    if (url.includes('{')) {
      log.info({ template: url }, 'SQS queue URL is a template: each queue is checked at first use');
      return;
    }
    const q = await sink.checkQueue(url);
    log.info({ queue: url, fifo: q.fifo, maximumMessageSize: q.maximumMessageSize }, 'SQS queue checked');
  } catch (e) {
    const k = classifySqsError(e);
    if (k.class === 'permanent')
      throw new RelayError(ErrorCode.CONFIG_INVALID, `SQS refused the queue ${url}: ${k.message}`, {
        cause: e,
        fix: 'create the queue (aws sqs create-queue; a name ending in .fifo with FifoQueue=true), or fix --sqs-queue-url-template, and grant the relay sqs:SendMessage and sqs:GetQueueAttributes on it.',
      });
    throw new RelayError(ErrorCode.BROKER_UNAVAILABLE, `check could not reach SQS: ${k.message}`, {
      cause: e,
      fix: 'check --sqs-region / --sqs-endpoint, the network, and the AWS credentials the SDK finds (AWS_PROFILE, AWS_ACCESS_KEY_ID…, the instance or task role); then run check again.',
    });
  } finally {
    await sink.stop();
  }
}

/** Runs the relay until SIGTERM/SIGINT (drain, exit 0) or a second signal (exit at once). */
export async function runRelay(c: Config, log: Logger, given?: Sink): Promise<number> {
  const sink = given ?? (await createSink(c, log));
  log.info(
    {
      database: redactUrl(c.databaseUrl),
      sink: sink.name,
      slot: c.slot,
      publication: c.publication,
      table: `${c.schema}.${c.table}`,
    },
    'starting relay',
  );
  if (c.console && !c.http) {
    throw new RelayError(ErrorCode.CONFIG_INVALID, '--console is served by the HTTP server: drop --no-http');
  }
  const relay = new Relay({ config: c, sink, log });
  let signals = 0;
  const onSignal = (sig: string) => {
    signals++;
    if (signals > 1) {
      log.warn({ signal: sig }, 'second signal: exiting without draining');
      process.exit(EXIT.INTERRUPTED);
    }
    log.info({ signal: sig, timeoutMs: c.shutdownTimeoutMs }, 'stopping: draining in-flight events');
    void relay.stop();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  await relay.start();
  // With --kafka-topics create, a missing dead-letter topic is created when the first event dies.
  // A SchemaRegistrySink (not imported here: createSink loads it with a registry) wraps the broker sink.
  const kafka = 'inner' in sink ? (sink as SchemaRegistrySink).inner : sink;
  if (c.deadLetterTopic && kafka instanceof KafkaSink && c.kafkaTopics !== 'create')
    void checkDeadLetterTopic(kafka, c.deadLetterTopic, log);
  // Up until the relay has drained, so /readyz says `stopping` during a graceful stop.
  const http = c.http
    ? await startHttpServer({
        port: c.httpPort,
        host: c.httpHost,
        relay,
        slot: c.slot,
        log,
        stuckAfterMs: stuckAfterFor(c.kafkaRequestTimeoutMs),
        health: { config: c },
        console: c.console ? { config: c } : undefined,
      }).catch(async (e) => {
        await relay.stop();
        throw e;
      })
    : null;
  try {
    await relay.done();
    log.info({ lsn: relay.confirmedLsn }, 'relay stopped');
    return EXIT.OK;
  } finally {
    await http?.close();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (!first) {
    process.stderr.write(`${USAGE}\n`);
    return EXIT.USAGE;
  }
  if (first === 'help' || first === '--help' || first === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return EXIT.OK;
  }
  if (first === '--version' || first === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return EXIT.OK;
  }
  if (first === 'completion') return completionCommand(rest);
  if (first === 'config') return configCommand(rest);
  if (!(first in COMMAND_SUMMARY)) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
  const cmd = first as Command;
  const sub = subcommandOf(cmd, rest);
  const { config: c, help, positionals } = loadConfig(cmd, rest, process.env, { sub });
  if (help) {
    process.stdout.write(commandHelp(cmd, sub));
    return EXIT.OK;
  }
  const log = await createLogger({ level: c.logLevel, format: c.logFormat });
  switch (cmd) {
    case 'migrate': {
      const cutover = cutoverTarget(c);
      const target = withPresetTable(c);
      if (c.dryRun) {
        const lines = await withClient(c, async (client) => [
          ...(await planMigration(client, target)),
          ...(cutover ? await describeCutoverPlan(client, cutover, log) : []),
        ]);
        process.stdout.write(`${lines.join('\n')}\n`);
        return EXIT.OK;
      }
      const applied = await withClient(c, async (client) => {
        const done = await migrate(client, target, log);
        // The cutover from Debezium: after the side tables exist; it refuses a slot that starts
        // after Debezium's position (a slot migrate just created would).
        if (cutover) done.push(await recordCutover(client, cutover, log));
        return done;
      });
      log.info({ applied }, applied.length ? 'migrations applied' : 'database already up to date');
      return EXIT.OK;
    }
    case 'check': {
      const failover = await withClient(c, async (client) => {
        await checkDatabase(client, withPresetTable(c));
        if (c.sink === 'sqs') await checkSqsQueue(c, log);
        await checkPartitions(client, c);
        const progress = progressTable(c.schema, c.table);
        if (!(await hasTimelineColumn(client, progress)))
          log.warn(
            { finding: 'timeline-column-missing', fix: 'outbox-relay migrate' },
            missingTimelineColumn(progress),
          );
        return (await readFailover(client, c.slot, c.standbyUrl)).report;
      });
      // Failover findings never fail the check: the database can feed the relay; they say what a failover would cost.
      for (const f of failover.findings) log.warn({ finding: f.id, fix: f.fix }, f.text);
      if (c.sink === 'kafka' && c.kafkaBrokers.length > 0) await checkTopics(c, log);
      if (c.sink === 'http') await (await import('../sinks/http/preflight.ts')).checkWebhook(c, log);
      if (c.sink === 'redis') await checkRedis(c, log);
      log.info({ database: redactUrl(c.databaseUrl), failover: failover.state }, 'preflight passed');
      return EXIT.OK;
    }
    case 'run':
      return runRelay(c, log);
    case 'demo': {
      const { runDemo } = await import('../dev/demo.ts');
      const { findPostgresBinDir } = await import('../dev/throwaway-postgres.ts');
      try {
        findPostgresBinDir();
      } catch (e) {
        // A missing support program (EX_UNAVAILABLE), not a bug: say what to install, no stack.
        process.stderr.write(`outbox-relay demo: ${errorMessage(e)}\n`);
        return EXIT.UNAVAILABLE;
      }
      return runDemo(c, log, rest);
    }
    case 'status':
    case 'events':
    case 'replay':
    case 'slot':
      return runOpsCommand(cmd, positionals, c, log);
  }
}

/**
 * The subcommand of `events` / `slot`, which comes first (`events list --status dead`); none
 * for the other commands, or for `events --help` (the overview page).
 */
function subcommandOf(cmd: Command, argv: string[]): string | undefined {
  const subs = SUBCOMMANDS[cmd];
  if (!subs) return undefined;
  const [sub] = argv;
  if (sub === undefined || sub.startsWith('-')) {
    if (argv.includes('--help') || argv.includes('-h')) return undefined;
    throw new UsageError(`${cmd} needs a subcommand first: ${subs.join(', ')}`, cmd);
  }
  if (!subs.includes(sub)) {
    throw new UsageError(`unknown ${cmd} subcommand ${JSON.stringify(sub)} (use ${subs.join(', ')})`, cmd);
  }
  return sub;
}

/** `outbox-relay config print|check [COMMAND] [options of COMMAND] [--json]` */
function configCommand(argv: string[]): number {
  const [sub, ...rest] = argv;
  if (sub === '--help' || sub === '-h' || rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(CONFIG_HELP);
    return EXIT.OK;
  }
  if (sub !== 'print' && sub !== 'check') {
    throw new UsageError(
      sub === undefined
        ? 'config needs a subcommand: print or check'
        : `unknown config subcommand ${JSON.stringify(sub)} (use print, check)`,
      'config',
    );
  }
  const named = rest[0] !== undefined && !rest[0].startsWith('-') ? rest[0] : undefined;
  if (named !== undefined && !(named in COMMAND_SUMMARY)) {
    throw new UsageError(`config ${sub}: unknown command ${JSON.stringify(named)}`, 'config');
  }
  const target = (named ?? 'run') as Command;
  const args = named === undefined ? rest : rest.slice(1);
  const json = args.includes('--json') && !optionsFor(target).some((o) => o.flag === 'json');
  // print shows what was resolved even when it would not pass, then validates as check does.
  const loaded = loadConfig(target, json ? args.filter((a) => a !== '--json') : args, process.env, {
    validate: sub === 'check',
  });
  if (sub === 'check') {
    process.stdout.write(`configuration for \`${target}\` is valid\n`);
    return EXIT.OK;
  }
  const rows = resolvedOptions(optionsFor(target), loaded);
  const wantJson = json || (loaded.config as unknown as { json?: boolean }).json === true;
  process.stdout.write(
    wantJson
      ? `${JSON.stringify({ command: target, configFile: loaded.config.config ?? null, options: rows })}\n`
      : `${formatResolved(target, loaded.config.config, rows)}\n`,
  );
  validate(target, loaded.config, optionsFor(target)); // a problem: reported below, exit 78
  return EXIT.OK;
}

/** `outbox-relay completion bash|zsh|fish` */
function completionCommand(argv: string[]): number {
  const [shell] = argv;
  if (shell === '--help' || shell === '-h') {
    process.stdout.write(COMPLETION_HELP);
    return EXIT.OK;
  }
  if (!SHELLS.includes(shell as Shell) || argv.length > 1) {
    throw new UsageError(
      `completion: name the shell, bash, zsh or fish, and nothing else${shell ? ` (got ${argv.map((a) => JSON.stringify(a)).join(' ')})` : ''}`,
      'completion',
    );
  }
  process.stdout.write(completionScript(shell as Shell));
  return EXIT.OK;
}

/** Commands that run once and end: they do not retry, unlike `run` (and the demo's own database). */
const ONE_SHOT: ReadonlySet<string> = new Set(['migrate', 'check', ...OPS_COMMANDS]);

/** What to check when a one-shot command cannot reach the database (errors.ts's text is run's). */
const ONE_SHOT_DATABASE_FIX =
  'this command does not retry. Check the URL (--database-url / DATABASE_URL: host, port, database), ' +
  'that PostgreSQL is up and accepts connections there (`pg_isready -h HOST -p PORT`), that ' +
  'pg_hba.conf admits this host, role and database, and that no firewall, security group or network policy blocks the port; then run the command again.';

/** Prints what went wrong, once, with one hint where to read more; returns the exit code. */
function report(e: unknown, command: string | undefined): number {
  if (e instanceof UsageError) {
    const help = e.help ? `outbox-relay ${e.help} --help` : 'outbox-relay --help';
    process.stderr.write(`outbox-relay: ${e.message}\n  usage: see \`${help}\`\n`);
    return EXIT.USAGE;
  }
  if (e instanceof OpsConflictError) {
    process.stderr.write(`outbox-relay: ${e.message}\n`);
    return EXIT.TEMPFAIL;
  }
  if (isRelayError(e) && e.code === 'CONFIG_INVALID' && !e.cause) {
    process.stderr.write(`outbox-relay: ${e.explanation}\n`);
    return EXIT.CONFIG;
  }
  let re: RelayError = isRelayError(e) ? e : toRelayError(e);
  if (re.code === ErrorCode.DATABASE_UNAVAILABLE && command !== undefined && ONE_SHOT.has(command)) {
    re = new RelayError(re.code, re.message, { cause: re.cause, fix: ONE_SHOT_DATABASE_FIX });
  }
  process.stderr.write(`outbox-relay: [${re.code}] ${re.explanation}\n`);
  if (re.code === 'PROTOCOL_VIOLATION' && e instanceof Error && e.stack) process.stderr.write(`${e.stack}\n`);
  return exitCodeFor(re);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.exitCode = report(e, process.argv[2]);
    if (!isRelayError(e) && !(e instanceof Error)) process.stderr.write(`${errorMessage(e)}\n`);
  },
);
