/**
 * Is the relay's slot ready for a failover, and is decoding held by a standby? Pure: judges what
 * failover.ts read from the primary (and, with --standby-url, from the standby).
 *
 * PostgreSQL 17+ keeps a logical slot across a promotion when it is a failover slot
 * (`failover = true`), the standby syncs it (`sync_replication_slots = on`), and the copy is
 * persistent. Two traps, measured on 17.10 and 18.4 (design.md §9):
 *  1. A synced copy stays `temporary` until the relay has *advanced* the slot on the primary past
 *     the standby's start point. A temporary copy is dropped at promotion: the standby is ready
 *     only when its copy is `synced AND NOT temporary`.
 *  2. `synchronized_standby_slots` names physical slots whose standbys must confirm WAL before a
 *     failover slot may decode it. One of them inactive (its standby down) holds decoding for
 *     ever: the walsender waits in `WaitForStandbyConfirmation` and the relay receives nothing.
 *
 * Phantoms: with an asynchronous standby and no `synchronized_standby_slots`, the relay may
 * publish an event whose transaction the standby never received; after a promotion the new
 * primary does not have that row. `synchronized_standby_slots` applies to failover slots only.
 */

/** pg_replication_slots.failover, synchronized_standby_slots and slot sync exist from 17 on. */
export const FAILOVER_SLOTS_SINCE = 170_000;

/** The wait event of a walsender held by synchronized_standby_slots. */
export const STANDBY_CONFIRMATION_WAIT = 'WaitForStandbyConfirmation';

export interface PrimaryFailoverReading {
  /** server_version_num. */
  version: number;
  /** The relay's slot's `failover`; null when the slot does not exist (or before 17). */
  slotFailover: boolean | null;
  /** synchronized_standby_slots, parsed; [] when unset. */
  synchronizedStandbySlots: string[];
  /** The named slots as the primary sees them (exists false: no such slot). */
  standbySlots: { name: string; exists: boolean; active: boolean; lost: boolean }[];
  /** Physical standbys the primary knows of: physical walsenders or physical slots. */
  physicalStandbys: number;
  /** The wait event of the walsender streaming the relay's slot; null when none streams. */
  walsenderWaitEvent: string | null;
}

export interface StandbyFailoverReading {
  /** Why the standby could not be read; the rest is then meaningless. */
  error: string | null;
  inRecovery: boolean;
  /** The standby's sync_replication_slots. */
  syncReplicationSlots: boolean;
  /** The standby's copy of the relay's slot; null when it has none. */
  slot: {
    synced: boolean;
    temporary: boolean;
    failover: boolean;
    invalidationReason: string | null;
    confirmedFlushLsn: string | null;
  } | null;
}

export type FailoverState =
  /** Before PostgreSQL 17: no failover slots; a failover loses the slot (table recovery covers it). */
  | 'unsupported'
  /** No physical standby known and no --standby-url: nothing to fail over to. */
  | 'no-standby'
  /** The slot is not a failover slot (or does not exist yet). */
  | 'off'
  /** The standby's copy is synced and persistent (read on the standby). */
  | 'ready'
  /** The standby's copy is missing, temporary or invalidated (read on the standby). */
  | 'not-ready'
  /** Read from the primary only: a failover slot and an active named standby; the copy is not seen. */
  | 'unverified';

export type FailoverFindingId = 'failover_not_ready' | 'failover_stalled' | 'phantom_risk';

export interface FailoverFinding {
  id: FailoverFindingId;
  severity: 'unhealthy' | 'warning';
  text: string;
  fix: string;
}

export interface FailoverReport {
  state: FailoverState;
  /**
   * For the outbox_slot_failover_ready gauge: 1 ready (on the standby; from the primary alone:
   * a failover slot and every named standby slot active), 0 not, null nothing to judge.
   */
  ready: boolean | null;
  /** Decoding is held by synchronized_standby_slots (trap 2). */
  stalled: boolean;
  findings: FailoverFinding[];
}

const RELOAD = 'SELECT pg_reload_conf();';

/** synchronized_standby_slots as a list of slot names ('' → []). */
export function parseSlotList(setting: string | null | undefined): string[] {
  if (!setting) return [];
  return setting
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((s) => (s.startsWith('"') && s.endsWith('"') ? s.slice(1, -1).replaceAll('""', '"') : s));
}

/**
 * The verdict. `waitingPersisted`: the walsender was seen waiting for standby confirmation in
 * consecutive readings although every named slot is active (a standby that lags or whose
 * receiver is stuck); a single reading of the wait event is a standby a moment behind.
 */
