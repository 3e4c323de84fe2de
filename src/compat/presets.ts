import type pg from 'pg';
import type { Config } from '../config/load.ts';
import { debeziumOperator } from './debezium/operator.ts';
import { debeziumPreset } from './debezium/preset.ts';
import { FACTS } from './facts.ts';
import { outboxOperator, outboxPreset } from './outbox.ts';
import type { OperatorPreset, OperatorTarget, RelayPreset } from './preset.ts';
import type { PresetFacts, PresetName } from './preset-facts.ts';

/** One preset, whole: its facts, its running parts for the relay's run, and its parts for operators. */
export interface Preset {
  /** What the core reads before any of it runs (preset-facts.ts): facts.ts' entry, which config/load.ts reads. */
  readonly facts: PresetFacts;
  /** Its running parts, over `pool`. */
  readonly run: (c: Config, pool: pg.Pool) => RelayPreset;
  /** The preset as the operator commands, `status` and the console see it. */
  readonly operator: (t: OperatorTarget) => OperatorPreset;
}

/**
 * Where --compat is read for a preset's running parts: one entry a preset, its three parts. The
 * facts are facts.ts' entry in its light table, the one part config/load.ts reads (a table it read
 * here would bring in the runtime, which imports the configuration: a circle of imports). A name
 * missing from either table does not compile.
 */
export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  none: { facts: FACTS.none, run: outboxPreset, operator: outboxOperator },
  debezium: { facts: FACTS.debezium, run: debeziumPreset, operator: debeziumOperator },
};

/** The preset the configuration names, over `pool`. */
export function presetOf(c: Config, pool: pg.Pool): RelayPreset {
  // A command whose options leave --compat out (the demo, the playground) gets the outbox table.
  return PRESETS[c.compat ?? 'none'].run(c, pool);
}

/** The preset as the operator commands, `status` and the console see it. */
export function operatorPresetOf(t: OperatorTarget): OperatorPreset {
  return PRESETS[t.compat ?? 'none'].operator(t);
}
