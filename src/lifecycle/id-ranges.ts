/**
 * Outbox ids as an int8multirange literal: the batch's ids merged into runs, so the progress
 * statement's size follows the number of runs (usually one), not the number of events.
 * Pure; ids are decimal bigint strings (as pg returns bigint), in any order, duplicates allowed.
 */
export function idRanges(ids: readonly string[]): string {
  if (ids.length === 0) return '{}';
  return idRangesAscending(ids) ?? idRangesSorted(ids);
}

/**
 * The usual batch: ids below 2^53 in ascending order (a stream's, in commit order and mostly
 * consecutive), merged in one pass with no array; null for anything else (idRangesSorted).
 */
function idRangesAscending(ids: readonly string[]): string | null {
  let out = '{';
  let lo = Number(ids[0]);
  if (!Number.isSafeInteger(lo)) return null;
  let hi = lo; // inclusive
  for (let i = 1; i < ids.length; i++) {
    const x = Number(ids[i]);
    if (!Number.isSafeInteger(x) || x < hi) return null;
    if (x <= hi + 1) {
      hi = x;
      continue;
    }
    out += `[${lo},${hi + 1}),`;
    lo = x;
    hi = x;
  }
  return `${out}[${lo},${hi + 1})}`;
}

function idRangesSorted(ids: readonly string[]): string {
  // Ids below 2^53 (all of them, in practice) are merged as doubles: one typed-array sort, no
  // BigInt per event. Anything else takes the exact BigInt path.
  const n = new Float64Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const x = Number(ids[i]);
    if (!Number.isSafeInteger(x)) return idRangesBig(ids);
    n[i] = x;
  }
  n.sort();
  let out = '{';
  let lo = n[0]!;
  let hi = lo; // inclusive
  for (let i = 1; i < n.length; i++) {
    const x = n[i]!;
    if (x <= hi + 1) {
      if (x > hi) hi = x;
      continue;
    }
    out += `[${lo},${hi + 1}),`;
    lo = x;
    hi = x;
  }
  return `${out}[${lo},${hi + 1})}`;
}

function idRangesBig(ids: readonly string[]): string {
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

/**
 * Whether the decimal id is inside one of the sorted, disjoint ranges (binary search: the stream
 * asks once per event). An id that is not an integer is covered by nothing.
 */
export function sortedRangesCover(ranges: readonly [bigint, bigint][], id: string): boolean {
  if (ranges.length === 0) return false;
  let x: bigint;
  try {
    x = BigInt(id);
  } catch {
    return false;
  }
  if (x >= ranges[ranges.length - 1]![1]) return false; // the usual case: an id newer than the record
  let lo = 0;
  let hi = ranges.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b] = ranges[mid]!;
    if (x < a) hi = mid - 1;
    else if (x >= b) lo = mid + 1;
    else return true;
  }
  return false;
}

/** The ids outside `ranges` (sorted, disjoint, half-open), as half-open ranges over the bigint domain. */
export function complement(ranges: readonly [bigint, bigint][]): [bigint, bigint][] {
  const MIN = -(2n ** 63n);
  const MAX = 2n ** 63n - 1n;
  const out: [bigint, bigint][] = [];
  let from = MIN;
  for (const [lo, hi] of ranges) {
    if (lo > from) out.push([from, lo]);
    from = hi;
  }
  if (from < MAX) out.push([from, MAX]);
  return out;
}
