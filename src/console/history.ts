import { walBudget } from '../sweeper/wal-budget.ts';

/** One raw reading by the console's sampler: counters as totals, the slot as read. */
export interface Reading {
  at: number;
  /** null: the slot could not be read (missing, or the database is down). */
  retainedBytes: number | null;
  safeWalSizeBytes: number | null;
  publishedTotal: number;
  /** outbox_end_to_end_lag_seconds' sum and count. */
  lagSum: number;
  lagCount: number;
}

/** A point of the charts, derived from two consecutive readings. */
export interface Point {
  at: number;
  retainedBytes: number | null;
  /** Mean end-to-end lag of the events published since the previous reading; null when none were. */
  lagSeconds: number | null;
  publishedPerSecond: number | null;
}

/**
 * The last `spanMs` of readings in a ring buffer (memory bounded by spanMs / interval), and what
 * the overview derives from them: the chart points, the publish rate and the time until the
 * slot's safe WAL size is used up (wal-budget.ts, over the whole window for a steadier rate).
 * Counters that go down (a new registry) start a new series: no negative rates.
 */
export class History {
  readonly spanMs: number;
  readonly #cap: number;
  readonly #readings: Reading[] = [];
  readonly #points: Point[] = [];

  constructor(spanMs: number, intervalMs: number) {
    this.spanMs = spanMs;
    this.#cap = Math.ceil(spanMs / intervalMs) + 1;
  }

  add(r: Reading): void {
    const prev = this.#readings[this.#readings.length - 1];
    let lag: number | null = null;
    let rate: number | null = null;
    if (prev && r.at > prev.at && r.publishedTotal >= prev.publishedTotal && r.lagCount >= prev.lagCount) {
      const n = r.lagCount - prev.lagCount;
      lag = n > 0 ? (r.lagSum - prev.lagSum) / n : null;
      rate = ((r.publishedTotal - prev.publishedTotal) * 1000) / (r.at - prev.at);
    }
    this.#push(this.#readings, r);
    this.#push(this.#points, {
      at: r.at,
      retainedBytes: r.retainedBytes,
      lagSeconds: lag,
      publishedPerSecond: rate,
    });
  }

  #push<T>(a: T[], x: T): void {
    a.push(x);
    if (a.length > this.#cap) a.splice(0, a.length - this.#cap);
  }

  points(): readonly Point[] {
    return this.#points;
  }

  latest(): Point | null {
    return this.#points[this.#points.length - 1] ?? null;
  }

  /** Events per second over the last `overMs` (default: one minute), null before two readings. */
  publishRate(overMs = 60_000): number | null {
    const last = this.#readings[this.#readings.length - 1];
    if (!last) return null;
    const first = this.#readings.find((r) => r.at >= last.at - overMs && r.at < last.at);
    if (!first || last.publishedTotal < first.publishedTotal) return null;
    return ((last.publishedTotal - first.publishedTotal) * 1000) / (last.at - first.at);
  }

  /** Seconds until safe_wal_size is exhausted at the window's growth rate (null: no limit or not growing). */
  secondsToExhaustion(): number | null {
    const withSlot = this.#readings.filter((r) => r.retainedBytes !== null);
    const last = withSlot[withSlot.length - 1];
    if (!last) return null;
    const first = withSlot.length > 1 ? withSlot[0]! : null;
    const sample = (r: Reading) => ({
      atMs: r.at,
      retainedBytes: r.retainedBytes!,
      safeWalSizeBytes: r.safeWalSizeBytes,
    });
    return walBudget(first && sample(first), sample(last)).secondsToExhaustion;
  }
}
