import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import {
  DEFAULT_PARTITION_INTERVAL,
  DEFAULT_PARTITION_PREMAKE,
  type PartitionInterval,
} from '../lifecycle/partition-plan.ts';
import type { Logger } from '../observability/logger.ts';
import type { ApplicationTable } from './application-table.ts';
import { ensurePartitions, managedPartitioning, type Partitioning, readPartitioning } from './partitions.ts';
import { codeOf, SqlState, sqlStateOf } from './pg-errors.ts';
import { insertInitialProgress, progressTable } from './progress-table.ts';
import {
  describeNarrowing,
  narrowPublication,
  publicationDefinition,
  readPublication,
} from './publication.ts';
import { insertInitialRelayState, relayStateTable } from './relay-state.ts';
import { createSlot, readSlotRow, slotOwnershipError } from './slots.ts';
import { ident, qualified, sqlName } from './sql-ident.ts';

export const SQL_DIR = fileURLToPath(new URL('../../sql/', import.meta.url));

export interface MigrationTarget {
  schema: string;
  table: string;
  publication: string;
  /**
   * Created with the publication: rows committed before the slot exists are never streamed.
   * From then on the slot retains WAL until a relay streams from it (warned loudly).
   */
  slot?: string;
  /**
   * The application's table, as a preset names it (Debezium's): it exists and is not changed;
   * only the relay's own tables for it are created, and a publication of inserts into it.
   * Absent: the relay's own outbox table.
   */
  applicationTable?: ApplicationTable;
  /** A FOR ALL TABLES publication is replaced by one of the outbox table alone (store/publication.ts). */
  narrowPublication?: boolean;
  /**
   * A new outbox table is partitioned by range of created_at (sql/partitioned/), and its
   * publication publishes via the partition root. docs/outbox-table.md#partitioning.
   */
  partitioned?: boolean;
  /** The width of a new partitioned table's partitions (existing partitions' width wins). */
  partitionInterval?: PartitionInterval;
  /** Partitions kept created after the current one (partitioned tables, whoever made them so). */
  partitionPremake?: number;
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** sql/NNNNNN_name.sql, in version order. Append-only: an applied file is never edited. */
export function loadMigrations(dir = SQL_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{6}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: Number(f.slice(0, 6)),
      name: f.slice(7, -4),
      sql: readFileSync(dir + f, 'utf8'),
    }));
}

/** The target's migrations: the relay's own, or its tables for an application's table (the Debezium preset's: 1000+). */
export function migrationsFor(t: MigrationTarget): Migration[] {
  const app = t.applicationTable?.migrations;
  if (app)
    return loadMigrations(`${SQL_DIR}${app.dir}/`).map((m) => ({
      ...m,
      version: app.versionOffset + m.version,
    }));
  if (!t.partitioned) return loadMigrations();
  // The partitioned table replaces version 1; the later migrations (state, progress, view) are shared.
  const partitioned = loadMigrations(`${SQL_DIR}partitioned/`);
  return loadMigrations().map((m) => partitioned.find((p) => p.version === m.version) ?? m);
}

export function renderMigration(sql: string, t: MigrationTarget): string {
  // {{table}}_suffix forms index/constraint names: quote the whole name, not just the table part.
  return sql
    .replace(/\{\{table\}\}(_[a-z_]+)/g, (_, suffix: string) => ident(`${t.table}${suffix}`))
    .replace(/\{\{schema\}\}/g, ident(t.schema))
    .replace(/\{\{table\}\}/g, ident(t.table));
}

/**
 * Applies pending migrations and makes sure the publication and the slot exist. Idempotent.
 * A session advisory lock serialises concurrent migrators (two deploys starting at once).
 *
 * The slot: created here (when the role may) so that no event committed before the relay's
 * first start is missed — the choice that loses nothing. The price is that an unused slot
 * retains WAL from this moment until a relay streams from it, so migrate says so loudly every
 * time it finds the slot unused. A slot of that name on another database (names are global to
 * the cluster) is refused before anything is changed.
 */
