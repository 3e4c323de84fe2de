import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { debeziumPreset } from './debezium/preset.ts';
import { outboxPreset } from './outbox.ts';
import type { RelayPreset } from './preset.ts';

/** The one place --compat is read for the relay's run: the preset module it names. */
const PRESETS: Record<Config['compat'], (c: Config, pool: pg.Pool) => RelayPreset> = {
  none: outboxPreset,
  debezium: debeziumPreset,
};

/** The preset the configuration names, over `pool`. */
export function presetOf(c: Config, pool: pg.Pool): RelayPreset {
  return PRESETS[c.compat](c, pool);
}
