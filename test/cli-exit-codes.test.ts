/**
 * The CLI's contract, over every command: exit 64 for a bad command line (with one hint naming
 * that command's help), 78 for bad configuration (with a fix naming that command's help), help
 * pages per (sub)command with only their options, `config print|check`, shell completion,
 * NO_COLOR, and the demo's error without PostgreSQL binaries.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMAND_SUMMARY } from '../src/config/help.ts';
import { type Command, flagSpellings, optionsFor, SUBCOMMANDS } from '../src/config/options.ts';
import { EXIT } from '../src/exit-codes.ts';
import { useTestDatabase } from './support/postgres.ts';

const CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'cli-exit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    env: { ...process.env, LOG_FORMAT: 'json', DATABASE_URL: '', OUTBOX_CONFIG: '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** Every command as a user types it: `events list`, `slot drop`, `config print`, `completion bash`. */
const COMMANDS: string[][] = [
  ...(Object.keys(COMMAND_SUMMARY) as Command[]).flatMap((c) =>
    SUBCOMMANDS[c] ? SUBCOMMANDS[c]!.map((s) => [c, s]) : [[c]],
  ),
  ['config', 'print'],
  ['config', 'check'],
  ['completion', 'bash'],
];
/** [name, argv] pairs, so a test's name reads `events list`, not `run undefined`. */
const NAMED = COMMANDS.map((c) => [c.join(' '), c] as [string, string[]]);
/**
 * The help page a usage error of that command points at: its own; for `config print|check`, the
 * page of the command whose options it resolves (run by default).
 */
const helpOf = (cmd: string[]) =>
  cmd[0] === 'config' ? 'run' : cmd[0] === 'completion' ? cmd[0] : cmd.join(' ');

describe('exit codes, over every command', () => {
  it('lists every command', () => {
    expect(COMMANDS.map((c) => c.join(' '))).toEqual(
      expect.arrayContaining([
        'run',
        'migrate',
        'check',
        'demo',
        'status',
        'events list',
        'events discard',
        'replay',
        'slot drop',
      ]),
    );
  });

  it.each(NAMED)('%s: an unknown flag exits 64 with one hint at its own --help', (_name, cmd) => {
    const r = cli([...cmd, '--no-such-flag']);
    expect(r.code, r.err).toBe(EXIT.USAGE);
    expect(r.err).toMatch(
      cmd[0] === 'completion' ? /bash, zsh or fish, and nothing else/ : /Unknown option '--no-such-flag'/,
    );
    const hints = r.err.match(/see `outbox-relay [^`]*--help`/g) ?? [];
    expect(hints).toEqual([`see \`outbox-relay ${helpOf(cmd)} --help\``]);
    expect(r.err).not.toMatch(/\n\s+at /); // no stack
  });

  it.each(NAMED.filter(([, c]) => c[0] !== 'completion'))(
    '%s: a bad config file value exits 78 with a fix at its own --help',
    (_name, cmd) => {
      const file = join(dir, `bad-${cmd.join('-')}.yaml`);
      writeFileSync(file, 'databaseUrl: postgres://relay@db/app\nslot: Not-A-Slot\n');
      const r = cli([...cmd, '--config', file]);
      expect(r.code, r.err).toBe(EXIT.CONFIG);
      expect(r.err).toMatch(/--slot .*not a valid slot name/);
      expect(r.err.match(/fix: .*/g)).toEqual([
        `fix: see \`outbox-relay ${helpOf(cmd)} --help\` or docs/configuration.md`,
      ]);
    },
  );

  it('an unknown command or subcommand, and a missing one, exit 64', () => {
    expect(cli(['frobnicate']).code).toBe(EXIT.USAGE);
    expect(cli([]).code).toBe(EXIT.USAGE);
    for (const args of [
      ['events'],
      ['events', 'purge'],
      ['slot'],
      ['config'],
      ['config', 'show'],
      ['completion', 'tcsh'],
    ]) {
      const r = cli(args);
      expect(r.code, args.join(' ')).toBe(EXIT.USAGE);
      expect(r.err.match(/usage: see/g), args.join(' ')).toHaveLength(1);
    }
  });

  it('a bad flag value is usage (64); the same value from the environment is configuration (78)', () => {
    expect(cli(['run', '--batch-size', 'lots']).code).toBe(EXIT.USAGE);
    const env = cli(['run', '--database-url', 'postgres://db/app', '--kafka-brokers', 'k:1'], {
      OUTBOX_BATCH_SIZE: 'lots',
    });
    expect(env.code).toBe(EXIT.CONFIG);
    expect(env.err).toMatch(/OUTBOX_BATCH_SIZE \(environment\): expected a whole number/);
  });

  it('switches have no --no- form: --no-yes, --no-dry-run, --no-json are unknown options', () => {
    for (const [cmd, flag] of [
      [['events', 'discard'], '--no-yes'],
      [['replay'], '--no-dry-run'],
      [['status'], '--no-json'],
    ] as const) {
      const r = cli([...cmd, flag]);
      expect(r.code, flag).toBe(EXIT.USAGE);
      expect(r.err).toContain(`Unknown option '${flag}'`);
    }
    expect(cli(['run', '--help']).out).toContain('--prune / --no-prune');
    expect(cli(['events', 'discard', '--help']).out).not.toContain('--no-yes');
  });
});