export async function migrate(client: pg.ClientBase, t: MigrationTarget, log?: Logger): Promise<string[]> {
  const lockKey = `pg-outbox-relay/migrate/${t.schema}.${t.table}`;
  const applied: string[] = [];
  if (t.slot) {
    const o = await readSlotRow(client, t.slot);
    if (o && o.database !== o.current_db) throw slotOwnershipError(t.slot, o.database, o.current_db);
  }
  await client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [lockKey]);
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident(t.schema)}`);
    const ledger = qualified(t.schema, 'outbox_relay_migrations');
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${ledger} (
         table_name text NOT NULL, version integer NOT NULL, name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_name, version))`,
    );
    const done = new Set(
      (
        await client.query<{ version: number }>(`SELECT version FROM ${ledger} WHERE table_name = $1`, [
          t.table,
        ])
      ).rows.map((r) => r.version),
    );
    await refuseUnpartitioned(client, t, done);
    const migrations = migrationsFor(t);
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await client.query('BEGIN');
        await client.query(renderMigration(m.sql, t));
        await client.query(`INSERT INTO ${ledger} (table_name, version, name) VALUES ($1, $2, $3)`, [
          t.table,
          m.version,
          m.name,
        ]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw new RelayError(
          ErrorCode.MIGRATION_FAILED,
          `migration ${m.version} (${m.name}) failed: ${(e as Error).message}`,
          { cause: e },
        );
      }
      applied.push(`${m.version}_${m.name}`);
      log?.info({ migration: m.version, name: m.name }, 'migration applied');
    }
    const parts = await tablePartitioning(client, t);
    const target = { ...t, partitioned: parts !== null };
    if (parts && managedPartitioning(parts)) {
      const made = await ensurePartitions(client, t, {
        ahead: t.partitionPremake ?? DEFAULT_PARTITION_PREMAKE,
        interval: t.partitionInterval ?? DEFAULT_PARTITION_INTERVAL,
      });
      applied.push(...made.map((n) => `partition ${n}`));
      if (made.length) log?.info({ partitions: made }, 'partitions created');
    } else if (parts)
      log?.warn(
        { table: `${t.schema}.${t.table}`, key: parts.key, strategy: parts.strategy },
        'the outbox table is partitioned, but not by range of created_at: the relay streams it (via the partition root) but neither creates nor drops its partitions',
      );
    const pub = await readPublication(client, t.publication);
    if (!pub) {
      await client.query(`CREATE PUBLICATION ${ident(t.publication)} ${publicationDefinition(target)}`);
      applied.push(`publication ${t.publication}`);
      log?.info({ publication: t.publication }, 'publication created');
    } else if (pub.allTables) {
      if (t.narrowPublication) applied.push(await narrowPublication(client, target, log));
      else log?.warn({ publication: t.publication }, describeNarrowing(target, false));
    } else if (target.partitioned && !pub.viaRoot) {
      // Without it pgoutput sends each partition's rows under the partition's name, which the relay
      // does not take for the outbox (docs/outbox-table.md#partitioning).
      await client.query(`ALTER PUBLICATION ${ident(t.publication)} SET (publish_via_partition_root = true)`);
      applied.push(`publication ${t.publication}: publish_via_partition_root = true`);
      log?.info({ publication: t.publication }, 'publication set to publish via the partition root');
    }
    if (t.slot) {
      await insertInitialRelayState(client, relayStateTable(t.schema, t.table), t.slot);
      await insertInitialProgress(client, progressTable(t.schema, t.table), t.slot);
      applied.push(...(await ensureMigrationSlot(client, t.slot, log)));
    }
  } catch (e) {
    throw (await migratePrivilegeError(client, e, t.schema)) ?? e;
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey]).catch(() => {});
  }
  return applied;
}

