import type pg from 'pg';
import { qualified } from './sql-ident.ts';

/**
 * The relay-state row (sql/000002_relay_state.sql): one per slot, written by the active relay,
 * read by `outbox-relay status`. The statements live here; the timing in src/supervisor/state-recorder.ts.
 */
export const RECORDED_STATES = [
  'active',
  'standby',
  'broker-outage',
  'database-outage',
  'poison-position',
  'starting',
  'stopping',
  'stopped',
] as const;
export type RecordedState = (typeof RECORDED_STATES)[number];

/** The quoted name of the relay-state table that belongs to an outbox table. */
export function relayStateTable(schema: string, table: string): string {
  return qualified(schema, `${table}_relay_state`);
}

export interface RelayStateRow {
  state: RecordedState;
  detail: string | null;
  holder: string;
  since: Date;
  lastProgressAt: Date | null;
  confirmedLsn: string | null;
  lastError: string | null;
  lastErrorAt: Date | null;
  poisonLsn: string | null;
}

/**
 * Updates the slot's row (inserted by `migrate`), or inserts it when missing: the relay needs
 * INSERT on the table only for a slot migrate did not see.
 */
export async function writeRelayState(
  db: pg.Pool | pg.ClientBase,
  stateTable: string,
  slot: string,
  r: RelayStateRow,
): Promise<void> {
  const values = [
    slot,
    r.state,
    r.detail,
    r.holder,
    r.since,
    r.lastProgressAt,
    r.confirmedLsn,
    r.lastError,
    r.lastErrorAt,
    r.poisonLsn,
  ];
  const updated = await db.query(
    `UPDATE ${stateTable} SET state = $2, detail = $3, holder = $4, since = $5, last_progress_at = $6,
            confirmed_lsn = $7::pg_lsn, last_error = $8, last_error_at = $9, poison_lsn = $10::pg_lsn,
            heartbeat_at = now()
      WHERE slot_name = $1`,
    values,
  );
  if (updated.rowCount === 1) return;
  await db.query(
    `INSERT INTO ${stateTable} AS s (slot_name, state, detail, holder, since, last_progress_at, confirmed_lsn,
                                     last_error, last_error_at, poison_lsn, heartbeat_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::pg_lsn, $8, $9, $10::pg_lsn, now())
     ON CONFLICT (slot_name) DO UPDATE SET
       state = EXCLUDED.state, detail = EXCLUDED.detail, holder = EXCLUDED.holder, since = EXCLUDED.since,
       last_progress_at = EXCLUDED.last_progress_at, confirmed_lsn = EXCLUDED.confirmed_lsn,
       last_error = EXCLUDED.last_error, last_error_at = EXCLUDED.last_error_at,
       poison_lsn = EXCLUDED.poison_lsn, heartbeat_at = now()`,
    values,
  );
}

/** The holder of the row `migrate` inserts before any relay ran. */
export const MIGRATE_HOLDER = 'migrate';

/** migrate: the slot's row, so the relay needs only UPDATE on the table. Keeps an existing row. */
export async function insertInitialRelayState(
  db: pg.ClientBase,
  stateTable: string,
  slot: string,
): Promise<void> {
  await db.query(
    `INSERT INTO ${stateTable} (slot_name, state, detail, holder, since)
     VALUES ($1, 'stopped', 'no relay has run for this slot yet', $2, now())
     ON CONFLICT (slot_name) DO NOTHING`,
    [slot, MIGRATE_HOLDER],
  );
}

export interface StoredRelayState extends RelayStateRow {
  heartbeatAt: Date;
  /** Seconds since the last write / the state began / the last progress / the last error, by the database's clock. */
  heartbeatAgeSeconds: number;
  sinceAgeSeconds: number;
  progressAgeSeconds: number | null;
  errorAgeSeconds: number | null;
}

/** The slot's row; null when no relay has written one. Throws 42P01 when the table is missing. */
export async function readRelayState(
  db: pg.Pool | pg.ClientBase,
  stateTable: string,
  slot: string,
): Promise<StoredRelayState | null> {
  const r = await db.query<{
    state: RecordedState;
    detail: string | null;
    holder: string;
    since: Date;
    last_progress_at: Date | null;
    confirmed_lsn: string | null;
    last_error: string | null;
    last_error_at: Date | null;
    poison_lsn: string | null;
    heartbeat_at: Date;
    age: string;
    since_age: string;
    progress_age: string | null;
    error_age: string | null;
  }>(
    `SELECT state, detail, holder, since, last_progress_at, confirmed_lsn::text, last_error, last_error_at,
            poison_lsn::text, heartbeat_at, extract(epoch FROM now() - heartbeat_at)::text AS age,
            extract(epoch FROM now() - since)::text AS since_age,
            extract(epoch FROM now() - last_progress_at)::text AS progress_age,
            extract(epoch FROM now() - last_error_at)::text AS error_age
       FROM ${stateTable} WHERE slot_name = $1`,
    [slot],
  );
  const s = r.rows[0];
  if (!s) return null;
  return {
    state: s.state,
    detail: s.detail,
    holder: s.holder,
    since: s.since,
    lastProgressAt: s.last_progress_at,
    confirmedLsn: s.confirmed_lsn,
    lastError: s.last_error,
    lastErrorAt: s.last_error_at,
    poisonLsn: s.poison_lsn,
    heartbeatAt: s.heartbeat_at,
    heartbeatAgeSeconds: age(s.age)!,
    sinceAgeSeconds: age(s.since_age)!,
    progressAgeSeconds: age(s.progress_age),
    errorAgeSeconds: age(s.error_age),
  };
}

/** Clocks of two machines differ a little: never a negative age. */
function age(seconds: string | null): number | null {
  return seconds === null ? null : Math.max(0, Number(seconds));
}
