#!/usr/bin/env node
import pg from 'pg';
import { optionsHelp } from '../config/help.ts';
import { type Config, loadConfig, redactUrl } from '../config/load.ts';
import type { Command } from '../config/options.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { stuckAfterFor } from '../observability/health.ts';
import { startHttpServer } from '../observability/http-server.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { isOpsCommand, runOpsCommand } from '../ops/cli.ts';
import { Relay, toRelayError } from '../relay/relay.ts';
import { checkDatabase } from '../replication/preflight.ts';
import { createSink } from '../sinks/create.ts';
import { hideKafkajsTimeoutWarnings } from '../sinks/kafkajs-warnings.ts';
import { migrate } from '../store/migrate.ts';
import { EXIT, exitCodeFor } from './exit-codes.ts';

const VERSION = '0.1.0';

hideKafkajsTimeoutWarnings();

const USAGE = `outbox-relay — relay transactional-outbox rows from a PostgreSQL logical replication slot to Kafka,
confirming the slot only after the broker acknowledged.

Usage:
  outbox-relay run      [options]   stream the outbox to the sink (Kafka or stdout)
  outbox-relay migrate  [options]   create/upgrade the outbox table and its publication (idempotent)
  outbox-relay check    [options]   preflight only: is the database ready for the relay? (exit 0 = yes)
  outbox-relay demo     [options]   throwaway PostgreSQL + relay + sample events, printed as NDJSON
  outbox-relay status   [options]   slot, publication, events by status; exit 69 when something is wrong
  outbox-relay events   list|count|show|resend|discard …   find and fix failed, dead and parked events
  outbox-relay replay   --since … [options]   re-insert copies of past events so they are published again
  outbox-relay slot     drop [--yes]   drop the replication slot (refused while a relay streams from it)
  outbox-relay <command> --help     options of a command, with defaults and environment variables
  outbox-relay --version

Exit codes: 0 ok, 64 usage, 69 dependency lost for good (e.g. slot invalidated), 70 bug, 78 bad config or database not set up, 130 second signal.
Docs: README.md, docs/configuration.md, docs/operator-cli.md, docs/operations.md`;

const COMMAND_SUMMARY: Record<Command, string> = {
  run: 'Stream outbox inserts from the slot to the sink; confirm the slot only after the broker acknowledged.',
  migrate:
    'Apply sql/ migrations (ledger + advisory lock) and create the publication. Safe to run repeatedly.',
  check: 'Run the preflight checks (wal_level, REPLICATION, table, publication) and exit 0 when all pass.',
  demo: 'Start a throwaway PostgreSQL from the local binaries, migrate it, run the relay with the stdout sink and insert sample events.',
  status:
    'Slot (active?, retained WAL, lag, wal_status), preflight/publication check, events by status, oldest pending/failed age, dead events, parked aggregates. Exit 0 healthy; 69 when the slot is missing, inactive or lost, the publication check fails, or events are dead.',
  events: `Find and fix events of the failure lifecycle (docs/operator-cli.md):
  events list    [filters] [--after-id N] [--limit N]   in id order; page with --after-id
  events count   [filters]                              per status
  events show    <id>                                   every column, payload as JSON/text/hex
  events resend  <id…> | --filter [filters] [--reset-attempts]   failed/dead → failed, due now
  events discard <id…> | --filter [filters] [--yes]     failed/dead → discarded (parked followers are released)
Filters: --status, --since, --until, --aggregate-type, --aggregate-id. Bad input exits 64 and changes nothing.`,
  replay:
    'Re-insert copies of the events in a window (new id, same event_id, headers x-replay-of and x-replayed-at), in original id order and in batches, so the running relay publishes them again. Copies rows with status published or pending unless --status says otherwise. Consumers deduplicate by event_id.',
  slot: 'slot drop: drop the replication slot (--slot) after confirmation (--yes); refused (exit 69) while it is active.',
};

