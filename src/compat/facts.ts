import type { ApplicationTable } from '../store/application-table.ts';
import { DEBEZIUM_FACTS } from './debezium/facts.ts';
import type { PresetFacts, PresetName } from './preset-facts.ts';

/**
 * What the core needs to know of each preset before any of it runs (PresetFacts): the one table
 * of them, read by the configuration's checks, migrate, its dry run and the preflight. This file
 * and the facts it imports stay light: config/load.ts reads them, so they pull in none of the
 * runtime and do not import the configuration. The presets' running parts come from presets.ts.
 */

/** The outbox table's: the relay's own table, every delivery mode, no cutover. */
const OUTBOX_FACTS: PresetFacts = { noExactlyOnce: null, cutover: false };

/** Every preset's facts by its name; presets.ts' one record a preset takes its facts from here. */
export const FACTS: Readonly<Record<PresetName, PresetFacts>> = {
  none: OUTBOX_FACTS,
  debezium: DEBEZIUM_FACTS,
};

/** The facts of the preset --compat names (left out, as by the demo: the outbox table). */
export function presetFactsOf(t: { readonly compat?: PresetName }): PresetFacts {
  return FACTS[t.compat ?? 'none'];
}

/** `t` with the application's table its preset streams from, if any: what migrate, its dry run and the preflight take. */
export function withPresetTable<T extends { readonly compat?: PresetName }>(
  t: T,
): T & { applicationTable?: ApplicationTable } {
  const applicationTable = presetFactsOf(t).applicationTable;
  return applicationTable ? { ...t, applicationTable } : t;
}
