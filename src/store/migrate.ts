import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { ident, qualified } from './sql-ident.ts';

export const SQL_DIR = fileURLToPath(new URL('../../sql/', import.meta.url));

export interface MigrationTarget {
  schema: string;
  table: string;
  publication: string;
  /** Created with the publication: rows committed before the slot exists are never streamed. */
  slot?: string;
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

export function renderMigration(sql: string, t: MigrationTarget): string {
  // {{table}}_suffix forms index/constraint names: quote the whole name, not just the table part.
  return sql
    .replace(/\{\{table\}\}(_[a-z_]+)/g, (_, suffix: string) => ident(`${t.table}${suffix}`))
    .replace(/\{\{schema\}\}/g, ident(t.schema))
    .replace(/\{\{table\}\}/g, ident(t.table));
}

/**
 * Applies pending migrations and makes sure the publication exists. Idempotent.
 * A session advisory lock serialises concurrent migrators (two deploys starting at once).
 */
export async function migrate(client: pg.ClientBase, t: MigrationTarget, log?: Logger): Promise<string[]> {
  const lockKey = `pg-outbox-relay/migrate/${t.schema}.${t.table}`;
  const applied: string[] = [];
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
    for (const m of loadMigrations()) {
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
    const pub = await client.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [t.publication]);
    if (pub.rowCount === 0) {
      await client.query(
        `CREATE PUBLICATION ${ident(t.publication)} FOR TABLE ${qualified(t.schema, t.table)} WITH (publish = 'insert')`,
      );
      applied.push(`publication ${t.publication}`);
      log?.info({ publication: t.publication }, 'publication created');
    }
    if (t.slot) {
      const slot = await client.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [t.slot]);
      if (slot.rowCount === 0) {
        try {
          await client.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [t.slot]);
          applied.push(`slot ${t.slot}`);
          log?.info({ slot: t.slot }, 'replication slot created (pgoutput)');
        } catch (e) {
          // The migrating role may lack REPLICATION; the relay creates the slot at its first start.
          log?.warn(
            { slot: t.slot, err: (e as Error).message },
            'could not create the replication slot; rows inserted before the relay first starts will not be relayed',
          );
        }
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey]).catch(() => {});
  }
  return applied;
}
