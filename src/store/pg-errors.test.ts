import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { canBePoison } from '../supervisor/poison.ts';
import { toRelayError } from '../supervisor/relay.ts';
import {
  isTransientSqlState,
  migrateRemedy,
  PG_ERRORS,
  pgErrorOf,
  SqlState,
  SqlStateClass,
  sqlStateOf,
} from './pg-errors.ts';

const SRC = fileURLToPath(new URL('..', import.meta.url));

/** The SQLSTATE classes of PostgreSQL's appendix A: a 5-character string starting with one is a SQLSTATE. */
const CLASSES =
  '00 01 02 03 08 09 0A 0B 0F 0L 0P 0Z 20 21 22 23 24 25 26 27 28 2B 2D 2F 34 38 39 3B 3D 3F 40 42 44 53 54 55 57 58 72 F0 HV P0 XX'.split(
    ' ',
  );
const QUOTED_SQLSTATE = /['"`]([0-9A-Z]{5})['"`]/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return d.name === 'gen' ? [] : sourceFiles(p);
    return d.name.endsWith('.ts') && !d.name.endsWith('.test.ts') ? [p] : [];
  });
}

describe('the PostgreSQL error table', () => {
  it('names every SQLSTATE and class it lists, each with a class', () => {
    for (const [code, e] of Object.entries(PG_ERRORS)) {
      expect(
        Object.values<string>(SqlState).includes(code) || Object.values<string>(SqlStateClass).includes(code),
      ).toBe(true);
      expect(['transient', 'permanent', 'fatal']).toContain(e.class);
      if (e.class === 'fatal') expect(e.remediation, code).toBeTruthy();
    }
    for (const code of Object.values(SqlState)) expect(pgErrorOf(code), code).toBeDefined();
  });

  it("42P01's fix, the one text the console's 503 quotes, with a preset's flags in the command", () => {
    expect(pgErrorOf(SqlState.UNDEFINED_TABLE)?.remediation).toBe(migrateRemedy());
    expect(migrateRemedy()).toContain('Run `outbox-relay migrate` as');
    expect(migrateRemedy(' --compat debezium')).toContain('Run `outbox-relay migrate --compat debezium` as');
  });

  it('classifies by the code, else by its class', () => {
    expect(pgErrorOf('08006')?.class).toBe('transient'); // connection_failure
    expect(pgErrorOf('57P01')?.class).toBe('transient'); // admin_shutdown
    expect(pgErrorOf('40001')?.class).toBe('transient'); // serialization_failure
    expect(pgErrorOf(SqlState.OBJECT_IN_USE)?.class).toBe('transient');
    expect(pgErrorOf(SqlState.PROGRAM_LIMIT_EXCEEDED)?.class).toBe('permanent');
    expect(pgErrorOf(SqlState.INVALID_PASSWORD)?.class).toBe('fatal');
    expect(pgErrorOf('XX000')).toBeUndefined();
    expect(isTransientSqlState('ECONNREFUSED')).toBe(false);
    expect(sqlStateOf({ code: SqlState.UNDEFINED_TABLE })).toBe(SqlState.UNDEFINED_TABLE);
    expect(sqlStateOf({ code: 'ECONNRESET' })).toBeUndefined();
    expect(sqlStateOf(null)).toBeUndefined();
  });

  it('one classification for the relay and the poison detector (the slot dropped under the stream is the stream’s own case)', () => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    for (const code of [
      '08006',
      '53300',
      '57P01',
      '57014',
      '40001',
      '55P03',
      '58030',
      SqlState.OBJECT_IN_USE,
    ]) {
      expect(toRelayError(err(code)).retriable, code).toBe(true);
      expect(canBePoison(code), code).toBe(false);
    }
    expect(canBePoison(SqlState.UNDEFINED_OBJECT)).toBe(false);
    expect(canBePoison(SqlState.CHARACTER_NOT_IN_REPERTOIRE)).toBe(true);
    expect(canBePoison('XX000')).toBe(true);
    expect(toRelayError(err(SqlState.INVALID_CATALOG_NAME)).code).toBe('CONFIG_INVALID');
    expect(toRelayError(err('XX000')).retriable).toBe(false);
    // kafkajs' errors carry a numeric `code` (the protocol's): not a SQLSTATE, and no crash.
    const kafkaError = Object.assign(new Error('SASL authentication failed'), {
      code: 58,
      type: 'SASL_AUTHENTICATION_FAILED',
    });
    expect(toRelayError(kafkaError).retriable).toBe(false);
  });

  it('no file of src/ outside this table spells a SQLSTATE', () => {
    const found: string[] = [];
    for (const f of sourceFiles(SRC)) {
      if (f.endsWith(join('store', 'pg-errors.ts'))) continue;
      const text = readFileSync(f, 'utf8');
      for (const m of text.matchAll(QUOTED_SQLSTATE))
        if (CLASSES.includes(m[1]!.slice(0, 2)) && /\d/.test(m[1]!))
          found.push(`${relative(SRC, f)}: ${m[1]}`);
    }
    expect(found).toEqual([]);
  });
});
