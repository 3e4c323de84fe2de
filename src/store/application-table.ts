/**
 * A table the relay streams from but does not own: the application's, as a preset names it
 * (the Debezium preset's, compat/debezium/facts.ts). migrate, its dry run and the preflight take
 * it from the preset (compat/facts.ts presetFactsOf) instead of asking which preset runs.
 *
 * What not owning the table decides, wherever it is absent (the relay's own outbox table) the
 * opposite:
 *  - the relay only reads it: SELECT is the only privilege it needs on it (replication/preflight.ts);
 *  - the relay writes nothing into it, so its publication may also publish updates and deletes
 *    (the stream reads inserts only; Debezium's default publication publishes every operation);
 *  - migrate neither creates nor partitions it: its partitioning is not read, and --partitioned
 *    is refused (`partitionedRefusal`);
 *  - the relay's own tables for it come from `migrations`, and those it writes besides the state
 *    and progress tables are `sideTables` (checked by the preflight like the others).
 */
export interface ApplicationTable {
  /** The relay's migrations for it: a folder under sql/, and the offset of their versions in the ledger. */
  readonly migrations: { readonly dir: string; readonly versionOffset: number };
  /** Why migrate refuses --partitioned (it would create the relay's own table), and the fix. */
  readonly partitionedRefusal: { readonly message: string; readonly fix: string };
  /** The relay's other tables for it (`<table><suffix>`, made by `migrations`), what they hold, and what the relay does on them. */
  readonly sideTables?: readonly {
    readonly suffix: string;
    readonly holds: string;
    /** The privileges the relay needs; `prune` false = --no-prune. */
    readonly privileges: (prune: boolean | undefined) => string[];
  }[];
}
