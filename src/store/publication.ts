import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { SqlState, sqlStateOf } from './pg-errors.ts';
import { ident, qualified } from './sql-ident.ts';

/**
 * The relay's publication, and `migrate --narrow-publication` (docs/migrating-from-debezium.md
 * #narrowing-the-publication). A `FOR ALL TABLES` publication — Debezium's default
 * `dbz_publication` — cannot be narrowed by ALTER PUBLICATION, so it is dropped and created again
 * under the same name, covering the outbox table alone, in ONE transaction.
 *
 * What a slot that is streaming (or resumes from an older position) sees: pgoutput looks the
 * publication up by name with the catalog as of the WAL position it decodes. Changes before the
 * narrowing transaction's commit are filtered by the old definition (every table: other tables'
 * rows reach the relay, which ignores them), changes after it by the new one (the outbox table's
 * inserts only). Both definitions publish the outbox table's inserts and the name exists at every
 * position (no position sees it dropped), so no event is lost or sent twice across the
 * narrowing. A new publication under another name would not do: a slot resuming from before its
 * creation fails with "publication … does not exist".
 *
 * One case loses an event, found by test/integration/debezium-narrow-publication.test.ts on
 * PostgreSQL 15.20: an insert into the outbox made BEFORE the narrowing by a transaction that
 * commits AFTER it is not sent by pgoutput at all (pg_logical_slot_peek_binary_changes agrees).
 * So the swap takes a SHARE lock on the outbox table first: it waits for every transaction that
 * wrote the outbox to end (at most NARROWING_LOCK_TIMEOUT_S, then gives up changing nothing) and
 * holds new inserts for the instant of the swap. A transaction open across it may still write
 * the outbox after it: those inserts are sent (the same test).
 */

/** How long the narrowing waits for transactions that wrote the outbox. */
const NARROWING_LOCK_TIMEOUT_S = 30;

export interface PublicationState {
  allTables: boolean;
  /** schema.table of each table it covers (none for FOR ALL TABLES). */
  tables: string[];
  /** publish_via_partition_root: a partitioned table's rows arrive under the root's name. */
  viaRoot: boolean;
}

export async function readPublication(db: pg.ClientBase, name: string): Promise<PublicationState | null> {
  const r = await db.query<{ puballtables: boolean; pubviaroot: boolean; tables: string[] | null }>(
    `SELECT p.puballtables, p.pubviaroot,
            (SELECT array_agg(t.schemaname || '.' || t.tablename ORDER BY 1)
               FROM pg_publication_tables t WHERE t.pubname = p.pubname AND NOT p.puballtables) AS tables
       FROM pg_publication p WHERE p.pubname = $1`,
    [name],
  );
  const row = r.rows[0];
  return row ? { allTables: row.puballtables, tables: row.tables ?? [], viaRoot: row.pubviaroot } : null;
}

/**
 * The definition a new or narrowed publication gets: the outbox table, inserts only; a
 * partitioned one via its root (each partition's rows under the root's name, as the relay reads).
 */
export function publicationDefinition(t: { schema: string; table: string; partitioned?: boolean }): string {
  const via = t.partitioned ? ', publish_via_partition_root = true' : '';
  return `FOR TABLE ${qualified(t.schema, t.table)} WITH (publish = 'insert'${via})`;
}

/** Says what --narrow-publication does, or would do (dry run), to a FOR ALL TABLES publication. */
export function describeNarrowing(
  t: { schema: string; table: string; publication: string; partitioned?: boolean },
  narrow: boolean,
): string {
  return narrow
    ? `publication ${t.publication} is FOR ALL TABLES: it would be dropped and created again in one transaction as ${publicationDefinition(t)} (--narrow-publication), after waiting for open transactions that wrote the outbox; changes committed after that transaction are filtered by the new definition, earlier ones by the old (both publish the outbox's inserts: nothing lost, nothing twice)`
    : `publication ${t.publication} is FOR ALL TABLES, which \`run\` refuses (every table's changes would be decoded and sent): add --narrow-publication to replace it by one covering only ${t.schema}.${t.table} (docs/migrating-from-debezium.md#narrowing-the-publication)`;
}

/**
 * Replaces a FOR ALL TABLES publication by one of the outbox table alone, same name, one
 * transaction. Returns the WAL position right after the commit: the narrowing applies to changes
 * committed before it at the latest.
 */
export async function narrowPublication(
  db: pg.ClientBase,
  t: { schema: string; table: string; publication: string; partitioned?: boolean },
  log?: Logger,
): Promise<string> {
  await db.query('BEGIN');
  try {
    // No transaction that wrote the outbox may span the narrowing (see above): wait for them to
    // end, and hold new inserts for the instant of the swap.
    await db.query(`SET LOCAL lock_timeout = '${NARROWING_LOCK_TIMEOUT_S}s'`);
    await db.query(`LOCK TABLE ${qualified(t.schema, t.table)} IN SHARE MODE`);
    await db.query(`DROP PUBLICATION ${ident(t.publication)}`);
    await db.query(`CREATE PUBLICATION ${ident(t.publication)} ${publicationDefinition(t)}`);
    await db.query('COMMIT');
  } catch (e) {
    await db.query('ROLLBACK').catch(() => {});
    if (sqlStateOf(e) === SqlState.LOCK_NOT_AVAILABLE)
      throw new RelayError(
        ErrorCode.CONFIG_INVALID,
        `--narrow-publication: transactions that wrote ${t.schema}.${t.table} were still open after ${NARROWING_LOCK_TIMEOUT_S} s; nothing was changed`,
        {
          fix: 'run migrate --narrow-publication again when no long transaction writes the outbox (pg_stat_activity)',
        },
      );
    throw e;
  }
  const { lsn } = (await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!;
  const what = `publication ${t.publication} narrowed from FOR ALL TABLES to ${t.schema}.${t.table} (inserts), committed before ${lsn}`;
  log?.info({ publication: t.publication, lsn }, what);
  return what;
}
