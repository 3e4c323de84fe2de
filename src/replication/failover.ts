import pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { ident } from '../store/sql-ident.ts';
import {
  FAILOVER_SLOTS_SINCE,
  type FailoverReport,
  judgeFailover,
  type PrimaryFailoverReading,
  parseSlotList,
  STANDBY_CONFIRMATION_WAIT,
  type StandbyFailoverReading,
} from './failover-readiness.ts';

/**
 * Failover slots (PostgreSQL 17+): turning failover on for the relay's slot, and reading what
 * failover-readiness.ts judges, on the primary and, with --standby-url, on the standby.
 */

type Db = pg.Pool | pg.ClientBase;

/** server_version_num of the connected server. */
export async function serverVersion(db: Db): Promise<number> {
  const r = await db.query<{ v: number }>(`SELECT current_setting('server_version_num')::int AS v`);
  return r.rows[0]!.v;
}

/**
 * Whether the relay can make its slot a failover slot here: PostgreSQL 17+, and a primary (a slot
 * created on a standby cannot be a failover slot: PostgreSQL refuses it).
 */
export async function failoverSlotsPossible(db: Db): Promise<boolean> {
  const r = await db.query<{ ok: boolean }>(
    `SELECT current_setting('server_version_num')::int >= ${FAILOVER_SLOTS_SINCE} AND NOT pg_is_in_recovery() AS ok`,
  );
  return r.rows[0]!.ok;
}

/** Whether the slot is a failover slot; null when it does not exist or the server has none (< 17). */
export async function slotFailover(db: Db, slot: string): Promise<boolean | null> {
  // to_jsonb: the column exists from 17 on; one statement for every version.
  const r = await db.query<{ failover: boolean | null }>(
    `SELECT (to_jsonb(s) ->> 'failover')::boolean AS failover FROM pg_replication_slots s WHERE slot_name = $1`,
    [slot],
  );
  return r.rows[0]?.failover ?? null;
}

/**
 * Turns failover on for an existing, inactive logical slot. ALTER_REPLICATION_SLOT is a command of
 * the replication protocol (there is no SQL function for it in 17 or 18): it goes over a
 * replication connection of its own, closed right after.
 */
export async function enableSlotFailover(databaseUrl: string, slot: string): Promise<void> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    // @ts-expect-error: `replication` is supported by pg but missing from @types/pg.
    replication: 'database',
    application_name: 'pg-outbox-relay',
  });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`ALTER_REPLICATION_SLOT ${ident(slot)} ( FAILOVER true )`);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Physical slots, and walsenders that hold no slot (a standby streaming without one). */
const PHYSICAL_STANDBYS = `SELECT (SELECT count(*)::int FROM pg_replication_slots WHERE slot_type = 'physical')
              + (SELECT count(*)::int FROM pg_stat_replication r
                  WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots p WHERE p.active_pid = r.pid)) AS physical`;

/** What the primary knows: the slot's failover flag, synchronized_standby_slots, the walsender's wait. */
export async function readPrimaryFailover(db: Db, slot: string): Promise<PrimaryFailoverReading> {
  const version = await serverVersion(db);
  if (version < FAILOVER_SLOTS_SINCE)
    return {
      version,
      slotFailover: null,
      synchronizedStandbySlots: [],
      standbySlots: [],
      // Before 17 only whether a standby could be promoted matters (phantom_risk): nothing can
      // hold decoding back for it.
      physicalStandbys: (await db.query<{ physical: number }>(PHYSICAL_STANDBYS)).rows[0]!.physical,
      walsenderWaitEvent: null,
    };
  const r = await db.query<{
    failover: boolean | null;
    named: string | null;
    physical: number;
    wait_event: string | null;
  }>(
    `SELECT s.failover, current_setting('synchronized_standby_slots') AS named,
            (${PHYSICAL_STANDBYS}) AS physical,
            (SELECT a.wait_event FROM pg_stat_activity a WHERE a.pid = s.active_pid) AS wait_event
       FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`,
    [slot],
  );
  const row = r.rows[0]!;
  const names = parseSlotList(row.named);
  const named = names.length
    ? (
        await db.query<{ slot_name: string; active: boolean; wal_status: string | null }>(
          'SELECT slot_name, active, wal_status FROM pg_replication_slots WHERE slot_name = ANY($1)',
          [names],
        )
      ).rows
    : [];
  return {
    version,
    slotFailover: row.failover,
    synchronizedStandbySlots: names,
    standbySlots: names.map((name) => {
      const s = named.find((n) => n.slot_name === name);
      return { name, exists: !!s, active: s?.active ?? false, lost: s?.wal_status === 'lost' };
    }),
    physicalStandbys: row.physical,
    walsenderWaitEvent: row.wait_event,
  };
}

