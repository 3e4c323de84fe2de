/**
 * The soak's figures from its samples (bench/soak.ts), pure: a least-squares slope over the
 * samples of the process running at the end, p99 per minute and its drift.
 */
import { median, percentile } from './stats.ts';

export type Point = { t: number; y: number };

/** Least-squares slope of y over t (y units per t unit); NaN with fewer than two distinct t. */
export function slope(points: Point[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.y - my);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

/**
 * The samples a growth slope is judged on: the last 20 minutes (the last 2/3 of a run shorter than
 * 30 minutes), and of those only the relay process running at the end, from `settleMinutes` after
 * its start (a restart inside the window starts a fresh heap: its first minute is its warm-up,
 * not growth). t in minutes from the soak's start.
 */
export function slopeWindow(
  points: Point[],
  runMinutes: number,
  restartAt: number | null,
  settleMinutes = 1,
): Point[] {
  const from = runMinutes - Math.min(20, (runMinutes * 2) / 3);
  const processFrom = restartAt === null ? 0 : restartAt + settleMinutes;
  return points.filter((p) => p.t >= Math.max(from, processFrom) && Number.isFinite(p.y));
}

/** MB per 10 minutes of `points` (t in minutes, y in MB) over slopeWindow. */
export function growthPer10Min(points: Point[], runMinutes: number, restartAt: number | null): number {
  return slope(slopeWindow(points, runMinutes, restartAt)) * 10;
}

/**
 * Latencies (ms) of the events that were relayed, bucketed by `widthMs` of their commit time:
 * `commitAt[i]` / `ackAt[i]` (ms since the epoch, NaN = none), from `startMs`.
 */
function latencyBuckets(
  commitAt: Float64Array,
  ackAt: Float64Array,
  count: number,
  startMs: number,
  widthMs: number,
): Float64Array[] {
  const buckets: number[][] = [];
  for (let i = 0; i < count; i++) {
    const c = commitAt[i]!;
    const a = ackAt[i]!;
    if (Number.isNaN(c) || Number.isNaN(a)) continue;
    const k = Math.floor((c - startMs) / widthMs);
    if (k < 0) continue;
    (buckets[k] ??= []).push(a - c);
  }
  // Sparse (a bucket without events stays a hole: flatMap skips it), each sorted.
  return buckets.map((b) => Float64Array.from(b).sort());
}

/** p99 per minute of commit time (latencyBuckets of 60 s). */
export function minuteP99s(
  commitAt: Float64Array,
  ackAt: Float64Array,
  count: number,
  startMs: number,
): { minute: number; n: number; p99: number }[] {
  return latencyBuckets(commitAt, ackAt, count, startMs, 60_000).flatMap((b, minute) =>
    b ? [{ minute, n: b.length, p99: percentile(b, 99) }] : [],
  );
}

/**
 * The largest minute p99 over the median of the first minutes' (the first 5, or the first third
 * of a shorter run), leaving out `exclude` (the restart's minutes: reported apart).
 */
export function p99Drift(
  minutes: { minute: number; p99: number }[],
  runMinutes: number,
  exclude: number[] = [],
): { baseline: number; worst: number; drift: number; worstMinute: number } {
  const baseMinutes = Math.max(1, Math.min(5, Math.floor(runMinutes / 3)));
  const kept = minutes.filter((m) => !exclude.includes(m.minute));
  const baseline = median(kept.filter((m) => m.minute < baseMinutes).map((m) => m.p99));
  let worst = Number.NEGATIVE_INFINITY;
  let worstMinute = -1;
  for (const m of kept)
    if (m.p99 > worst) {
      worst = m.p99;
      worstMinute = m.minute;
    }
  return { baseline, worst, drift: worst / baseline, worstMinute };
}

/** p50 / p99 / max (ms) per second of commit time (latencyBuckets of 1 s). */
export function secondStats(
  commitAt: Float64Array,
  ackAt: Float64Array,
  count: number,
  startMs: number,
): { second: number; n: number; p50: number; p99: number; max: number }[] {
  return latencyBuckets(commitAt, ackAt, count, startMs, 1000).flatMap((b, second) =>
    b ? [{ second, n: b.length, p50: percentile(b, 50), p99: percentile(b, 99), max: b.at(-1)! }] : [],
  );
}
