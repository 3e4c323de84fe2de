/**
 * V8's heap sizing for a relay, set before any other module of the CLI runs (main.ts imports
 * this file first). Peak RSS of one 200,000-row transaction into Kafka on a 24 GiB machine, 5,000
 * events in flight: 230 – 251 MB with the first setting below, 171 – 190 MB with both (the old
 * generation at 2 ×); 356 MB before, with V8's defaults and 20,000 in flight (docs/benchmarks.md,
 * "Memory"). From dist/, with what a Kafka relay does not use loaded only on use: 133 – 152 MB at
 * 2 ×, 129 – 136 MB at 1.5 × (docs/benchmarks.md, "Issue 39, item 4").
 *
 * V8 sizes its heap from the machine's memory, for throughput: on a large machine it lets the
 * young generation grow to 128 MB and the old one to up to four times what is live before it
 * collects. Neither pays for a relay. Every in-flight event outlives several scavenges (it waits
 * for the broker's ack and its progress record), so a large young generation holds them without
 * letting them die young; and they all end up as old garbage, which V8 lets pile up.
 *
 * - `--semi-space-growth-factor=1` once the young generation is 16 MB (YOUNG_GENERATION_BYTES),
 *   2 below it: it stays at the size loading the CLI's modules gave it, and grows back to it
 *   after V8 shrank it. Left at V8's factor it was 128 MB within the first second of a drain,
 *   for the same CPU per event.
 * - `--heap-growing-percent=50`: the old generation is collected once it has grown by half since
 *   the last collection. V8's own factor lies between 1.1 and 4, by how fast it collects and how
 *   large its heap limit is (4 with the 4 GB limit node gives it on a large machine); this one
 *   is the same on every machine. 100 (2 ×) cost 1.5 – 2 µs of CPU per event against V8's
 *   default, 14 – 18 % of the relay's CPU in the bulk and big-transaction drains; 150 gave 193 –
 *   202 MB for 3 – 11 %. 50 (1.5 ×) against 100: the 200,000-row transaction's peak RSS 129 –
 *   136 MB instead of 133 – 152 (fewer Buffers that died old wait for a mark-compact); the bulk
 *   drain's relay CPU per event unchanged within its rounds' spread, the big transaction's
 *   0.3 – 4.8 µs higher in each of 6 pairs (median +2.4: ~15 %). Live (2,000 commits/s, 3
 *   interleaved rounds): p99 19.3 ms median at 50 against 40.4 at 100, lower in every round;
 *   25 gave no better tail than 50 (docs/benchmarks.md, "Stop 45").
 *
 * Both flags are read by V8 at every collection, which is why setting them here works. The
 * documented ways (--max-semi-space-size, --max-old-space-size) are read once, when the heap is
 * set up: only node's command line or NODE_OPTIONS can pass them, and `npx outbox-relay`,
 * `node dist/cli/main.js` or the bench do not. A node given a heap size of its own that way is
 * left as it was asked.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';

const nodeFlags = [...process.execArgv, process.env.NODE_OPTIONS ?? ''];
const given = (name: string) => nodeFlags.some((f) => f.includes(name));

/**
 * The young generation's size the relay keeps (V8's new_space `space_size`): the size loading
 * the CLI's modules gives it. It counts both semi-spaces: a scavenge comes after at most 8 MB
 * of allocation (`new_space_capacity` in `--trace-gc-nvp`; docs/benchmarks.md, "Stop 50").
 *
 * A growth factor of 1 alone is not enough: V8 shrinks the young generation when the process
 * allocates slowly (under 1 MB/s: a relay waiting for its first commit, a quiet night), and with
 * a factor of 1 it never grew back. A live relay then ran on a 1 – 2 MB young generation: a
 * scavenge every 20 – 25 ms at 2,000 commits/s, so every event in flight (waiting 10 – 20 ms
 * for its ack and its progress record) outlived two scavenges and was promoted, and the old
 * generation filled in ~5 s: a mark-compact every 5 s, 5 – 28 ms of pause each (`--trace-gc`,
 * docs/benchmarks.md, "The young generation"). So after each collection, the factor is 2 while
 * the young generation is below this size and 1 once it reached it.
 */
export const YOUNG_GENERATION_BYTES = 16 * 1024 * 1024;

if (!given('semi-space')) {
  v8.setFlagsFromString('--semi-space-growth-factor=1');
  let growing = false;
  const keep = () => {
    const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
    const grow = young !== undefined && young.space_size < YOUNG_GENERATION_BYTES;
    if (grow === growing) return;
    growing = grow;
    v8.setFlagsFromString(`--semi-space-growth-factor=${grow ? 2 : 1}`);
  };
  // Called after each collection (perf_hooks' 'gc' entries): V8 resizes the young generation
  // at the next scavenge, with the factor set here.
  new PerformanceObserver(keep).observe({ entryTypes: ['gc'] });
}
if (!given('old-space') && !given('heap-growing')) v8.setFlagsFromString('--heap-growing-percent=50');
