import type { ConfigOf } from '../config/options.ts';
import type { ApplicationTable } from '../store/application-table.ts';

// What a preset is to the core before any of it runs. Types only, importing nothing of the
// runtime: config/load.ts reads them (compat/facts.ts), and preset.ts, the running preset's
// interfaces, reaches the lifecycle, which reads the configuration.

/** The presets --compat names (its values in config/options.ts): the outbox table (none) or Debezium's table. */
export type PresetName = ConfigOf['compat'];

/**
 * What the core needs to know of a preset before any of it runs — the configuration's checks,
 * migrate, its dry run and the preflight — as plain data and pure checks (facts.ts presetFactsOf),
 * so that none of them asks which preset runs.
 */
export interface PresetFacts {
  /** The application's table the preset streams from (store/application-table.ts); undefined: the relay's own outbox table. */
  readonly applicationTable?: ApplicationTable;
  /** `run`'s and `demo`'s checks of the preset's own options; throws `fail(option, why)`. */
  readonly validateRun?: (c: PresetOptions, fail: (key: string, why: string) => Error) => void;
  /** Why --delivery exactly-once is not available with the preset, or null. */
  readonly noExactlyOnce: string | null;
  /** Whether migrate's cutover from Debezium (--debezium-offsets, --debezium-offsets-topic, --debezium-connector) belongs to it. */
  readonly cutover: boolean;
}

/** The options a preset's check reads (a Config; config/load.ts reads the facts, so they do not import it). */
export interface PresetOptions {
  readonly sink: string;
  readonly valueFormat: string;
  readonly valueFormatOverrides: Readonly<Record<string, string>>;
  readonly debezium: Readonly<Record<string, string>>;
}
