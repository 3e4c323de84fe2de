/**
 * Outbox ids as an int8multirange literal: the batch's ids merged into runs, so the progress
 * statement's size follows the number of runs (usually one), not the number of events.
 * Pure; ids are decimal bigint strings (as pg returns bigint), in any order, duplicates allowed.
 */
export function idRanges(ids: readonly string[]): string {
  if (ids.length === 0) return '{}';
  const sorted = ids.map((id) => BigInt(id)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const parts: string[] = [];
  let lo = sorted[0]!;
  let hi = lo; // inclusive
  for (let i = 1; i < sorted.length; i++) {
    const x = sorted[i]!;
    if (x <= hi + 1n) {
      if (x > hi) hi = x;
      continue;
    }
    parts.push(`[${lo},${hi + 1n})`);
    lo = x;
    hi = x;
  }
  parts.push(`[${lo},${hi + 1n})`);
  return `{${parts.join(',')}}`;
}

/** Parses an int8multirange's text ('{[1,5),[7,8)}', canonical half-open) into [lo, hi) pairs. */
export function parseIdRanges(text: string): [bigint, bigint][] {
  const out: [bigint, bigint][] = [];
  for (const m of text.matchAll(/\[(-?\d+),(-?\d+)\)/g)) out.push([BigInt(m[1]!), BigInt(m[2]!)]);
  return out;
}

/** Whether id is inside one of the ranges. */
export function coveredBy(ranges: readonly [bigint, bigint][], id: bigint): boolean {
  return ranges.some(([lo, hi]) => id >= lo && id < hi);
}
