/** Small numeric helpers for the report. */

export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export type Dist = { n: number; p50: number; p90: number; p99: number; max: number; mean: number };

export function distribution(values: number[]): Dist {
  const s = Float64Array.from(values).sort();
  const mean = values.reduce((a, b) => a + b, 0) / (values.length || 1);
  return {
    n: s.length,
    p50: percentile(s, 50),
    p90: percentile(s, 90),
    p99: percentile(s, 99),
    max: s.length ? s[s.length - 1]! : Number.NaN,
    mean,
  };
}

export const round = (n: number, digits = 1) => Number(n.toFixed(digits));
export const pct = (ratio: number) => `${(ratio * 100).toFixed(0)} %`;
export const us = (seconds: number, events: number) => (seconds / events) * 1e6;

export function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

/** The median and the largest of some runs' figures (larger is worse). */
export function medianAndWorst(values: number[]): { median: number; worst: number } {
  return { median: median(values), worst: values.length ? Math.max(...values) : Number.NaN };
}

/** A relay figure over the sum of the floors' same figures (e.g. p99 ÷ (PG p99 + Kafka p99)). */
export function overFloor(relay: number, pgFloor: number, kafkaFloor: number): number {
  return relay / (pgFloor + kafkaFloor);
}