describe('help', () => {
  it.each(NAMED.filter(([, c]) => c[0] !== 'completion'))('%s --help exits 0', (_name, cmd) => {
    const r = cli([...cmd, '--help']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toContain(`outbox-relay ${cmd.join(' ')}`);
  });

  it('each events subcommand has its own page with only its options', () => {
    for (const sub of SUBCOMMANDS.events!) {
      const page = cli(['events', sub, '--help']).out;
      const flags = new Set([...page.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1]));
      expect([...flags].sort(), sub).toEqual(
        optionsFor('events', sub)
          .flatMap((o) => (o.secret ? [o.flag, `${o.flag}-file`] : [o.flag]))
          .sort(),
      );
    }
    expect(cli(['events', 'show', '--help']).out).not.toContain('--status');
    expect(cli(['events', 'list', '--help']).out).not.toContain('--yes');
    const overview = cli(['events', '--help']);
    expect(overview.code).toBe(EXIT.OK);
    expect(overview.out).toContain('outbox-relay events discard --help');
  });

  it.each(NAMED.filter(([, c]) => c[0] !== 'completion' && c[0] !== 'config'))(
    '%s --help lists every flag the command accepts, and no removed one',
    (_name, cmd) => {
      const page = cli([...cmd, '--help']).out;
      const shown = new Set(
        [...page.matchAll(/^ {2}--([a-z-]+)(?: \/ --(no-[a-z-]+))?/gm)].flatMap((m) =>
          m[2] ? [m[1]!, m[2]] : [m[1]!],
        ),
      );
      const accepted = optionsFor(cmd[0] as Command, cmd[1])
        .filter((o) => !o.hidden)
        .flatMap(flagSpellings);
      // demo's page is short: its own, routing and general options (the rest is run's page).
      const expected = cmd[0] === 'demo' ? accepted.filter((f) => shown.has(f)) : accepted;
      expect([...shown].sort()).toEqual([...new Set(expected)].sort());
      expect(page).not.toContain('mark-published');
    },
  );

  it('run --help shows the *-file secret flags; --mark-published is gone from it but still explains itself', () => {
    const page = cli(['run', '--help']).out;
    for (const f of [
      '--database-url-file PATH',
      '--kafka-sasl-password-file PATH',
      '--console-token-file PATH',
    ]) {
      expect(page).toContain(f);
    }
    expect(page).toContain('[env KAFKA_SASL_PASSWORD_FILE]');
    const used = cli(['run', '--no-mark-published', '--kafka-brokers', 'k:1'], {
      DATABASE_URL: 'postgres://relay@db/app',
    });
    expect(used.code).toBe(EXIT.CONFIG);
    expect(used.err).toMatch(/--mark-published .*was removed: .*drop the option/);
    expect(cli(['config', 'print']).out).not.toMatch(/markPublished/);
  });

  it('demo --help is short: the demo’s own options, and where the rest are', () => {
    const r = cli(['demo', '--help']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out.split('\n').length).toBeLessThan(40);
    expect(r.out).toContain('--events N');
    expect(r.out).toContain('--follow');
    expect(r.out).not.toContain('--batch-size');
    expect(r.out).toContain('outbox-relay run --help');
  });

  it('the top-level help lists config and completion and the exit codes', () => {
    const r = cli(['--help']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/config\s+print\|check/);
    expect(r.out).toMatch(/completion bash\|zsh\|fish/);
    expect(r.out).toMatch(/64 usage.*\n?.*78 configuration/s);
  });
});