/** The standby's copy of the slot (--standby-url), on a short-lived connection. Never throws. */
export async function readStandbyFailover(standbyUrl: string, slot: string): Promise<StandbyFailoverReading> {
  const client = new pg.Client({
    connectionString: standbyUrl,
    application_name: 'pg-outbox-relay',
    connectionTimeoutMillis: 5000,
    statement_timeout: 5000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    const r = await client.query<{
      in_recovery: boolean;
      sync: string | null;
      slot: StandbyFailoverReading['slot'];
    }>(
      `SELECT pg_is_in_recovery() AS in_recovery, current_setting('sync_replication_slots', true) AS sync,
              (SELECT json_build_object('synced', synced, 'temporary', temporary, 'failover', failover,
                        'invalidationReason', invalidation_reason, 'confirmedFlushLsn', confirmed_flush_lsn::text)
                 FROM pg_replication_slots WHERE slot_name = $1) AS slot`,
      [slot],
    );
    const row = r.rows[0]!;
    return {
      error: null,
      inRecovery: row.in_recovery,
      syncReplicationSlots: row.sync === 'on',
      slot: row.slot,
    };
  } catch (e) {
    return { error: errorMessage(e), inRecovery: false, syncReplicationSlots: false, slot: null };
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * One reading and its verdict (`check`, `status`, the relay's FailoverWatch). `waitedBefore`: the
 * previous reading saw the walsender waiting for standby confirmation (a wait in two readings in
 * a row is a stall; `waiting` says whether this one saw it).
 */
export async function readFailover(
  db: Db,
  slot: string,
  standbyUrl: string | undefined,
  o: { waitedBefore?: boolean } = {},
): Promise<{
  primary: PrimaryFailoverReading;
  standby: StandbyFailoverReading | null;
  report: FailoverReport;
  waiting: boolean;
}> {
  const primary = await readPrimaryFailover(db, slot);
  const standby =
    standbyUrl && primary.version >= FAILOVER_SLOTS_SINCE
      ? await readStandbyFailover(standbyUrl, slot)
      : null;
  const waiting = primary.walsenderWaitEvent === STANDBY_CONFIRMATION_WAIT;
  const report = judgeFailover(slot, primary, standby, {
    waitingPersisted: waiting && o.waitedBefore === true,
  });
  return { primary, standby, report, waiting };
}

/**
 * After ensureSlot, with --slot-failover on a 17+ server: an existing slot that is not a failover
 * slot (created by migrate, an older relay, by hand, or with --no-slot-failover) gets failover
 * turned on. The slot is inactive here (ensureSlot refused an active one). Not being able to is
 * no reason to stop relaying: the slot streams as before, `status` says it is not failover-ready,
 * and the next session tries again.
 */
export async function turnOnSlotFailover(
  db: Db,
  databaseUrl: string,
  slot: string,
  log: Logger,
): Promise<void> {
  try {
    if ((await slotFailover(db, slot)) !== false) return;
    await enableSlotFailover(databaseUrl, slot);
    log.info({ slot }, 'failover turned on for the existing slot (ALTER_REPLICATION_SLOT)');
  } catch (e) {
    log.warn(
      { slot, err: errorMessage(e) },
      'could not turn failover on for the existing slot: it stays a plain slot, which a failover loses (slot recovery then covers the gap)',
    );
  }
}
