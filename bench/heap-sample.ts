/**
 * A preload for a relay (node --import): V8's sampling heap profiler over a window of its life,
 * written as a .heapprofile (Chrome DevTools opens it; bench/heap-summary.ts prints it).
 *
 *   HEAP_SAMPLE=promoted npm run bench:ab -- --live 50 … --a-node-args="--import $PWD/bench/heap-sample.ts"
 *   BENCH_NODE_ARGS="--import $PWD/bench/heap-sample.ts" npm run bench   (bench:ab takes --a/--b-node-args only)
 *
 * HEAP_SAMPLE says which objects the profile keeps besides those still alive at its end:
 *  - `all`: every allocation of the window (what allocates);
 *  - `promoted` (default): also those a mark-compact collected — in a steady relay mostly
 *    objects that were promoted and died old, i.e. what the scavenges could not free (how the
 *    span options' getter was found: docs/benchmarks.md, "The object-literal getter");
 *  - `live`: none; two full GCs (`--expose-gc`) before it ends, so only what is still reachable.
 * HEAP_SAMPLE_START_S (15) and HEAP_SAMPLE_FOR_S (20) place the window; HEAP_SAMPLE_OUT
 * (.tmp/heap-{pid}.heapprofile) the file.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const mode = process.env.HEAP_SAMPLE ?? 'promoted';
if (!['all', 'promoted', 'live'].includes(mode))
  throw new Error(`HEAP_SAMPLE=${mode}: all, promoted or live`);
const startMs = Number(process.env.HEAP_SAMPLE_START_S ?? 15) * 1000;
const forMs = Number(process.env.HEAP_SAMPLE_FOR_S ?? 20) * 1000;
const out = (process.env.HEAP_SAMPLE_OUT ?? '.tmp/heap-{pid}.heapprofile').replace(
  '{pid}',
  String(process.pid),
);
const gc = (globalThis as { gc?: () => void }).gc;
if (mode === 'live' && !gc) throw new Error('HEAP_SAMPLE=live needs node --expose-gc');

const session = new Session();
session.connect();
const post = <T>(method: string, params: object = {}) =>
  new Promise<T>((resolve, reject) =>
    session.post(method, params, (e, r) => (e ? reject(e) : resolve(r as T))),
  );

setTimeout(async () => {
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: mode !== 'live',
    includeObjectsCollectedByMinorGC: mode === 'all',
  });
  setTimeout(async () => {
    if (mode === 'live') {
      gc!();
      gc!();
    }
    const { profile } = await post<{ profile: unknown }>('HeapProfiler.stopSampling');
    writeFileSync(out, JSON.stringify(profile));
    process.stderr.write(`heap-sample: ${mode} profile of ${forMs / 1000} s in ${out}\n`);
  }, forMs).unref();
}, startMs).unref();
