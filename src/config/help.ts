import { type Command, OPTIONS, type OptionSpec, optionsFor, SUBCOMMANDS } from './options.ts';

export const USAGE = `outbox-relay — relay transactional-outbox rows from a PostgreSQL logical replication slot to Kafka,
confirming the slot only after the broker acknowledged.

Usage:
  outbox-relay run      [options]   stream the outbox to the sink (Kafka, NATS JetStream, RabbitMQ, HTTP webhooks, Redis Streams, Amazon SQS or stdout)
  outbox-relay migrate  [options]   create/upgrade the outbox table and its publication (idempotent)
  outbox-relay check    [options]   preflight only: is the database ready for the relay? (exit 0 = yes)
  outbox-relay demo     [options]   throwaway PostgreSQL + relay + sample events, printed as NDJSON
  outbox-relay status   [options]   slot, publication, events by status; exit 69 when something is wrong
  outbox-relay events   list|count|show|resend|discard …   find and fix failed, dead and parked events
  outbox-relay replay   --since … [options]   re-insert copies of past events so they are published again
  outbox-relay slot     drop [--yes]   drop the replication slot (refused while a relay streams from it)
  outbox-relay config   print|check [COMMAND] [options]   the resolved configuration (secrets masked) / validate it
  outbox-relay completion bash|zsh|fish   shell completion script (e.g. source <(outbox-relay completion bash))
  outbox-relay <command> [subcommand] --help   options of a command, with defaults and environment variables
  outbox-relay --version

Every command reads the same options: flags > config file (--config / OUTBOX_CONFIG, JSON or YAML) > environment > defaults.
Exit codes: 0 ok; 64 usage (bad flag, value or argument; nothing was done); 69 unavailable (status unhealthy,
slot invalidated, a replayed copy dead, PostgreSQL binaries missing for demo); 70 bug; 75 try again (events
resend/discard lost a race and changed nothing; run --delivery exactly-once fenced by a newer relay); 78 configuration
(bad config file or environment, database not set up); 130 second signal.
Docs: README.md, docs/configuration.md, docs/operator-cli.md, docs/operations.md`;

export const COMMAND_SUMMARY: Record<Command, string> = {
  run: 'Stream outbox inserts from the slot to the sink; confirm the slot only after the broker acknowledged.',
  migrate:
    'Apply sql/ migrations (ledger + advisory lock) and create the publication (--narrow-publication: replace a FOR ALL TABLES one by the outbox table alone). With --compat debezium and --debezium-offsets <file> or --debezium-offsets-topic <topic>: record the cutover from Debezium. --dry-run shows what it would do. Safe to run repeatedly.',
  check:
    'Run the preflight checks (wal_level, REPLICATION, table, publication; with --sink kafka the topics; with --sink redis the server, warning when it keeps no AOF, may evict keys or has too few replicas for --redis-wait-replicas) and exit 0 when all pass.',
  demo: 'Start a throwaway PostgreSQL from the local binaries, migrate it, run the relay with the stdout sink and insert sample events.',
  status:
    'Slot (active?, retained WAL, lag, wal_status), preflight/publication check, events by status, oldest pending/failed age, dead events, parked aggregates. Then the verdict (the one /readyz, the console and outbox_health show), each problem with what to do and its topics. Exit 0 healthy or degraded (failed events, events waiting, retained WAL over --slot-critical-bytes); 69 unhealthy: the slot is missing, inactive, lost or about to be, the publication check fails, events are dead, or the relay is not relaying.',
  events: `Find and fix events of the failure lifecycle (docs/operator-cli.md). Subcommands, each with its own --help:
  events list    [filters] [--after-id N] [--limit N]   in id order; page with --after-id
  events count   [filters] [--after-id N]               per status
  events show    <id>                                   every column, payload as JSON/text/hex
  events resend  <id…> | --filter [filters|--all]       failed/dead → failed, due now
  events discard <id…> | --filter [filters|--all]       failed/dead → discarded (parked followers are released)`,
  replay:
    'Re-insert copies of the events in a window (new id, same event_id, headers x-replay-of and x-replayed-at), in original id order and in batches, so the running relay publishes them again. Copies rows with status published or pending unless --status says otherwise, and never copies of copies unless --include-replays. Asks for confirmation above --confirm-above rows (or --yes); --dry-run shows the count; --follow waits until the copies are published. Consumers deduplicate by event_id.',
  slot: 'Subcommands: slot drop — drop the replication slot (--slot) after confirmation (--yes); refused (exit 69) while it is active.',
};

