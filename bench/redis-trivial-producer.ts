/**
 * The Redis Streams ceiling of the bulk drain (bench/trivial-producers.ts): ioredis, doing nothing
 * but run the relay's dedup script (src/sinks/redis/stream-entry.ts: GET the dedup key, XADD, SET
 * it with a TTL — so the server does the relay's work) for relay-shaped entries (the relay's
 * fields: id, type, four h: headers, a VALUE_BYTES value; a unique event id each), counting an
 * entry only once the script answered `stored` (an error fails the run), at most WINDOW awaiting
 * their reply on one auto-pipelined connection, as --redis-max-pending. No database, no routing,
 * no per-key order. One long-lived process for every round: "run N" on stdin publishes N entries
 * and waits for every reply, then prints "done <seconds>" (or "failed <why>"); EOF exits.
 *
 *   node bench/redis-trivial-producer.ts URL STREAM WINDOW VALUE_BYTES
 */
import { createHash, randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { DEDUP_SCRIPT, dedupKey } from '../src/sinks/redis/stream-entry.ts';

const [url, stream, windowArg, valueBytesArg] = process.argv.slice(2);
const window = Number(windowArg);
const valueBytes = Number(valueBytesArg);
const TTL_MS = 86_400_000;

const redis = new Redis(url!, {
  protocol: 2,
  enableAutoPipelining: true,
  connectionName: 'redis-trivial-producer',
});
await redis.script('LOAD', DEDUP_SCRIPT);
const sha = createHash('sha1').update(DEDUP_SCRIPT).digest('hex');

let run: { n: number; sent: number; done: (why: string | null) => void } | null = null;
let inFlight = 0;
let failure: string | null = null;

function pump(): void {
  const r = run;
  if (!r) return;
  while (failure === null && inFlight < window && r.sent < r.n) {
    const i = r.sent++;
    const value = Buffer.alloc(valueBytes, 'x');
    value.write(String(i));
    const id = randomUUID();
    inFlight++;
    redis
      .evalsha(
        sha,
        2,
        stream!,
        dedupKey(stream!, id),
        TTL_MS,
        0,
        ...['id', id, 'type', 'BenchEvent', 'h:aggregate_type', 'Bulk', 'h:aggregate_id', `agg-${i % 1000}`],
        ...['h:content-type', 'application/octet-stream', 'value', value],
      )
      .then(
        (reply) => {
          if (!Array.isArray(reply) || reply[0] !== 'stored') failure ??= `answered ${JSON.stringify(reply)}`;
        },
        (e: Error) => {
          failure ??= e.message;
        },
      )
      .finally(() => {
        inFlight--;
        pump();
      });
  }
  if (inFlight === 0 && (failure !== null || r.sent >= r.n)) {
    run = null;
    r.done(failure);
  }
}

console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.startsWith('run ')) continue;
  const n = Number(line.slice(4));
  const t0 = performance.now();
  const why = await new Promise<string | null>((done) => {
    run = { n, sent: 0, done };
    pump();
  });
  console.log(why === null ? `done ${(performance.now() - t0) / 1000}` : `failed ${why}`);
}
redis.disconnect();