describe('the command line is checked before anything connects', () => {
  // A database that is down: nothing listens on port 1.
  const down = { DATABASE_URL: 'postgres://relay@127.0.0.1:1/app' };

  it.each([
    ['events show without an id', ['events', 'show'], /events show takes exactly one event id/],
    ['--since yesterday', ['events', 'list', '--since', 'yesterday'], /"yesterday" is not a time/],
    ['--status zombie', ['events', 'list', '--status', 'zombie'], /unknown status "zombie"/],
    [
      '--status published for resend',
      ['events', 'resend', '--filter', '--status', 'published'],
      /not allowed here/,
    ],
    ['resend with neither ids nor --filter', ['events', 'resend'], /give event ids, or --filter/],
    ['an id that is not a number', ['events', 'discard', 'abc'], /"abc" is not an event id/],
    ['replay without --since', ['replay'], /replay needs --since/],
    ['replay --until before --since', ['replay', '--since', '1h', '--until', '2h'], /must be before --until/],
    ['slot drop with an argument', ['slot', 'drop', 'other'], /slot drop takes no arguments/],
    ['status with an argument', ['status', 'now'], /status takes no arguments, got now/],
    ['run with a stray word', ['run', 'stdout'], /run takes no arguments, got stdout/],
    ['migrate with a stray word', ['migrate', 'up'], /migrate takes no arguments, got up/],
  ])('%s: exit 64 with the database down', (_name, args, message) => {
    const r = cli(args, down);
    expect(r.code, r.err).toBe(EXIT.USAGE);
    expect(r.err).toMatch(message);
    expect(r.err).not.toMatch(/ECONNREFUSED|DATABASE_UNAVAILABLE/);
  });

  it.each([['status'], ['check'], ['migrate'], ['events', 'list'], ['replay', '--since', '1h', '--dry-run']])(
    '%s on an unreachable database: exit 69, saying what to check (it does not retry)',
    (...args) => {
      const r = cli(args, down);
      expect(r.code, r.err).toBe(EXIT.UNAVAILABLE);
      expect(r.err).toMatch(/\[DATABASE_UNAVAILABLE\] database unavailable: connect ECONNREFUSED/);
      expect(r.err).toMatch(/fix: this command does not retry/);
      expect(r.err).toMatch(/--database-url \/ DATABASE_URL/);
      expect(r.err).toMatch(/pg_hba\.conf/);
      expect(r.err).not.toMatch(/retries by itself/);
    },
  );

  it('--kafka-brokers "not a host" is a bad command line (64); from the environment, configuration (78)', () => {
    const flag = cli(['run', '--kafka-brokers', 'not a host'], down);
    expect(flag.code, flag.err).toBe(EXIT.USAGE);
    expect(flag.err).toMatch(/--kafka-brokers \(flag\): "not a host" is not host:port/);
    expect(flag.err).toContain('see `outbox-relay run --help`');
    const env = cli(['run'], { ...down, KAFKA_BROKERS: 'not a host' });
    expect(env.code, env.err).toBe(EXIT.CONFIG);
    expect(env.err).toMatch(/--kafka-brokers \/ KAFKA_BROKERS: "not a host" is not host:port/);
    // Other values that are wrong on their own, as flags: 64.
    expect(cli(['status', '--slot', 'Not-A-Slot'], down).code).toBe(EXIT.USAGE);
    expect(cli(['status', '--database-url', 'mysql://db/app']).code).toBe(EXIT.USAGE);
  });

  it('a misspelled flag gets a suggestion; a flag of another command says which takes it', () => {
    const typo = cli(['run', '--kafka-broker', 'k:1'], down);
    expect(typo.code).toBe(EXIT.USAGE);
    expect(typo.err).toMatch(/Unknown option '--kafka-broker' \(did you mean --kafka-brokers\?\)/);
    expect(cli(['events', 'list', '--stauts', 'dead'], down).err).toMatch(/did you mean --status\?/);
    const other = cli(['status', '--kafka-brokers', 'k:1'], down);
    expect(other.code).toBe(EXIT.USAGE);
    expect(other.err).toMatch(
      /Unknown option '--kafka-brokers' \(not an option of status; run, check, migrate take it\)/,
    );
    // Nothing near: no guess.
    expect(cli(['run', '--frobnicate'], down).err).not.toMatch(/did you mean/);
  });
});

