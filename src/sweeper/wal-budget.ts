/**
 * Slot health maths, pure: how much WAL the slot pins, whether that crossed a threshold, and
 * how long until PostgreSQL invalidates the slot at the current rate. The SQL that feeds it is
 * in slot-watch.ts.
 *
 * PostgreSQL 15's wal_status of a slot:
 *  - reserved   — the WAL it needs is within max_wal_size;
 *  - extended   — beyond max_wal_size, but kept (wal_keep_size or max_slot_wal_keep_size);
 *  - unreserved — no longer guaranteed: the next checkpoint may remove it (slot about to be lost);
 *  - lost       — removed: the slot is invalidated and can never be streamed from again.
 * safe_wal_size is how many more bytes of WAL may be written before the slot is in danger of
 * becoming 'lost' (NULL when max_slot_wal_keep_size = -1, i.e. unlimited: the disk is the limit).
 */
export type WalStatus = 'reserved' | 'extended' | 'unreserved' | 'lost';
export const WAL_STATUSES: readonly WalStatus[] = ['reserved', 'extended', 'unreserved', 'lost'];

export type Level = 'ok' | 'warn' | 'critical';

export interface Thresholds {
  /** Retained WAL bytes at which to warn; 0 = never. */
  warnBytes: number;
  /** Retained WAL bytes at which to log an error; 0 = never. */
  criticalBytes: number;
}

export interface SlotSample {
  atMs: number;
  retainedBytes: number;
  /** null: max_slot_wal_keep_size is unlimited. */
  safeWalSizeBytes: number | null;
}

/** A level is left only below this fraction of its threshold, so a value hovering at it logs once. */
export const HYSTERESIS = 0.9;

/** The threshold level of `retainedBytes`, given the previous level (hysteresis on the way down). */
export function levelOf(retainedBytes: number, t: Thresholds, previous: Level = 'ok'): Level {
  const over = (threshold: number, held: boolean) =>
    threshold > 0 && retainedBytes >= (held ? threshold * HYSTERESIS : threshold);
  if (over(t.criticalBytes, previous === 'critical')) return 'critical';
  if (over(t.warnBytes, previous !== 'ok')) return 'warn';
  return 'ok';
}

export interface Budget {
  /** How fast the retained WAL grows (bytes/s, negative when the slot catches up); null with one sample. */
  growthBytesPerSecond: number | null;
  /**
   * Seconds until safe_wal_size is used up at that rate: then the next checkpoint invalidates the
   * slot. null when there is no limit (unlimited max_slot_wal_keep_size), no rate yet, or the
   * retained WAL is not growing.
   */
  secondsToExhaustion: number | null;
}

/** The WAL budget from two consecutive samples (the rate) and the current one (what is left). */
export function walBudget(previous: SlotSample | null, current: SlotSample): Budget {
  const dt = previous ? (current.atMs - previous.atMs) / 1000 : 0;
  const growth = previous && dt > 0 ? (current.retainedBytes - previous.retainedBytes) / dt : null;
  const safe = current.safeWalSizeBytes;
  let secondsToExhaustion: number | null = null;
  if (safe !== null) {
    if (safe <= 0) secondsToExhaustion = 0;
    else if (growth !== null && growth > 0) secondsToExhaustion = safe / growth;
  }
  return { growthBytesPerSecond: growth, secondsToExhaustion };
}

/** What changed between two levels, for a log line once per crossing (null: nothing to say). */
export function crossing(previous: Level, current: Level): 'raised' | 'cleared' | null {
  if (previous === current) return null;
  const rank = { ok: 0, warn: 1, critical: 2 } as const;
  return rank[current] > rank[previous] ? 'raised' : 'cleared';
}

/** A size as operators read it (logs, `status`, the console): 1536 → "1.5 KiB". */
export function formatBytes(n: number | null): string {
  if (n === null) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(1)} ${units[u]}`;
}
