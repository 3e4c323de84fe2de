import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/load.ts';
import { OPTIONS } from '../config/options.ts';
import { presetFactsOf } from './facts.ts';
import type { PresetName } from './preset-facts.ts';
import { operatorPresetOf, PRESETS, presetOf } from './presets.ts';

const env = { DATABASE_URL: 'postgres://relay@db:5432/app', KAFKA_BROKERS: 'a:1' };

describe('the presets (one record a preset)', () => {
  // The type (Record<PresetName, Preset>, every part required) already refuses a name without all
  // three parts; this holds the table to --compat's values as the option lists them at run time,
  // and the record's facts to those config/load.ts reads.
  it('every name --compat takes has its facts, its run and its operator parts', () => {
    const names = OPTIONS.find((o) => o.key === 'compat')?.values ?? [];
    expect(names.length).toBeGreaterThan(1);
    expect(Object.keys(PRESETS).sort()).toEqual([...names].sort());
    for (const name of names as PresetName[]) {
      const p = PRESETS[name];
      expect(p.facts).toBe(presetFactsOf({ compat: name }));
      expect(p.run).toBeTypeOf('function');
      expect(p.operator).toBeTypeOf('function');
    }
  });

  it('--compat picks the record: its running parts and its operator parts', async () => {
    const pool = new pg.Pool({ connectionString: env.DATABASE_URL }); // never connects: nothing is queried
    try {
      const parts = (compat: PresetName) => {
        const c = loadConfig('run', ['--compat', compat], env).config;
        return { run: presetOf(c, pool), operator: operatorPresetOf(c) };
      };
      const outbox = parts('none');
      expect(outbox.run.progressRecord).toBe(true);
      expect(outbox.operator.sideTable).toBe(false);
      expect(outbox.operator.cliFlags).toBe('');
      const debezium = parts('debezium');
      expect(debezium.run.progressRecord).toBe(false);
      expect(debezium.operator.sideTable).toBe(true);
      expect(debezium.operator.cliFlags).toBe(' --compat debezium');
    } finally {
      await pool.end();
    }
  });
});