const COMMAND_ARGS: Partial<Record<Command, string>> = {
  events: '<list|count|show|resend|discard> [ids…] [options]',
  slot: 'drop [options]',
};

/** Each subcommand's own page: its arguments and what it does. */
const SUBCOMMAND_HELP: Record<string, { args: string; summary: string }> = {
  'events list': {
    args: '[filters] [--after-id N] [--limit N] [--json]',
    summary:
      'Events matching the filters, in id order (default statuses: failed, dead, parked). Page with --after-id <last id of the previous page>.',
  },
  'events count': {
    args: '[filters] [--json]',
    summary: 'How many events match the filters, per status (default statuses: failed, dead, parked).',
  },
  'events show': {
    args: '<id> [--json]',
    summary: 'Every column of one event, the payload as JSON, text or hex, and its last error.',
  },
  'events resend': {
    args: '<id…> | --filter [filters | --all] [--reset-attempts] [--dry-run] [--yes]',
    summary:
      'failed/dead → failed and due now: the sweeper publishes them on its next round (in strict ordering it then releases the parked followers in order). With --filter, a filter criterion or --all is required; more than --confirm-above rows ask for confirmation (or --yes); --dry-run shows what would change.',
  },
  'events discard': {
    args: '<id…> | --filter [filters | --all] [--dry-run] [--yes]',
    summary:
      'failed/dead → discarded (kept for audit until retention); parked followers of the aggregate are released in order. Always asks for confirmation (or --yes); --dry-run shows what would change.',
  },
  'slot drop': {
    args: '[--slot NAME] [--yes]',
    summary:
      'Drop the replication slot after confirmation (--yes). Refused (exit 69) while a relay streams from it. The next `run` creates a new slot that sees only later events: replay the gap.',
  },
};

export const CONFIG_HELP = `outbox-relay config print [COMMAND] [options of COMMAND] [--json]
outbox-relay config check [COMMAND] [options of COMMAND]

print: the configuration COMMAND (default run) would use — every option with its value and where it
came from (flag, config file, environment, default); secrets masked. The output is valid YAML.
check: load and validate it as COMMAND would; exit 0 when valid, 78 (with the option to fix) when not.
Every command reads the same config file: keys of other commands are accepted and ignored.
`;

export const COMPLETION_HELP = `outbox-relay completion bash|zsh|fish

Print a completion script for the shell. Commands, subcommands and each command's flags complete.
  bash:  source <(outbox-relay completion bash)      (or save it in /etc/bash_completion.d/)
  zsh:   source <(outbox-relay completion zsh)       (after compinit; or save it as _outbox-relay on $fpath)
  fish:  outbox-relay completion fish | source       (or save it as ~/.config/fish/completions/outbox-relay.fish)
`;

function defaultText(s: OptionSpec): string {
  if (s.default === undefined) return '';
  if (Array.isArray(s.default)) return s.default.length ? s.default.join(',') : '';
  if (typeof s.default === 'object') return Object.keys(s.default).length ? JSON.stringify(s.default) : '';
  return String(s.default);
}

function flagText(s: OptionSpec): string {
  if (s.type === 'bool') return s.negatable ? `--${s.flag} / --no-${s.flag}` : `--${s.flag}`;
  const metavar =
    s.type === 'enum'
      ? s.values!.join('|')
      : s.type === 'int'
        ? 'N'
        : s.type === 'map'
          ? 'K=V'
          : s.key === 'config' || s.flag.endsWith('-file')
            ? 'PATH'
            : 'VALUE';
  return `--${s.flag} ${metavar}`;
}

/** A secret's other spelling: its value read from a file (kept out of `ps` and shell history). */
function fileFlagText(s: OptionSpec): string {
  return `--${s.flag}-file PATH`;
}

