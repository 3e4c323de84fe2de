/**
 * A preload for a relay (node --import): each of its garbage collections as one CSV line — start
 * (ms since the epoch), duration (ms), kind (perf_hooks' NODE_PERFORMANCE_GC_*: 1 minor, 4 major,
 * 8 incremental, 16 weak callbacks) — in GC_EPOCH_DIR (.tmp)/gc-{pid}.csv, so that a live
 * run's dump (BENCH_LIVE_DUMP) can be lined up with them by bench/tail-causes.ts. --trace-gc
 * gives times since the process started, which no other log shares.
 *
 *   BENCH_NODE_ARGS="--import $PWD/bench/gc-epoch.ts" BENCH_LIVE_DUMP=$PWD/.tmp/live.csv npm run bench -- …
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PerformanceObserver, performance } from 'node:perf_hooks';

const dir = process.env.GC_EPOCH_DIR ?? '.tmp';
mkdirSync(dir, { recursive: true });
const file = join(dir, `gc-${process.pid}.csv`);
let lines: string[] = [];
const flush = () => {
  if (lines.length === 0) return;
  appendFileSync(file, `${lines.join('\n')}\n`);
  lines = [];
};
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = (e as { detail?: { kind?: number } }).detail?.kind ?? 0;
    lines.push(`${(performance.timeOrigin + e.startTime).toFixed(1)},${e.duration.toFixed(2)},${kind}`);
  }
}).observe({ entryTypes: ['gc'] });
// Written once a second, off the collections' own path; the last second at exit.
setInterval(flush, 1000).unref();
process.once('exit', flush);
