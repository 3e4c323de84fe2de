import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/load.ts';
import { optionsFor } from '../config/options.ts';

const DB = 'postgres://relay@db:5432/app';

/** The operator commands' options come from the one schema (src/config/options.ts). */
describe('operator command options', () => {
  it('parse filters, paging and positionals', () => {
    const { config, positionals } = loadConfig(
      'events',
      [
        'resend',
        '7',
        '9',
        '--status',
        'failed',
        '--status',
        'dead,parked',
        '--after-id',
        '12',
        '--reset-attempts',
      ],
      { DATABASE_URL: DB },
    );
    expect(positionals).toEqual(['resend', '7', '9']);
    expect(config.status).toEqual(['failed', 'dead', 'parked']);
    expect(config.afterId).toBe(12);
    expect(config.resetAttempts).toBe(true);
    expect(config.limit).toBe(100);
    expect(config.yes).toBe(false);
    expect(config.json).toBe(false);
  });

  it('read the relay’s own config file: options of run are ignored, unknown keys still rejected', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ops-cfg-'));
    const shared = join(dir, 'relay.json');
    writeFileSync(shared, JSON.stringify({ slot: 'from_file', kafkaBrokers: ['k:9092'], batchSize: 10 }));
    expect(loadConfig('status', ['--config', shared], { DATABASE_URL: DB }).config.slot).toBe('from_file');
    const typo = join(dir, 'typo.json');
    writeFileSync(typo, JSON.stringify({ slott: 'x' }));
    expect(() => loadConfig('status', ['--config', typo], { DATABASE_URL: DB })).toThrow(
      /unknown option "slott"/,
    );
  });

  it('each command documents only the options it takes', () => {
    const flags = (c: Parameters<typeof optionsFor>[0]) => optionsFor(c).map((o) => o.flag);
    expect(flags('status')).toEqual(expect.arrayContaining(['database-url', 'slot', 'publication', 'json']));
    expect(flags('status')).not.toContain('since');
    expect(flags('events')).toEqual(
      expect.arrayContaining([
        'status',
        'since',
        'until',
        'after-id',
        'limit',
        'filter',
        'reset-attempts',
        'yes',
      ]),
    );
    expect(flags('replay')).toEqual(
      expect.arrayContaining(['since', 'until', 'event-id', 'dry-run', 'replay-batch-size']),
    );
    expect(flags('replay')).toEqual(
      expect.arrayContaining(['yes', 'include-replays', 'follow', 'confirm-above']),
    );
    // Each events subcommand takes only its own options.
    const sub = (s: string) => optionsFor('events', s).map((o) => o.flag);
    expect(sub('show')).not.toContain('status');
    expect(sub('list')).not.toContain('yes');
    expect(sub('list')).toContain('limit');
    expect(sub('count')).not.toContain('limit');
    expect(sub('discard')).toEqual(expect.arrayContaining(['filter', 'all', 'dry-run', 'yes']));
    expect(sub('discard')).not.toContain('reset-attempts');
    expect(flags('slot')).toEqual(expect.arrayContaining(['yes', 'slot']));
    expect(flags('slot')).not.toContain('kafka-brokers');
  });
});
