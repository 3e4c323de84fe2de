import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/load.ts';
import { migrationsFor } from '../store/migrate.ts';
import { DEBEZIUM_TABLE } from './debezium/facts.ts';
import { presetFactsOf, withPresetTable } from './facts.ts';

const env = { DATABASE_URL: 'postgres://relay@db:5432/app', KAFKA_BROKERS: 'a:1' };

describe('preset facts (what the core reads instead of asking which preset runs)', () => {
  it('the outbox table: its own table, every delivery mode, no cutover', () => {
    const facts = presetFactsOf({ compat: 'none' });
    expect(facts).toBe(presetFactsOf({}));
    expect(facts.applicationTable).toBeUndefined();
    expect(facts.noExactlyOnce).toBeNull();
    expect(facts.cutover).toBe(false);
    expect(withPresetTable({ compat: 'none' as const, table: 'outbox' })).toEqual({
      compat: 'none',
      table: 'outbox',
    });
  });

  it("Debezium's table: the application's, with the side tables as its migrations (ledger versions 1000+)", () => {
    const t = withPresetTable({
      compat: 'debezium' as const,
      schema: 'public',
      table: 'outbox',
      publication: 'p',
    });
    expect(t.applicationTable).toBe(DEBEZIUM_TABLE);
    const versions = migrationsFor(t).map((m) => m.version);
    expect(versions.length).toBeGreaterThan(0);
    expect(versions.every((v) => v > 1000)).toBe(true);
    // --partitioned does not change them: migrate refuses it for the application's table.
    expect(migrationsFor({ ...t, partitioned: true }).map((m) => m.version)).toEqual(versions);
    expect(migrationsFor({ ...t, applicationTable: undefined }).map((m) => m.version)[0]).toBe(1);
  });

  it("--compat debezium's checks of run's options, with their messages", () => {
    const run =
      (...args: string[]) =>
      () =>
        loadConfig('run', ['--compat', 'debezium', ...args], env);
    expect(run()).not.toThrow();
    expect(run('--sink', 'stdout')).toThrow(/debezium writes Kafka records: it needs --sink kafka/);
    expect(run('--value-format', 'envelope-json')).toThrow(
      /the Debezium preset makes its own values: leave --value-format at raw/,
    );
    expect(run('--debezium', 'route.by.field=')).toThrow(/debezium/);
    expect(run('--delivery', 'exactly-once')).toThrow(
      /exactly-once is not available with --compat debezium yet \(at-least-once only\)/,
    );
    // The outbox table's run takes none of them.
    expect(() => loadConfig('run', ['--sink', 'stdout'], env)).not.toThrow();
  });

  it("migrate's cutover options belong to --compat debezium", () => {
    const migrate =
      (...args: string[]) =>
      () =>
        loadConfig('migrate', args, env);
    expect(migrate('--debezium-offsets', '/tmp/offsets.dat')).toThrow(
      /belongs to the cutover from Debezium: add --compat debezium/,
    );
    expect(migrate('--compat', 'debezium', '--debezium-offsets', '/tmp/offsets.dat')).not.toThrow();
  });
});
