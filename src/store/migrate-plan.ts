import type pg from 'pg';
import {
  DEFAULT_PARTITION_INTERVAL,
  DEFAULT_PARTITION_PREMAKE,
  inferInterval,
} from '../lifecycle/partition-plan.ts';
import { type MigrationTarget, migrationsFor, renderMigration, tablePartitioning } from './migrate.ts';
import { describeNarrowing, publicationDefinition, readPublication } from './publication.ts';
import { readSlotRow } from './slots.ts';
import { qualified } from './sql-ident.ts';

/**
 * `migrate --dry-run`: what migrate would do, read without changing anything (no lock, no ledger,
 * no slot): the migrations not applied yet and the tables they create, the publication, the
 * slot, and a FOR ALL TABLES publication and what --narrow-publication does to it. The cutover
 * from Debezium is the preset's to describe (compat/debezium/cutover.ts describeCutoverPlan).
 */
export async function planMigration(client: pg.ClientBase, t: MigrationTarget): Promise<string[]> {
  const lines: string[] = ['dry run: nothing is changed'];
  const ledger = qualified(t.schema, 'outbox_relay_migrations');
  const hasLedger = (await client.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [ledger])).rows[0].ok;
  const done = new Set<number>(
    hasLedger
      ? (
          await client.query<{ version: number }>(`SELECT version FROM ${ledger} WHERE table_name = $1`, [
            t.table,
          ])
        ).rows.map((r) => r.version)
      : [],
  );
  const pending = migrationsFor(t).filter((m) => !done.has(m.version));
  if (!hasLedger) lines.push(`would create ${ledger} (the migrations applied)`);
  for (const m of pending) {
    const tables = [...renderMigration(m.sql, t).matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\S+)/g)].map(
      (x) => x[1],
    );
    lines.push(
      `would apply migration ${m.version}_${m.name}${tables.length ? ` (creates ${tables.join(', ')})` : ''}`,
    );
  }
  if (pending.length === 0) lines.push('migrations: all applied');
  const parts = await tablePartitioning(client, t);
  const target = { ...t, partitioned: parts !== null || (t.partitioned === true && done.size === 0) };
  if (target.partitioned)
    lines.push(
      `partitioned by created_at: would create the missing partitions of the current ${(parts && inferInterval(parts.partitions)) ?? t.partitionInterval ?? DEFAULT_PARTITION_INTERVAL} and the ${t.partitionPremake ?? DEFAULT_PARTITION_PREMAKE} after it`,
    );
  const pub = await readPublication(client, t.publication);
  lines.push(
    !pub
      ? `publication ${t.publication}: would be created (${publicationDefinition(target)})`
      : pub.allTables
        ? describeNarrowing(target, t.narrowPublication === true)
        : target.partitioned && !pub.viaRoot
          ? `publication ${t.publication}: exists; would be set to publish_via_partition_root = true`
          : `publication ${t.publication}: exists`,
  );
  if (t.slot) {
    const slot = await readSlotRow(client, t.slot);
    lines.push(
      slot
        ? `slot ${t.slot}: found, plugin ${slot.plugin}, confirmed_flush_lsn ${slot.confirmed_flush_lsn ?? '(none)'}`
        : `slot ${t.slot}: not found, would be created (pgoutput)`,
    );
  }
  return lines;
}