/** The outbox table's partitioning (partitions.ts); an application's table's is the application's: null. */
export async function tablePartitioning(
  client: pg.ClientBase,
  t: Pick<MigrationTarget, 'schema' | 'table' | 'applicationTable'>,
): Promise<Partitioning | null> {
  return t.applicationTable ? null : readPartitioning(client, qualified(t.schema, t.table));
}

/**
 * --partitioned on a table an earlier migrate created unpartitioned: migrate never rewrites a
 * table, so it says how to convert it instead of silently doing nothing.
 */
async function refuseUnpartitioned(
  client: pg.ClientBase,
  t: MigrationTarget,
  done: Set<number>,
): Promise<void> {
  if (!t.partitioned) return;
  const app = t.applicationTable;
  if (app)
    throw new RelayError(ErrorCode.CONFIG_INVALID, app.partitionedRefusal.message, {
      fix: app.partitionedRefusal.fix,
    });
  if (!done.has(1)) return;
  if (await readPartitioning(client, qualified(t.schema, t.table))) return;
  throw new RelayError(
    ErrorCode.CONFIG_INVALID,
    `--partitioned: ${t.schema}.${t.table} already exists and is not partitioned; migrate does not rewrite an existing table`,
    {
      fix: 'move to a new partitioned table beside it and drain the old one (docs/outbox-table.md#partitioning, "Converting an existing outbox"), or run migrate without --partitioned',
    },
  );
}

/**
 * A refused privilege during migrate (42501, also inside a failed migration): exit 78 with what
 * the migrating role needs — to own the schema's objects — rather than the relay's grants.
 */
async function migratePrivilegeError(
  client: pg.ClientBase,
  e: unknown,
  schema: string,
): Promise<RelayError | null> {
  const cause = e instanceof RelayError && e.code === ErrorCode.MIGRATION_FAILED ? e.cause : e;
  if (sqlStateOf(cause) !== SqlState.INSUFFICIENT_PRIVILEGE) return null;
  const role = await client
    .query<{ u: string }>('SELECT current_user AS u')
    .then((r) => sqlName(r.rows[0]!.u))
    .catch(() => '<role>');
  const s = sqlName(schema);
  return new RelayError(ErrorCode.INSUFFICIENT_PRIVILEGE, `migrate: ${(cause as Error).message}`, {
    cause,
    fix: `run migrate as the owner of schema ${s} and its outbox table (it creates tables, indexes and the publication; CREATE PUBLICATION … FOR TABLE needs ownership of the table): e.g. ALTER SCHEMA ${s} OWNER TO ${role}; or, on a fresh schema, GRANT CREATE ON SCHEMA ${s} TO ${role}; (docs/deployment.md)`,
  });
}

const UNUSED_SLOT =
  'it retains WAL from now on until a relay streams from it: start the relay soon (`outbox-relay run`), or drop the slot (`outbox-relay slot drop`) if no relay will run here — an unused slot can fill the disk (docs/operations.md#unused-slot)';

/** Creates the slot if missing; warns loudly while no relay streams from it. */
async function ensureMigrationSlot(client: pg.ClientBase, slot: string, log?: Logger): Promise<string[]> {
  const s = await readSlotRow(client, slot);
  if (s) {
    if (!s.active)
      log?.warn(
        { slot, retained_bytes: Number(s.retained ?? 0) },
        `replication slot ${slot} exists but no relay streams from it: ${UNUSED_SLOT}`,
      );
    return [];
  }
  try {
    await createSlot(client, slot);
  } catch (e) {
    const code = codeOf(e);
    // duplicate_object: created concurrently (another migrate, a relay, or another database: the relay's
    // own preflight then refuses it by name).
    if (code === SqlState.DUPLICATE_OBJECT) return [];
    // The migrating role may lack REPLICATION; the relay creates the slot at its first start.
    log?.warn(
      { slot, err: (e as Error).message, code },
      'could not create the replication slot; rows inserted before the relay first starts will not be relayed',
    );
    return [];
  }
  log?.warn({ slot }, `replication slot ${slot} created (pgoutput): ${UNUSED_SLOT}`);
  return [`slot ${slot}`];
}
