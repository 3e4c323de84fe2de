import type pg from 'pg';
import { describeSkipRule, planCutover } from '../replication/cutover.ts';
import { formatLsn } from '../replication/lsn.ts';
import { type MigrationTarget, migrationsFor, renderMigration } from './migrate.ts';
import { readSlotRow } from './slots.ts';
import { qualified } from './sql-ident.ts';

/**
 * `migrate --dry-run`: what migrate would do, read without changing anything (no lock, no ledger,
 * no slot): the migrations not applied yet and the tables they create, the publication, the
 * slot, and with --debezium-offsets the cutover it would record — Debezium's position and the
 * skip rule. A cutover migrate would refuse is refused here with the same error.
 */
export async function planMigration(
  client: pg.ClientBase,
  t: MigrationTarget,
  cutover?: { offsetsFile: string; server?: string },
): Promise<string[]> {
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
  const pub = await client.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [t.publication]);
  lines.push(
    pub.rowCount
      ? `publication ${t.publication}: exists`
      : `publication ${t.publication}: would be created (FOR TABLE ${qualified(t.schema, t.table)} WITH (publish = 'insert'))`,
  );
  if (t.slot) {
    const slot = await readSlotRow(client, t.slot);
    lines.push(
      slot
        ? `slot ${t.slot}: found, plugin ${slot.plugin}, confirmed_flush_lsn ${slot.confirmed_flush_lsn ?? '(none)'}`
        : `slot ${t.slot}: not found, would be created (pgoutput)`,
    );
  }
  if (cutover && t.slot) {
    const p = await planCutover(client, { schema: t.schema, table: t.table, slot: t.slot, ...cutover });
    lines.push(
      `Debezium's offsets (${cutover.offsetsFile}): lsn_proc ${formatLsn(p.lsnProc)}, lsn_commit ${formatLsn(p.lsnCommit)}`,
      `would record the cutover in ${qualified(t.schema, `${t.table}_relay_cutover`)}: ${describeSkipRule(p)}`,
    );
  }
  return lines;
}
