import type pg from 'pg';
import { ErrorCode, RelayError } from '../errors.ts';

/**
 * Where in history a server is: its timeline and system identifier, as one key
 * ('00000002:7713297383077832832'). An outbox id names a row only within one timeline — a
 * promoted standby's sequences lag like the rest of its WAL, so the new primary hands out again
 * the ids of rows it never received (design.md §9). Every outcome the relay writes is therefore
 * written only while the server is still on the timeline the outcome was observed on: the
 * statement itself checks (TIMELINE_SQL, evaluated once per statement), so a retry that reaches
 * a new primary after a promotion matches nothing instead of marking the new primary's rows.
 *
 * Why pg_walfile_name(pg_current_wal_lsn()): it names the segment on the server's current
 * insert timeline right after a promotion; pg_control_checkpoint().timeline_id still shows the
 * old timeline until the end-of-recovery checkpoint is done (seen on 16.14: 1 after promoting to
 * timeline 2). On a standby it fails (recovery in progress), as any write there does.
 */
export const TIMELINE_SQL = `(SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || ':' || system_identifier::text FROM pg_control_system())`;

/** The key of IDENTIFY_SYSTEM's answer (replication connection): timeline number and system identifier. */
export function timelineKey(systemId: string, timeline: number): string {
  return `${timeline.toString(16).toUpperCase().padStart(8, '0')}:${systemId}`;
}

/** 'timeline 2 of system 7713…' for logs. */
export function describeTimeline(key: string): string {
  const [tli, system] = key.split(':');
  return `timeline ${Number.parseInt(tli ?? '0', 16)} of system ${system}`;
}

/** The key of the server this pool reaches now. */
export async function currentTimeline(db: pg.Pool | pg.ClientBase): Promise<string> {
  const r = await db.query<{ k: string }>(`SELECT ${TIMELINE_SQL} AS k`);
  return r.rows[0]!.k;
}

/**
 * The server's timeline is no longer the one outcomes were observed on (a promotion, or another
 * database behind the same address): retriable — the relay ends the session, drops the
 * outcomes not yet recorded, and starts over from the new primary's own state.
 */
export function timelineChanged(observedOn: string, now: string, events: number): RelayError {
  return new RelayError(
    ErrorCode.TIMELINE_CHANGED,
    `the database is now on ${describeTimeline(now)}, not on ${describeTimeline(observedOn)} where the outcomes of ${events} events were observed: they are dropped, not recorded (their ids may name other rows here)`,
    { retriable: true, details: { from: observedOn, to: now, events } },
  );
}