export function judgeFailover(
  slot: string,
  p: PrimaryFailoverReading,
  standby: StandbyFailoverReading | null,
  o: { waitingPersisted?: boolean } = {},
): FailoverReport {
  const findings: FailoverFinding[] = [];
  if (p.version < FAILOVER_SLOTS_SINCE) {
    // Nothing before 17 holds decoding back for a standby: not synchronous replication either —
    // a commit waits for the synchronous standby, but its WAL is decoded and sent once it is
    // flushed on the primary (the visibility-race scenario sees such commits before they return).
    if (p.physicalStandbys > 0)
      findings.push({
        id: 'phantom_risk',
        severity: 'warning',
        text: `phantom risk: PostgreSQL ${Math.floor(p.version / 10_000)} cannot hold logical decoding back until a standby has the WAL (synchronized_standby_slots is PostgreSQL 17's; synchronous replication does not hold decoding): the relay may publish events of transactions the standby has not received yet, and after a failover to it those events are phantoms (consumers saw rows the new primary does not have; measured ≈ the standby's lag × the event rate, docs/reliability.md#failover)`,
        fix: 'upgrade to PostgreSQL 17+ and set synchronized_standby_slots with a failover slot (docs/managed-postgres.md#failover-slots); until then keep the standby close (its replay lag bounds the phantoms) and make consumers tolerate events of a transaction a failover undid',
      });
    return { state: 'unsupported', ready: null, stalled: false, findings };
  }

  const failover = p.slotFailover === true;
  const down = p.standbySlots.filter((s) => !s.exists || !s.active || s.lost);
  const waiting = p.walsenderWaitEvent === STANDBY_CONFIRMATION_WAIT;
  // Trap 2: only a failover slot waits for the named standbys.
  const stalled = failover && (down.length > 0 || (waiting && o.waitingPersisted === true));
  if (stalled) {
    const names = down.map(
      (s) => `${s.name} (${!s.exists ? 'missing' : s.lost ? 'invalidated' : 'inactive'})`,
    );
    findings.push({
      id: 'failover_stalled',
      severity: 'unhealthy',
      text:
        (down.length
          ? `decoding of slot ${slot} is held: synchronized_standby_slots names ${names.join(', ')}, whose standby does not confirm WAL`
          : `decoding of slot ${slot} is held: its walsender keeps waiting for the standbys of synchronized_standby_slots (${p.synchronizedStandbySlots.join(', ')}) to confirm WAL`) +
        `${waiting ? ` (the walsender waits in ${STANDBY_CONFIRMATION_WAIT})` : ''}; no event is published until it does. The relay stays up and resumes by itself when the standby is back`,
      fix: `bring the standby back (it reconnects to its slot), or, to publish without it (phantoms become possible at a failover), take it out of the list on the primary: ALTER SYSTEM SET synchronized_standby_slots = '${p.synchronizedStandbySlots.filter((n) => !down.some((d) => d.name === n)).join(',')}'; ${RELOAD}`,
    });
  }

  const hasStandby = standby !== null || p.physicalStandbys > 0 || p.synchronizedStandbySlots.length > 0;
  if (!hasStandby) return { state: 'no-standby', ready: null, stalled, findings };

  // Phantoms: only a failover slot waits for the standbys of synchronized_standby_slots.
  if (p.synchronizedStandbySlots.length === 0 || !failover)
    findings.push({
      id: 'phantom_risk',
      severity: 'warning',
      text: `phantom risk: ${p.synchronizedStandbySlots.length === 0 ? 'synchronized_standby_slots is not set on the primary' : `slot ${slot} is not a failover slot, so synchronized_standby_slots does not hold its decoding`}: the relay may publish events of transactions an asynchronous standby has not received yet; after a failover to that standby those events are phantoms (consumers saw rows the new primary does not have)`,
      fix: `${failover ? '' : 'run the relay with --slot-failover (the default on PostgreSQL 17+); '}on the primary: ALTER SYSTEM SET synchronized_standby_slots = '<the standby’s physical slot>'; ${RELOAD} (docs/managed-postgres.md#failover-slots)`,
    });

  if (!failover) {
    findings.push({
      id: 'failover_not_ready',
      severity: 'warning',
      text:
        p.slotFailover === null
          ? `slot ${slot} does not exist yet: nothing for a standby to sync`
          : `slot ${slot} is not a failover slot (failover = false): a failover to the standby loses it, and the relay then recovers the gap from the table`,
      fix: 'run the relay with --slot-failover (the default on PostgreSQL 17+): it turns failover on for the existing slot at start',
    });
    return { state: 'off', ready: false, stalled, findings };
  }

  if (standby === null) {
    // Without synchronized_standby_slots the primary cannot tell which standby would be promoted.
    const ready = p.synchronizedStandbySlots.length > 0 ? down.length === 0 : null;
    return { state: 'unverified', ready, stalled, findings };
  }

  const notReady = (text: string, fix: string): FailoverReport => {
    findings.push({ id: 'failover_not_ready', severity: 'warning', text, fix });
    return { state: 'not-ready', ready: false, stalled, findings };
  };
  const standbySetup =
    "on the standby: sync_replication_slots = on, hot_standby_feedback = on, primary_slot_name = '<its physical slot>', and dbname in primary_conninfo";
  if (standby.error)
    return notReady(
      `cannot read the standby (--standby-url): ${standby.error}`,
      'check --standby-url and that the standby is up',
    );
  if (!standby.inRecovery)
    return notReady(
      '--standby-url is not a standby (pg_is_in_recovery() is false)',
      'point --standby-url at the physical standby that would be promoted',
    );
  const s = standby.slot;
  if (!s)
    return notReady(
      `the standby has no copy of slot ${slot}${standby.syncReplicationSlots ? ' yet' : ' (sync_replication_slots is off there)'}: a failover to it loses the slot`,
      standby.syncReplicationSlots
        ? `the slot sync worker copies it within seconds when ${standbySetup}`
        : standbySetup,
    );
  if (!s.synced)
    return notReady(
      `the standby's slot ${slot} is not a synced copy (synced = false): it is not the primary's slot`,
      `drop that slot on the standby; ${standbySetup}`,
    );
  if (s.invalidationReason)
    return notReady(
      `the standby's copy of slot ${slot} is invalidated (${s.invalidationReason})`,
      'the sync worker recreates it once the primary’s slot is usable; check hot_standby_feedback = on on the standby',
    );
  if (s.temporary)
    return notReady(
      `the standby's copy of slot ${slot} is still temporary: a promotion now drops it (it turns persistent once the relay has advanced the slot on the primary past the standby's start point)`,
      'let the relay confirm a position: publish an event (or wait for --heartbeat-interval-ms); `status` says ready once the copy is persistent',
    );
  return { state: 'ready', ready: true, stalled, findings };
}