describe('config print / config check', () => {
  const file = join(dir, 'relay.yaml');
  writeFileSync(
    file,
    [
      'databaseUrl: postgres://relay:hunter2@db:5432/app',
      'kafkaBrokers: [k1:9092, k2:9092]',
      'kafkaSaslMechanism: plain',
      'kafkaSaslUsername: relay',
      'kafkaSaslPassword: s3cret-pw',
      'since: 2h # replay’s: accepted, ignored by run',
      '',
    ].join('\n'),
  );

  it('prints the resolved configuration with sources, secrets masked, as YAML', () => {
    const r = cli(['config', 'print', '--config', file, '--batch-size', '7'], { OUTBOX_LINGER_MS: '9' });
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).not.toContain('hunter2');
    expect(r.out).not.toContain('s3cret-pw');
    expect(r.out).toMatch(/^databaseUrl: "postgres:\/\/relay:\*\*\*@db:5432\/app"\s+# config file$/m);
    expect(r.out).toMatch(/^kafkaSaslPassword: "\*\*\*"\s+# config file$/m);
    expect(r.out).toMatch(/^batchSize: 7\s+# flag$/m);
    expect(r.out).toMatch(/^lingerMs: 9\s+# environment OUTBOX_LINGER_MS$/m);
    expect(r.out).toMatch(/^kafkaBrokers: \["k1:9092","k2:9092"\]\s+# config file$/m);
    expect(r.out).not.toMatch(/^since:/m);
    const json = JSON.parse(cli(['config', 'print', 'migrate', '--config', file, '--json']).out) as {
      command: string;
      options: { key: string; source: string }[];
    };
    expect(json.command).toBe('migrate');
    // migrate reads the Connect offsets topic with the relay's Kafka options; it sends nothing.
    expect(json.options.map((o) => o.key)).toContain('kafkaBrokers');
    expect(json.options.map((o) => o.key)).not.toContain('batchSize');
  });

  it('checks as the named command would: 0 when valid, 78 naming the option when not', () => {
    const ok = cli(['config', 'check', '--config', file]);
    expect(ok.code, ok.err).toBe(EXIT.OK);
    expect(cli(['config', 'check', 'migrate', '--config', file]).code).toBe(EXIT.OK);
    // A bad value from the config file is configuration (78); the same value as a flag is a bad
    // command line (64), as everywhere.
    const badFile = join(dir, 'bad-brokers.yaml');
    writeFileSync(badFile, 'databaseUrl: postgres://relay@db/app\nkafkaBrokers: [nope]\n');
    const bad = cli(['config', 'check', '--config', badFile]);
    expect(bad.code).toBe(EXIT.CONFIG);
    expect(bad.err).toMatch(/--kafka-brokers .*"nope" is not host:port/);
    const badFlag = cli(['config', 'check', '--config', file, '--kafka-brokers', 'nope']);
    expect(badFlag.code).toBe(EXIT.USAGE);
    expect(badFlag.err).toMatch(/--kafka-brokers \(flag\): "nope" is not host:port/);
    const typo = join(dir, 'typo.json');
    writeFileSync(typo, JSON.stringify({ databaseUrl: 'postgres://db/app', kafkaBroker: 'k:1' }));
    const t = cli(['config', 'check', 'status', '--config', typo]);
    expect(t.code).toBe(EXIT.CONFIG);
    expect(t.err).toMatch(/unknown option "kafkaBroker" \(did you mean "kafkaBrokers"\?\)/);
  });
});

describe('completion', () => {
  const bashComplete = (line: string[]): string[] => {
    const script = cli(['completion', 'bash']).out;
    const words = line.map((w) => `'${w}'`).join(' ');
    const r = spawnSync(
      'bash',
      [
        '-c',
        `${script}\nCOMP_WORDS=(${words}); COMP_CWORD=${line.length - 1}; _outbox_relay; printf '%s\\n' "\${COMPREPLY[@]}"`,
      ],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    return r.stdout.split('\n').filter(Boolean);
  };

  it('bash completes commands, subcommands, each subcommand’s flags and enum values', () => {
    expect(bashComplete(['outbox-relay', ''])).toEqual(
      expect.arrayContaining(['run', 'events', 'replay', 'config', 'completion']),
    );
    expect(bashComplete(['outbox-relay', 'events', ''])).toEqual(
      expect.arrayContaining(['list', 'count', 'show', 'resend', 'discard']),
    );
    const discard = bashComplete(['outbox-relay', 'events', 'discard', '--']);
    expect(discard).toEqual(expect.arrayContaining(['--filter', '--all', '--dry-run', '--yes']));
    expect(discard).not.toContain('--limit');
    expect(bashComplete(['outbox-relay', 'run', '--sink', ''])).toEqual([
      'kafka',
      'nats',
      'rabbitmq',
      'http',
      'redis',
      'sqs',
      'stdout',
    ]);
    expect(bashComplete(['outbox-relay', 'run', '--kafka-s'])).toEqual(
      expect.arrayContaining(['--kafka-ssl', '--kafka-sasl-password-file']),
    );
  });

  it('removed options are not completed', () => {
    expect(bashComplete(['outbox-relay', 'run', '--mark'])).toEqual([]);
  });

  it('fish gets complete lines for commands, subcommands, each subcommand’s flags and enum values', () => {
    const r = cli(['completion', 'fish']);
    expect(r.code, r.err).toBe(EXIT.OK);
    expect(r.out).toContain('function __outbox_relay_key');
    expect(r.out).toMatch(/^complete -c outbox-relay -n __fish_use_subcommand -a events -d /m);
    expect(r.out).toContain(
      `complete -c outbox-relay -n 'test (__outbox_relay_key) = "events "' -a 'list count show resend discard'`,
    );
    const discard = r.out.split('\n').filter((l) => l.includes('= "events discard"'));
    expect(discard.join('\n')).toMatch(/-l dry-run\b/);
    expect(discard.join('\n')).not.toMatch(/-l limit\b/);
    expect(r.out).toMatch(/= "run"' -l sink -x -a 'kafka nats rabbitmq http redis sqs stdout'/);
    expect(r.out).toMatch(/= "run"' -l kafka-sasl-password-file -r -F/);
    expect(r.out).not.toContain('mark-published');
    const fish = spawnSync('fish', ['--no-execute', '-c', r.out], { encoding: 'utf8' });
    // Where fish is installed, the script must parse.
    if (!fish.error) expect(fish.status, fish.stderr).toBe(0);
  });

  it('zsh gets a #compdef script naming the same commands and flags', () => {
    const r = cli(['completion', 'zsh']);
    expect(r.code).toBe(EXIT.OK);
    expect(r.out.startsWith('#compdef outbox-relay')).toBe(true);
    expect(r.out).toContain('"events discard") compadd --');
    const zsh = spawnSync('zsh', ['-n', '-c', r.out], { encoding: 'utf8' });
    // zsh is installed in CI (.ci/packaging.sh); where it is, the script must parse.
    if (!zsh.error) expect(zsh.status, zsh.stderr).toBe(0);
  });
});

describe('logs and the demo', () => {
  const db = useTestDatabase();

  it('pretty logs have colours, and none under NO_COLOR', () => {
    // Its own slot: slot names are global to the shared test cluster.
    const slot = ['--slot', db.name];
    const colour = cli(['migrate', '--database-url', db.url, ...slot, '--log-format', 'pretty']);
    expect(colour.code, colour.err).toBe(EXIT.OK);
    expect(colour.err).toContain('\x1b[');
    const plain = cli(['migrate', '--database-url', db.url, ...slot, '--log-format', 'pretty'], {
      NO_COLOR: '1',
    });
    expect(plain.code, plain.err).toBe(EXIT.OK);
    expect(plain.err).toMatch(/database already up to date/);
    expect(plain.err).not.toContain('\x1b[');
  });

  it("the README's first command: the demo relays its 12 events and exits 0", () => {
    // Its own throwaway cluster from the local binaries; stdout is a pipe, so it exits when done.
    const r = cli(['demo']);
    expect(r.code, r.err).toBe(EXIT.OK);
    const events = r.out.split('\n').filter((l) => l.trim() !== '');
    expect(events).toHaveLength(12);
    expect(r.err).toMatch(/demo: done/);
  });

  it('demo without PostgreSQL binaries says what to install: exit 69, one line, no stack', () => {
    const r = cli(['demo'], { OUTBOX_PG_BINDIR: '/nonexistent' });
    expect(r.code).toBe(EXIT.UNAVAILABLE);
    expect(r.err.trim()).toBe(
      'outbox-relay demo: OUTBOX_PG_BINDIR=/nonexistent does not contain initdb, pg_ctl, postgres',
    );
  });
});