const COMMAND_ARGS: Partial<Record<Command, string>> = {
  events: '<list|count|show|resend|discard> [ids…] [options]',
  slot: 'drop [options]',
};

function commandHelp(cmd: Command): string {
  return `outbox-relay ${cmd} ${COMMAND_ARGS[cmd] ?? '[options]'}\n\n${COMMAND_SUMMARY[cmd]}\n${optionsHelp(cmd)}\n`;
}

async function withClient<T>(c: Config, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: c.databaseUrl, application_name: 'pg-outbox-relay' });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Runs the relay until SIGTERM/SIGINT (drain, exit 0) or a second signal (exit at once). */
export async function runRelay(c: Config, log: Logger, sink = createSink(c, log)): Promise<number> {
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
  // Up until the relay has drained, so /readyz says `stopping` during a graceful stop.
  const http = c.http
    ? await startHttpServer({
        port: c.httpPort,
        host: c.httpHost,
        relay,
        slot: c.slot,
        log,
        stuckAfterMs: stuckAfterFor(c.kafkaRequestTimeoutMs),
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
  if (!first || first === 'help' || first === '--help' || first === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return first ? EXIT.OK : EXIT.USAGE;
  }
  if (first === '--version' || first === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return EXIT.OK;
  }
  if (!(first in COMMAND_SUMMARY)) {
    process.stderr.write(`outbox-relay: unknown command ${JSON.stringify(first)}\n\n${USAGE}\n`);
    return EXIT.USAGE;
  }
  const cmd = first as Command;
  const { config: c, help, positionals } = loadOrUsage(cmd, rest);
  if (help) {
    process.stdout.write(commandHelp(cmd));
    return EXIT.OK;
  }
  const log = await createLogger({ level: c.logLevel, format: c.logFormat });
  switch (cmd) {
    case 'migrate': {
      const applied = await withClient(c, (client) => migrate(client, c, log));
      log.info({ applied }, applied.length ? 'migrations applied' : 'database already up to date');
      return EXIT.OK;
    }
    case 'check': {
      await withClient(c, (client) => checkDatabase(client, c));
      log.info({ database: redactUrl(c.databaseUrl) }, 'preflight passed');
      return EXIT.OK;
    }
    case 'run':
      return runRelay(c, log);
    case 'demo': {
      const { runDemo } = await import('../dev/demo.ts');
      return runDemo(c, log, rest);
    }
    case 'status':
    case 'events':
    case 'replay':
    case 'slot':
      return runOpsCommand(cmd, positionals, c, log);
  }
}

/** Operator commands: a bad flag is bad input (exit 64, usage), not a bad deployment (78). */
function loadOrUsage(cmd: Command, argv: string[]): ReturnType<typeof loadConfig> {
  try {
    return loadConfig(cmd, argv);
  } catch (e) {
    if (isOpsCommand(cmd) && isRelayError(e) && e.code === 'CONFIG_INVALID' && !e.cause) {
      throw new UsageError(`${e.message} (see \`outbox-relay ${cmd} --help\`)`);
    }
    throw e;
  }
}

class UsageError extends Error {}

function report(e: unknown): number {
  if (e instanceof UsageError) {
    process.stderr.write(`outbox-relay: ${e.message}\n`);
    return EXIT.USAGE;
  }
  if (isRelayError(e) && e.code === 'CONFIG_INVALID' && !e.cause) {
    process.stderr.write(`outbox-relay: ${e.explanation}\n`);
    return EXIT.CONFIG;
  }
  const re: RelayError = isRelayError(e) ? e : toRelayError(e);
  process.stderr.write(`outbox-relay: [${re.code}] ${re.explanation}\n`);
  if (re.code === 'PROTOCOL_VIOLATION' && e instanceof Error && e.stack) process.stderr.write(`${e.stack}\n`);
  return exitCodeFor(re);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    process.exitCode = report(e);
    if (!isRelayError(e) && !(e instanceof Error)) process.stderr.write(`${errorMessage(e)}\n`);
  },
);
