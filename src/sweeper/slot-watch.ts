import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import type { SlotMetrics } from '../observability/metrics.ts';
import { slotInvalidatedError } from '../replication/preflight.ts';
import type { InvalidationReason } from '../store/slot-invalidation.ts';
import { readSlotRow, slotOwnershipError } from '../store/slots.ts';
import {
  crossing,
  formatBytes,
  type Level,
  levelOf,
  type SlotSample,
  type Thresholds,
  WAL_STATUSES,
  type WalStatus,
  walBudget,
} from './wal-budget.ts';

export interface SlotReading {
  active: boolean;
  activePid: number | null;
  walStatus: WalStatus | null;
  /** Why PostgreSQL invalidated the slot (wal_status = lost): store/slot-invalidation.ts; else null. */
  invalidationReason: InvalidationReason | null;
  /** null: max_slot_wal_keep_size is unlimited. */
  safeWalSizeBytes: number | null;
  restartLsn: string | null;
  confirmedFlushLsn: string | null;
  /** pg_current_wal_lsn() - restart_lsn: the WAL the server keeps for this slot. */
  retainedBytes: number;
  /** pg_current_wal_lsn() - confirmed_flush_lsn. */
  confirmedLagBytes: number;
}

export interface SlotWatchDeps {
  db: pg.Pool;
  slot: string;
  thresholds: Thresholds;
  metrics: SlotMetrics;
  log: Logger;
}

/**
 * Reads the relay's slot from pg_replication_slots, exports it as gauges, and logs once per
 * threshold crossing and per wal_status change. The cases:
 *  - retained WAL crosses --slot-warn-bytes / --slot-critical-bytes → one warn / error line
 *    (with the rate and the time left before invalidation), one info line when it clears;
 *  - wal_status becomes 'extended' (warn) or 'unreserved' (error: the next checkpoint may
 *    invalidate the slot), back to 'reserved' (info);
 *  - wal_status 'lost' → throws SLOT_INVALIDATED (fatal, with what to do);
 *  - the slot is missing → warned once (the session fails and preflight recreates it).
 * The maths is in wal-budget.ts.
 */
export class SlotWatch {
  readonly #d: SlotWatchDeps;
  #previous: SlotSample | null = null;
  #level: Level = 'ok';
  #walStatus: WalStatus | null = null;
  #missingWarned = false;

  constructor(deps: SlotWatchDeps) {
    this.#d = deps;
  }

  async read(): Promise<SlotReading | null> {
    return readSlot(this.#d.db, this.#d.slot);
  }

  /** One check: read, export, log crossings. Throws SLOT_INVALIDATED when the slot is lost. */
  async check(nowMs = Date.now()): Promise<SlotReading | null> {
    const { metrics: m, log, slot, thresholds } = this.#d;
    const s = await this.read();
    if (!s) {
      if (!this.#missingWarned) log.warn({ slot }, 'the replication slot does not exist (dropped?)');
      this.#missingWarned = true;
      m.clear();
      return null;
    }
    this.#missingWarned = false;
    m.retainedWalBytes.set(s.retainedBytes);
    m.confirmedLagBytes.set(s.confirmedLagBytes);
    m.active.set(s.active ? 1 : 0);
    m.safeWalSizeBytes.set(s.safeWalSizeBytes ?? -1);
    for (const st of WAL_STATUSES) m.walStatus.set({ status: st }, st === s.walStatus ? 1 : 0);

    if (s.walStatus === 'lost') {
      const e = slotInvalidatedError(slot, s.confirmedFlushLsn, s.invalidationReason);
      log.fatal(
        { slot, lsn: s.confirmedFlushLsn, code: e.code, invalidation_reason: s.invalidationReason },
        e.explanation,
      );
      throw e;
    }

    const sample: SlotSample = {
      atMs: nowMs,
      retainedBytes: s.retainedBytes,
      safeWalSizeBytes: s.safeWalSizeBytes,
    };
    const budget = walBudget(this.#previous, sample);
    this.#previous = sample;
    const fields = {
      slot,
      lsn: s.confirmedFlushLsn,
      retained_bytes: s.retainedBytes,
      wal_status: s.walStatus,
      safe_wal_size_bytes: s.safeWalSizeBytes,
      growth_bytes_per_second: budget.growthBytesPerSecond,
      seconds_to_exhaustion: budget.secondsToExhaustion,
    };
    const left =
      budget.secondsToExhaustion === null
        ? ''
        : `; at the current rate it is invalidated in about ${Math.round(budget.secondsToExhaustion)} s`;

    const level = levelOf(s.retainedBytes, thresholds, this.#level);
    const change = crossing(this.#level, level);
    this.#level = level;
    if (change === 'raised') {
      const threshold = level === 'critical' ? thresholds.criticalBytes : thresholds.warnBytes;
      const text = `the slot retains ${formatBytes(s.retainedBytes)} of WAL, above ${level === 'critical' ? '--slot-critical-bytes' : '--slot-warn-bytes'} (${formatBytes(threshold)})${left}`;
      if (level === 'critical') log.error(fields, text);
      else log.warn(fields, text);
    } else if (change === 'cleared') {
      log.info(fields, `the slot's retained WAL is back to ${formatBytes(s.retainedBytes)} (${level})`);
    }

    if (s.walStatus !== this.#walStatus) {
      if (s.walStatus === 'unreserved') {
        log.error(
          fields,
          `wal_status is unreserved: the WAL the slot needs is past max_slot_wal_keep_size and the next checkpoint may remove it, invalidating the slot${left}`,
        );
      } else if (s.walStatus === 'extended') {
        log.warn(fields, 'wal_status is extended: the slot keeps WAL beyond max_wal_size');
      } else if (this.#walStatus !== null && s.walStatus === 'reserved') {
        log.info(fields, 'wal_status is reserved again');
      }
      this.#walStatus = s.walStatus;
    }
    return s;
  }
}

/**
 * The slot's row of pg_replication_slots with the WAL distances; null when it does not exist.
 * Every slot read and write goes through here (status, slot drop, slot watch, retention). Slot
 * names are global to the cluster: a slot of this name on another database throws
 * SLOT_OTHER_DATABASE naming both databases — it is never read as, or acted on as, ours.
 */
export async function readSlot(db: pg.Pool | pg.ClientBase, slot: string): Promise<SlotReading | null> {
  const s = await readSlotRow(db, slot);
  if (!s) return null;
  if (s.database !== s.current_db) throw slotOwnershipError(slot, s.database, s.current_db);
  return {
    active: s.active,
    activePid: s.active_pid,
    walStatus: s.wal_status as WalStatus | null,
    invalidationReason: s.invalidation_reason,
    safeWalSizeBytes: s.safe_wal_size === null ? null : Number(s.safe_wal_size),
    restartLsn: s.restart_lsn,
    confirmedFlushLsn: s.confirmed_flush_lsn,
    // NULL once the slot is invalidated (restart_lsn is gone).
    retainedBytes: Math.max(0, Number(s.retained ?? 0)),
    confirmedLagBytes: Math.max(0, Number(s.lag ?? 0)),
  };
}
