/**
 * The NATS JetStream ceiling of the bulk drain (bench/trivial-producers.ts): nats.js core publish, doing
 * nothing but send relay-shaped messages (a VALUE_BYTES payload, the relay's five headers and a
 * unique Nats-Msg-Id, so the stream's duplicate check runs as for the relay) with a reply inbox,
 * counting a message only once its PubAck names a stream (an error or no answer fails the run), at
 * most WINDOW awaiting their PubAck, as --nats-max-pending. No database, no routing, no per-key
 * order, one reply subscription, a header block written by hand (one string, no MsgHdrsImpl).
 * (Java's jnats is not among the machine's Maven packages; the client's cost is in the figure.)
 * One long-lived process for every round: "run N" on stdin publishes N messages and waits for every
 * PubAck, then prints "done <seconds>" (or "failed <why>"); EOF exits.
 *
 *   node bench/nats-trivial-producer.ts URL SUBJECT WINDOW VALUE_BYTES
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { connect, createInbox, type MsgHdrs } from '@nats-io/transport-node';

const [url, subject, windowArg, valueBytesArg] = process.argv.slice(2);
const window = Number(windowArg);
const valueBytes = Number(valueBytesArg);
const TD = new TextDecoder();

const nc = await connect({ servers: url, noAsyncTraces: true, name: 'nats-trivial-producer' });
const prefix = `${createInbox()}.`;
let run: { n: number; sent: number; acked: number; done: (why: string | null) => void } | null = null;
let inFlight = 0;
let failure: string | null = null;

nc.subscribe(`${prefix}*`, {
  callback: (err, m) => {
    inFlight--;
    if (err) failure ??= err.message;
    else {
      const text = TD.decode(m.data);
      const a = text ? (JSON.parse(text) as { stream?: string; error?: { description?: string } }) : {};
      if (!a.stream) failure ??= a.error?.description ?? `no PubAck (status ${m.headers?.code ?? '?'})`;
    }
    if (run) run.acked++;
    pump();
  },
});

function pump(): void {
  const r = run;
  if (!r) return;
  while (failure === null && inFlight < window && r.sent < r.n) {
    const i = r.sent++;
    const value = Buffer.alloc(valueBytes, 'x');
    value.write(String(i));
    const id = randomUUID();
    const block = Buffer.from(
      `NATS/1.0\r\nid: ${id}\r\nevent_type: BenchEvent\r\naggregate_type: Bulk\r\naggregate_id: agg-${i % 1000}\r\ncontent-type: application/octet-stream\r\nNats-Msg-Id: ${id}\r\n\r\n`,
    );
    inFlight++;
    nc.publish(subject!, value, {
      reply: prefix + i.toString(36),
      headers: { encode: () => block } as unknown as MsgHdrs,
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
    run = { n, sent: 0, acked: 0, done };
    pump();
  });
  console.log(why === null ? `done ${(performance.now() - t0) / 1000}` : `failed ${why}`);
}
await nc.close();
