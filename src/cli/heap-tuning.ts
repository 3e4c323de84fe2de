/**
 * V8's heap sizing for a relay, set before any other module of the CLI runs (main.ts imports
 * this file first). Peak RSS of one 200,000-row transaction into Kafka on a 24 GiB machine, 5,000
 * events in flight: 230 – 251 MB with the first setting below, 171 – 190 MB with both; 356 MB
 * before, with V8's defaults and 20,000 in flight (docs/benchmarks.md, "Memory").
 *
 * V8 sizes its heap from the machine's memory, for throughput: on a large machine it lets the
 * young generation grow to 128 MB and the old one to up to four times what is live before it
 * collects. Neither pays for a relay. Every in-flight event outlives several scavenges (it waits
 * for the broker's ack and its progress record), so a large young generation holds them without
 * letting them die young; and they all end up as old garbage, which V8 lets pile up.
 *
 * - `--semi-space-growth-factor=1`: the young generation keeps the size loading the CLI's
 *   modules gave it (16 MB; V8 may shrink it later, never grow it again). It was 128 MB within
 *   the first second of a drain, for the same CPU per event.
 * - `--heap-growing-percent=100`: the old generation is collected once it has doubled since the
 *   last collection. V8's own factor lies between 1.1 and 4, by how fast it collects and how
 *   large its heap limit is (4 with the 4 GB limit node gives it on a large machine); this one
 *   is the same on every machine. It costs 1.5 – 2 µs of CPU per event, 14 – 18 % of the
 *   relay's CPU in the bulk and big-transaction drains; 150 gave 193 – 202 MB for 3 – 11 %.
 *
 * Both flags are read by V8 at every collection, which is why setting them here works. The
 * documented ways (--max-semi-space-size, --max-old-space-size) are read once, when the heap is
 * set up: only node's command line or NODE_OPTIONS can pass them, and `npx outbox-relay`,
 * `node dist/cli/main.js` or the bench do not. A node given a heap size of its own that way is
 * left as it was asked.
 */
import v8 from 'node:v8';

const nodeFlags = [...process.execArgv, process.env.NODE_OPTIONS ?? ''];
const given = (name: string) => nodeFlags.some((f) => f.includes(name));

if (!given('semi-space')) v8.setFlagsFromString('--semi-space-growth-factor=1');
if (!given('old-space') && !given('heap-growing')) v8.setFlagsFromString('--heap-growing-percent=100');
