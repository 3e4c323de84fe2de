/**
 * What the slowest 1 % of a live run's events waited on (docs/benchmarks.md, "Stop 46"). Reads a
 * live run's per-event dump (BENCH_LIVE_DUMP's `.pg-floor-runN.csv`: commit, the PG floor
 * reader's receipt, the broker's append of the relay's record), the relay's collections
 * (bench/gc-epoch.ts' gc-*.csv) and the broker's GC log (BENCH_LIVE_DUMP's `.broker-gc.log`),
 * and puts each event at or above the run's p99 (after its warm-up) in the first class that fits:
 *  - PostgreSQL: the floor reader received the commit after half of the event's latency;
 *  - relay GC: the relay's collections cover ≥ 30 % of [receipt, append];
 *  - relay GC, touched: one overlaps it, for less;
 *  - broker GC: a pause of the broker's overlaps it;
 *  - none of these (the relay's or the broker's own work, the scheduler on a busy machine).
 *
 *   node bench/tail-causes.ts .tmp/live.csv --warmup 33,12,6 [--gc-dir .tmp]
 *
 * --warmup: each run's warm-up seconds, as the bench printed them ("warm-up s (relay, …)").
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { warmup: { type: 'string', default: '' }, 'gc-dir': { type: 'string', default: '.tmp' } },
});
const dump = positionals[0];
if (!dump) throw new Error('usage: node bench/tail-causes.ts DUMP --warmup S1,S2,… [--gc-dir DIR]');
const warmups = values.warmup.split(',').filter(Boolean).map(Number);

type Pause = { s: number; e: number; d: number };
const relayGc: Pause[] = [];
for (const f of readdirSync(values['gc-dir']).filter((f) => /^gc-\d+\.csv$/.test(f)))
  for (const l of readFileSync(join(values['gc-dir'], f), 'utf8').trim().split('\n')) {
    const [s, d] = l.split(',').map(Number) as [number, number];
    relayGc.push({ s, e: s + d, d });
  }
const brokerGc: Pause[] = [];
if (existsSync(`${dump}.broker-gc.log`))
  for (const l of readFileSync(`${dump}.broker-gc.log`, 'utf8').split('\n')) {
    // [2026-11-29T15:03:02.591+0000][0.238s] GC(0) Pause Young … 2.685ms — logged at the pause's end.
    const m = /^\[([^\]]+)\].*Pause.* ([\d.]+)ms$/.exec(l);
    if (!m) continue;
    const end = Date.parse(m[1]!.replace(/\+0000$/, 'Z'));
    brokerGc.push({ s: end - Number(m[2]), e: end, d: Number(m[2]) });
  }
const overlapping = (ps: Pause[], from: number, to: number) => ps.filter((p) => p.e > from && p.s < to);

for (let run = 1; existsSync(`${dump}.pg-floor-run${run}.csv`); run++) {
  const rows = readFileSync(`${dump}.pg-floor-run${run}.csv`, 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split(',').map(Number) as [number, number, number, number])
    .filter((r) => !Number.isNaN(r[2]) && !Number.isNaN(r[3]));
  if (rows.length === 0) continue;
  const from = rows[0]![1] + (warmups[run - 1] ?? 0) * 1000;
  const events = rows.filter((r) => r[1] >= from);
  const latencies = events.map((r) => r[3] - r[1]).sort((a, b) => a - b);
  const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
  const counts = { postgres: 0, relayGc: 0, relayGcTouched: 0, brokerGc: 0, none: 0 };
  for (const [, commit, receipt, append] of events) {
    if (append - commit < p99) continue;
    const gc = overlapping(relayGc, receipt, append);
    if (receipt - commit > (append - commit) / 2) counts.postgres++;
    else if (gc.reduce((a, p) => a + p.d, 0) >= (append - receipt) * 0.3) counts.relayGc++;
    else if (gc.length > 0) counts.relayGcTouched++;
    else if (overlapping(brokerGc, receipt, append).length > 0) counts.brokerGc++;
    else counts.none++;
  }
  const tail = Object.values(counts).reduce((a, b) => a + b, 0);
  const pct = (n: number) => `${n} (${Math.round((100 * n) / tail)} %)`;
  console.log(
    `run ${run}: ${events.length} events, p99 ${p99.toFixed(1)} ms; the ${tail} at or above it: PostgreSQL ${pct(counts.postgres)}, relay GC ${pct(counts.relayGc)}, relay GC touched ${pct(counts.relayGcTouched)}, broker GC ${pct(counts.brokerGc)}, none of these ${pct(counts.none)}`,
  );
}
