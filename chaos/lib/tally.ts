/**
 * What a separate consumer read back, against what the writer committed: pure, no I/O.
 *
 * Written events are (key, seq) with seq = 0, 1, 2 … per key in commit order. A read-back record
 * is (key, seq) in partition order (a key lives in one partition, so that is the key's order).
 *   lost        written, never read
 *   duplicates  reads beyond the first of the same (key, seq) (at-least-once)
 *   violations  seq s of a key read while some seq below s of that key was not read yet (a replay
 *               of an older seq after a newer one is a duplicate, not a violation)
 */
export interface KeySeq {
  key: string;
  seq: number;
}

export interface Tally {
  written: number;
  read: number;
  lost: number;
  duplicates: number;
  orderViolations: number;
  /** The first few lost events and violations, for the report. */
  lostSample: string[];
  violationSample: string[];
}

export function tally(written: readonly KeySeq[], read: readonly KeySeq[]): Tally {
  const tracked = new Set(written.map((w) => w.key));
  const mine = read.filter((r) => tracked.has(r.key));
  const seen = new Set(mine.map((r) => `${r.key}#${r.seq}`));
  const lost = written.filter((w) => !seen.has(`${w.key}#${w.seq}`)).map((w) => `${w.key}#${w.seq}`);
  const violations = orderViolations(mine);
  return {
    written: written.length,
    read: mine.length,
    lost: lost.length,
    duplicates: mine.length - seen.size,
    orderViolations: violations.length,
    lostSample: lost.slice(0, 5),
    violationSample: violations.slice(0, 5),
  };
}

/** Linear per key: `next` is the lowest seq not read yet; reading above it is a violation. */
export function orderViolations(read: readonly KeySeq[]): string[] {
  const next = new Map<string, number>();
  const ahead = new Map<string, Set<number>>();
  const out: string[] = [];
  for (const { key, seq } of read) {
    let n = next.get(key) ?? 0;
    if (seq < n) continue; // a replay
    if (seq > n) out.push(`key ${key}: seq ${seq} arrived before seq ${n}`);
    let set = ahead.get(key);
    if (!set) ahead.set(key, (set = new Set()));
    set.add(seq);
    while (set.has(n)) set.delete(n++);
    next.set(key, n);
  }
  return out;
}
