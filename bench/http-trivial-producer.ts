/**
 * The webhook ceiling of the bulk drain (bench/trivial-producers.ts): undici POSTs doing nothing but
 * send relay-shaped webhooks — a VALUE_BYTES body, the relay's headers (outbox-topic and the five
 * outbox-header-*), Standard Webhooks signed with a unique webhook-id — over a keep-alive pool of
 * WINDOW connections, counting a request only once it is answered 2xx (anything else fails the
 * run), at most WINDOW in flight, as --http-max-in-flight. No database, no routing, no per-key
 * order. One long-lived process for every round: "run N" on stdin sends N requests and waits for
 * every answer, then prints "done <seconds>" (or "failed <why>"); EOF exits.
 *
 *   node bench/http-trivial-producer.ts URL SECRET WINDOW VALUE_BYTES
 */
import { createHmac, createSecretKey, randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Agent } from 'undici';

const [url, secret, windowArg, valueBytesArg] = process.argv.slice(2);
const window = Number(windowArg);
const valueBytes = Number(valueBytesArg);
const key = createSecretKey(Buffer.from(secret!.replace(/^whsec_/, ''), 'base64'));
const target = new URL(url!);
const agent = new Agent({ connections: window, pipelining: 1 });

async function post(i: number): Promise<void> {
  const body = Buffer.alloc(valueBytes, 'x');
  body.write(String(i));
  const id = randomUUID();
  const ts = Math.floor(Date.now() / 1000);
  const sig = createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest('base64');
  const res = await agent.request({
    origin: target.origin,
    path: target.pathname,
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/octet-stream',
      'user-agent': 'pg-outbox-relay',
      'outbox-topic': 'outbox.event.Bulk',
      'outbox-header-id': id,
      'outbox-header-event_type': 'BenchEvent',
      'outbox-header-aggregate_type': 'Bulk',
      'outbox-header-aggregate_id': `agg-${i % 1000}`,
      'outbox-header-content-type': 'application/octet-stream',
      'webhook-id': id,
      'webhook-timestamp': String(ts),
      'webhook-signature': `v1,${sig}`,
    },
  });
  await res.body.dump();
  if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
}

async function run(n: number): Promise<string | null> {
  let next = 0;
  let failure: string | null = null;
  const worker = async () => {
    while (failure === null && next < n) {
      const i = next++;
      await post(i).catch((e: unknown) => {
        failure ??= e instanceof Error ? e.message : String(e);
      });
    }
  };
  await Promise.all(Array.from({ length: window }, worker));
  return failure;
}

console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.startsWith('run ')) continue;
  const n = Number(line.slice(4));
  const t0 = performance.now();
  const why = await run(n);
  console.log(why === null ? `done ${(performance.now() - t0) / 1000}` : `failed ${why}`);
}
await agent.close();
