import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';
import { type InvalidationReason, invalidationReasonOf } from './slot-invalidation.ts';

type Db = pg.Pool | pg.ClientBase;

/**
 * Every statement on replication slots (the relay's, migrate's, the operator commands'). Slot
 * names are global to the PostgreSQL cluster and a logical slot belongs to one database: every
 * read returns the slot's database beside the current one, and the drop names both in its
 * WHERE clause, so a slot of another database is never acted on as ours.
 */

/** The slot's row of pg_replication_slots, with the WAL it retains and its confirmed lag. */
export interface SlotRow {
  plugin: string | null;
  slot_type: string;
  database: string | null;
  current_db: string;
  active: boolean;
  active_pid: number | null;
  wal_status: string | null;
  /** Why the slot is invalidated (wal_status = lost), whatever the server version; null if it is not. */
  invalidation_reason: InvalidationReason | null;
  safe_wal_size: string | null;
  restart_lsn: string | null;
  confirmed_flush_lsn: string | null;
  /** pg_current_wal_lsn() - restart_lsn (NULL once invalidated). */
  retained: string | null;
  /** pg_current_wal_lsn() - confirmed_flush_lsn. */
  lag: string | null;
}

export async function readSlotRow(db: Db, slot: string): Promise<SlotRow | undefined> {
  // invalidation_reason (17+) through to_jsonb: NULL where the column does not exist.
  const r = await db.query<SlotRow>(
    `SELECT plugin, slot_type, database, current_database() AS current_db, active, active_pid, wal_status,
            to_jsonb(s)->>'invalidation_reason' AS invalidation_reason,
            safe_wal_size::text, restart_lsn::text, confirmed_flush_lsn::text,
            pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::text AS retained,
            pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS lag
       FROM pg_replication_slots s WHERE slot_name = $1`,
    [slot],
  );
  const row = r.rows[0];
  return row && { ...row, invalidation_reason: invalidationReasonOf(row) };
}

/** How many slots exist, and max_replication_slots. */
export async function slotCapacity(db: Db): Promise<{ used: number; max: number }> {
  const r = await db.query<{ used: string; max: string }>(
    `SELECT (SELECT count(*) FROM pg_replication_slots)::text AS used, current_setting('max_replication_slots') AS max`,
  );
  return { used: Number(r.rows[0]!.used), max: Number(r.rows[0]!.max) };
}

/**
 * Creates the logical slot with pgoutput (throws 42710 duplicate_object when it exists).
 * `failover`: a failover slot, which standbys with sync_replication_slots = on copy (PostgreSQL
 * 17+ only: the argument does not exist before).
 */
export async function createSlot(db: Db, slot: string, failover = false): Promise<void> {
  await db.query(
    failover
      ? `SELECT pg_create_logical_replication_slot($1, 'pgoutput', failover => true)`
      : `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`,
    [slot],
  );
}

/**
 * Drops the slot if it is one of this database; false = no such slot here (the name may have
 * been dropped and taken by another database since it was read). Throws 55006 object_in_use
 * while a walsender streams from it.
 */
export async function dropSlotOfThisDatabase(db: Db, slot: string): Promise<boolean> {
  const r = await db.query(
    'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()',
    [slot],
  );
  return r.rowCount === 1;
}

/**
 * A slot of this name on another database is never ours to read, stream, advance or drop.
 */
export function slotOwnershipError(
  slot: string,
  slotDatabase: string | null,
  currentDatabase: string,
): RelayError {
  return new RelayError(
    ErrorCode.SLOT_OTHER_DATABASE,
    `slot ${slot} belongs to database ${slotDatabase ?? '(none: a physical slot)'}, not to ${currentDatabase} (the database of --database-url); slot names are global to the cluster`,
    { details: { slot, slotDatabase, currentDatabase } },
  );
}
