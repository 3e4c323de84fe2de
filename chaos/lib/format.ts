/** The scenario results as one line each, a markdown table and one JSON line: pure. */
import type { Tally } from './tally.ts';

export interface Result extends Omit<Tally, 'lostSample' | 'violationSample'> {
  scenario: string;
  /** The relays' --delivery. */
  delivery?: 'at-least-once' | 'exactly-once';
  pass: boolean;
  maxRetainedWalBytes: number;
  takeoverMs: number | null;
  recoveryMs: number | null;
  durationMs: number;
  /** Why it failed (loss, order, broken checks, an error). */
  failures: string[];
  notes: string[];
  /** Events read back for transactions the database does not have (failover scenarios). */
  phantoms?: number;
}

const mb = (b: number) => `${(b / 1048576).toFixed(1)} MiB`;
const ms = (v: number | null) => (v === null ? '–' : `${(v / 1000).toFixed(1)} s`);

export function line(r: Result): string {
  return [
    `${r.pass ? 'PASS' : 'FAIL'} ${r.scenario}:`,
    `written ${r.written}, read ${r.read}, lost ${r.lost}, duplicates ${r.duplicates},`,
    `order violations ${r.orderViolations},${r.phantoms === undefined ? '' : ` phantoms ${r.phantoms},`} max retained WAL ${mb(r.maxRetainedWalBytes)},`,
    `takeover ${ms(r.takeoverMs)}, recovery ${ms(r.recoveryMs)}, duration ${ms(r.durationMs)}`,
  ].join(' ');
}

export function table(results: readonly Result[]): string {
  const head =
    '| scenario | result | written | read | lost | duplicates | order violations | max retained WAL | takeover | recovery | duration |';
  const sep = '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = results.map(
    (r) =>
      `| ${r.scenario} | ${r.pass ? 'pass' : '**FAIL**'} | ${r.written} | ${r.read} | ${r.lost} | ${r.duplicates} | ${r.orderViolations} | ${mb(r.maxRetainedWalBytes)} | ${ms(r.takeoverMs)} | ${ms(r.recoveryMs)} | ${ms(r.durationMs)} |`,
  );
  return [head, sep, ...rows].join('\n');
}

export function json(results: readonly Result[]): string {
  return JSON.stringify({ chaos: results, pass: results.every((r) => r.pass) });
}

/**
 * Per scenario over its runs (names `scenario#run`): runs, passes, and each run's lost,
 * duplicates and order violations, in run order.
 */
export function summary(results: readonly Result[]): string {
  const by = new Map<string, Result[]>();
  for (const r of results) {
    const name = r.scenario.replace(/#\d+$/, '');
    by.set(name, [...(by.get(name) ?? []), r]);
  }
  const head = '| scenario | runs | passed | lost | duplicates | order violations | phantoms |';
  const sep = '|---|---:|---:|---|---|---|---|';
  const rows = [...by].map(([name, rs]) => {
    const list = (f: (r: Result) => number) => rs.map(f).join(' / ');
    return `| ${name} | ${rs.length} | ${rs.filter((r) => r.pass).length} | ${list((r) => r.lost)} | ${list((r) => r.duplicates)} | ${list((r) => r.orderViolations)} | ${rs.some((r) => r.phantoms !== undefined) ? list((r) => r.phantoms ?? 0) : '–'} |`;
  });
  return [head, sep, ...rows].join('\n');
}
