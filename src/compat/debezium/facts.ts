import type { ApplicationTable } from '../../store/application-table.ts';
import type { PresetFacts, PresetOptions } from '../preset-facts.ts';
import { debeziumRouting } from './event-router-options.ts';

/** Debezium's table: the application's, only read; the relay's side tables for it are sql/debezium/ (ledger versions 1000+). */
export const DEBEZIUM_TABLE: ApplicationTable = {
  migrations: { dir: 'debezium', versionOffset: 1000 },
  partitionedRefusal: {
    message:
      "--partitioned creates the relay's own outbox table; with --compat debezium the table is the application's",
    fix: "partition the application's table yourself, then run migrate without --partitioned (docs/outbox-table.md#partitioning)",
  },
  sideTables: [
    {
      suffix: '_relay_failed',
      holds: 'the events that could not be published',
      // The stream inserts a failed event; the sweeper updates it; retention deletes it (--prune).
      privileges: (prune) =>
        prune === false ? ['SELECT', 'INSERT', 'UPDATE'] : ['SELECT', 'INSERT', 'UPDATE', 'DELETE'],
    },
  ],
};

/** What the core asks of the Debezium preset (--compat debezium) before any of it runs. */
export const DEBEZIUM_FACTS: PresetFacts = {
  applicationTable: DEBEZIUM_TABLE,
  validateRun: validateDebezium,
  // Exactly-once keeps the published outbox ids in the Kafka transaction and in the progress
  // record; the Debezium preset has no outbox ids (its events are WAL positions, its progress
  // the slot's): the two are not combined yet.
  noExactlyOnce: 'exactly-once is not available with --compat debezium yet (at-least-once only)',
  cutover: true,
};

/** --compat debezium: its properties resolve (an error names the Debezium property), Kafka only. */
function validateDebezium(c: PresetOptions, fail: (key: string, why: string) => Error): void {
  try {
    debeziumRouting(c.debezium);
  } catch (e) {
    throw fail('debezium', (e as Error).message);
  }
  if (c.sink !== 'kafka') throw fail('compat', 'debezium writes Kafka records: it needs --sink kafka');
  if (c.valueFormat !== 'raw' || Object.keys(c.valueFormatOverrides).length > 0)
    throw fail('valueFormat', 'the Debezium preset makes its own values: leave --value-format at raw');
}