function fileDoc(s: OptionSpec): string {
  return `Read --${s.flag} from this file (surrounding whitespace trimmed), e.g. a mounted secret.${s.env ? ` [env ${s.env}_FILE]` : ''}`;
}

/** Option reference for one command (or subcommand), grouped, from the schema; only `groups` when given. */
export function optionsHelp(command: Command, sub?: string, groups?: readonly string[]): string {
  const lines: string[] = [];
  let group = '';
  for (const s of optionsFor(command, sub)) {
    if (s.hidden || (groups && !groups.includes(s.group))) continue;
    if (s.group !== group) {
      group = s.group;
      lines.push('', `${group}:`);
    }
    const def = defaultText(s);
    const meta = [s.env ? `env ${s.env}` : '', def ? `default ${def}` : ''].filter(Boolean).join('; ');
    lines.push(`  ${flagText(s)}`, `      ${s.doc}${meta ? ` [${meta}]` : ''}`);
    if (s.secret) lines.push(`  ${fileFlagText(s)}`, `      ${fileDoc(s)}`);
  }
  return lines.join('\n');
}

/** `outbox-relay <command> [sub] --help`. A command with subcommands and none named: the overview. */
export function commandHelp(cmd: Command, sub?: string): string {
  if (sub) {
    const h = SUBCOMMAND_HELP[`${cmd} ${sub}`]!;
    return `outbox-relay ${cmd} ${sub} ${h.args}\n\n${h.summary}\n${optionsHelp(cmd, sub)}\n`;
  }
  if (SUBCOMMANDS[cmd]) {
    const subs = SUBCOMMANDS[cmd]!.map((s) => `outbox-relay ${cmd} ${s} --help`).join('\n  ');
    return `outbox-relay ${cmd} ${COMMAND_ARGS[cmd] ?? ''}\n\n${COMMAND_SUMMARY[cmd]}\n\nOptions of each subcommand:\n  ${subs}\n`;
  }
  const short = SHORT_HELP[cmd];
  if (short) {
    return `outbox-relay ${cmd} [options]\n\n${COMMAND_SUMMARY[cmd]}\n${optionsHelp(cmd, undefined, short.groups)}\n\n${short.note}\n`;
  }
  return `outbox-relay ${cmd} [options]\n\n${COMMAND_SUMMARY[cmd]}\n${optionsHelp(cmd)}\n`;
}

/**
 * Commands whose page lists only the options that matter to them: the demo accepts the relay's
 * tuning options too (it runs the relay), but a reader of `demo --help` wants the demo's own.
 */
const SHORT_HELP: Partial<Record<Command, { groups: readonly string[]; note: string }>> = {
  demo: {
    groups: ['Demo', 'Routing', 'General'],
    note: 'The demo needs no database and no broker: it starts a throwaway PostgreSQL from the local\nserver binaries (OUTBOX_PG_BINDIR to choose them) and prints the events as NDJSON on stdout.\nIt also accepts the tuning options of `outbox-relay run --help` (batching, failures, slot health).',
  },
};

/** docs/configuration.md's table, generated from the schema (a test keeps the doc current). */
export function optionsMarkdown(): string {
  const rows = [
    '| flag | environment | config key | default | commands | meaning |',
    '|---|---|---|---|---|---|',
  ];
  for (const s of OPTIONS) {
    if (s.hidden) continue;
    const esc = (t: string) => t.replace(/\|/g, '\\|');
    const commands = s.commands
      .map((c) =>
        s.subcommands && SUBCOMMANDS[c]
          ? `${c} ${s.subcommands.filter((x) => SUBCOMMANDS[c]!.includes(x)).join('/')}`
          : c,
      )
      .join(', ');
    const flags = s.secret ? `\`${esc(flagText(s))}\` or \`${fileFlagText(s)}\`` : `\`${esc(flagText(s))}\``;
    const envs = s.env ? (s.secret ? `\`${s.env}\` or \`${s.env}_FILE\`` : `\`${s.env}\``) : '';
    rows.push(
      `| ${flags} | ${envs} | \`${s.key}\` | ${defaultText(s) ? `\`${esc(defaultText(s))}\`` : ''} | ${commands} | ${esc(s.doc)} |`,
    );
  }
  return rows.join('\n');
}
