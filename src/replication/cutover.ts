import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { readSlotRow } from '../store/slots.ts';
import { qualified } from '../store/sql-ident.ts';
import { parseDebeziumOffsets } from './debezium-offsets.ts';
import { formatLsn, parseLsn } from './lsn.ts';

/** The relay's cutover record of the Debezium preset (sql/debezium/000002_cutover.sql). */
export function cutoverTable(schema: string, table: string): string {
  return qualified(schema, `${table}_relay_cutover`);
}

/** What a cutover would record: Debezium's position from its offsets, and where the slot resends from. */
export interface CutoverPlan {
  slot: string;
  plugin: string;
  lsnProc: bigint;
  lsnCommit: bigint;
  /** The slot's confirmed_flush_lsn: the stream starts there. */
  start: bigint;
}

/**
 * Reads and checks a cutover without changing anything (`migrate --dry-run` stops here). The slot
 * must exist and use pgoutput — a decoderbufs slot cannot be reused (a slot's plugin never
 * changes): the error says the one safe path. A pgoutput slot that is already past Debezium's
 * position (it never is, for Debezium's own slot) would be a gap.
 */
export async function planCutover(
  db: pg.ClientBase,
  t: { schema: string; table: string; slot: string; offsetsFile: string; server?: string },
): Promise<CutoverPlan> {
  let offsets: ReturnType<typeof parseDebeziumOffsets>;
  try {
    offsets = parseDebeziumOffsets(readFileSync(t.offsetsFile), t.server);
  } catch (e) {
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `--debezium-offsets ${t.offsetsFile}: ${(e as Error).message}`,
    );
  }
  const slot = await readSlotRow(db, t.slot);
  if (!slot)
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} does not exist: a cutover takes over Debezium's slot (its slot.name), which holds the WAL since Debezium's last confirmed position`,
    );
  if (slot.plugin !== 'pgoutput')
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} uses the ${slot.plugin} plugin; a slot's plugin cannot change, and the relay reads pgoutput only`,
      {
        fix: `while Debezium still runs: create a publication of the outbox table (CREATE PUBLICATION … FOR TABLE … WITH (publish = 'insert')) and a new pgoutput slot (SELECT pg_create_logical_replication_slot('outbox_relay', 'pgoutput')); wait until Debezium has flushed offsets past the new slot's confirmed_flush_lsn (60 s by default); stop Debezium; then migrate --compat debezium --slot outbox_relay --debezium-offsets <file> (it refuses a slot that starts after Debezium's position: that would be a gap); drop Debezium's old slot (SELECT pg_drop_replication_slot('${t.slot}'))`,
      },
    );
  const start = slot.confirmed_flush_lsn ? parseLsn(slot.confirmed_flush_lsn) : 0n;
  if (start > offsets.lsnCommit && start > offsets.lsnProc)
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `slot ${t.slot} starts at ${formatLsn(start)}, after Debezium's last processed position ${formatLsn(offsets.lsnProc)}: the events between them would be lost`,
      {
        fix: 'start Debezium again until its offsets are flushed past the slot (offset.flush.interval.ms, 60 s by default), stop it, and run this again with the new offsets',
      },
    );
  return { slot: t.slot, plugin: slot.plugin, lsnProc: offsets.lsnProc, lsnCommit: offsets.lsnCommit, start };
}

/** The skip rule the relay's first streams apply (debezium-resume.ts), in words. */
export function describeSkipRule(p: CutoverPlan): string {
  return `the slot resends from ${formatLsn(p.start)}; the relay skips transactions committed at or before lsn_commit ${formatLsn(p.lsnCommit)}, and the changes up to lsn_proc ${formatLsn(p.lsnProc)} in the transaction that holds it; everything after is published`;
}

/**
 * `migrate --compat debezium --debezium-offsets <file>` (after the migrations): records where
 * Debezium stopped, for the slot the relay takes over (planCutover checks it first).
 */
export async function recordCutover(
  db: pg.ClientBase,
  t: { schema: string; table: string; slot: string; offsetsFile: string; server?: string },
  log?: Logger,
): Promise<string> {
  const p = await planCutover(db, t);
  await db.query(
    `INSERT INTO ${cutoverTable(t.schema, t.table)} (slot_name, lsn_proc, lsn_commit)
     VALUES ($1, $2::pg_lsn, $3::pg_lsn)
     ON CONFLICT (slot_name) DO UPDATE SET lsn_proc = excluded.lsn_proc, lsn_commit = excluded.lsn_commit, recorded_at = now()`,
    [t.slot, formatLsn(p.lsnProc), formatLsn(p.lsnCommit)],
  );
  const what = `cutover from Debezium recorded for slot ${t.slot}: the relay skips what Debezium processed (lsn_proc ${formatLsn(p.lsnProc)}, lsn_commit ${formatLsn(p.lsnCommit)}; the slot resends from ${formatLsn(p.start)})`;
  log?.info({ slot: t.slot, lsnProc: formatLsn(p.lsnProc), lsnCommit: formatLsn(p.lsnCommit) }, what);
  return what;
}

/** The slot's cutover record, or null (no cutover, or not the preset). */
export async function readCutover(
  db: pg.Pool | pg.ClientBase,
  schema: string,
  table: string,
  slot: string,
): Promise<{ lsnProc: bigint; lsnCommit: bigint } | null> {
  const r = await db
    .query<{ lsn_proc: string; lsn_commit: string }>(
      `SELECT lsn_proc::text, lsn_commit::text FROM ${cutoverTable(schema, table)} WHERE slot_name = $1`,
      [slot],
    )
    .catch(() => null);
  const row = r?.rows[0];
  return row ? { lsnProc: parseLsn(row.lsn_proc), lsnCommit: parseLsn(row.lsn_commit) } : null;
}

/** recordCutover's target from the configuration (topic.prefix picks the connector's offsets). */
export function cutoverTarget(
  c: { schema: string; table: string; slot: string; debezium: Record<string, string> },
  offsetsFile: string,
): Parameters<typeof recordCutover>[1] {
  const server = c.debezium['topic.prefix'] ?? c.debezium['debezium.source.topic.prefix'];
  return { schema: c.schema, table: c.table, slot: c.slot, offsetsFile, ...(server ? { server } : {}) };
}
