import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { debeziumOperator } from './debezium/operator.ts';
import { debeziumPreset } from './debezium/preset.ts';
import { outboxOperator, outboxPreset } from './outbox.ts';
import type { OperatorPreset, OperatorTarget, RelayPreset } from './preset.ts';

/**
 * Where --compat is read for a preset's running parts: the preset module it names, for the
 * relay's run and for operators. What the core needs before any of it runs (the configuration's
 * checks, migrate, the preflight) is read from facts.ts, which stays light for config/load.ts.
 */
const PRESETS: Record<Config['compat'], (c: Config, pool: pg.Pool) => RelayPreset> = {
  none: outboxPreset,
  debezium: debeziumPreset,
};

/** The preset the configuration names, over `pool`. */
export function presetOf(c: Config, pool: pg.Pool): RelayPreset {
  // A command whose options leave --compat out (the demo, the playground) gets the outbox table.
  return PRESETS[c.compat ?? 'none'](c, pool);
}

const OPERATOR_PRESETS: Record<Config['compat'], (t: OperatorTarget) => OperatorPreset> = {
  none: outboxOperator,
  debezium: debeziumOperator,
};

/** The preset as the operator commands, `status` and the console see it. */
export function operatorPresetOf(t: OperatorTarget): OperatorPreset {
  return OPERATOR_PRESETS[t.compat ?? 'none'](t);
}
