/**
 * The SQS ceiling of the bulk drain (bench/trivial-producers.ts), against the bench's ElasticMQ:
 * @aws-sdk/client-sqs SendMessageBatch, doing nothing but send relay-shaped messages (a
 * VALUE_BYTES body, the relay's five headers as message attributes) 10 to a request, at most
 * WINDOW requests awaiting their answer (as --sqs-max-in-flight), counting a message only once its
 * entry is in `Successful` (a failed entry or a refused request fails the run; a request that
 * got no answer is sent again, up to MAX_ATTEMPTS times, as the relay's sink retries it). No
 * database, no routing, no per-key order (the relay sends at most one message per key per
 * request). One long-lived process for every round: "run N" on stdin sends N messages and waits
 * for every answer, then prints "done <seconds>" (or "failed <why>"); EOF exits.
 *
 *   node bench/sqs-trivial-producer.ts ENDPOINT QUEUE_URL WINDOW VALUE_BYTES
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { SendMessageBatchCommand, type SendMessageBatchRequestEntry, SQSClient } from '@aws-sdk/client-sqs';

const [endpoint, queueUrl, windowArg, valueBytesArg] = process.argv.slice(2);
const window = Number(windowArg);
const valueBytes = Number(valueBytesArg);
const client = new SQSClient({
  endpoint: endpoint!,
  region: 'elasticmq',
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  maxAttempts: 1,
});
const attr = (v: string) => ({ DataType: 'String', StringValue: v });

function entry(i: number, j: number): SendMessageBatchRequestEntry {
  const body = 'x'.repeat(valueBytes);
  const id = randomUUID();
  return {
    Id: String(j),
    MessageBody: String(i) + body.slice(String(i).length),
    MessageAttributes: {
      id: attr(id),
      event_type: attr('BenchEvent'),
      aggregate_type: attr('Bulk'),
      aggregate_id: attr(`agg-${i % 1000}`),
      'content-type': attr('application/octet-stream'),
    },
  };
}

/** Attempts of one request that gets no answer before the run fails. */
const MAX_ATTEMPTS = 5;

async function runOnce(n: number): Promise<string | null> {
  let sent = 0;
  let resent = 0;
  let failure: string | null = null;
  const worker = async () => {
    while (failure === null && sent < n) {
      const entries: SendMessageBatchRequestEntry[] = [];
      while (entries.length < 10 && sent < n) entries.push(entry(sent++, entries.length));
      for (let attempt = 1; ; attempt++) {
        try {
          const r = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl!, Entries: entries }));
          if ((r.Failed ?? []).length > 0) failure ??= `${r.Failed![0]!.Code}: ${r.Failed![0]!.Message}`;
          break;
        } catch (e) {
          // A request that got no answer (the server closed a kept-alive socket as it was reused:
          // "socket hang up") is sent again, as the relay's SQS sink retries a transport error;
          // an answer that refuses the request, or a fifth failure, fails the run.
          const answered = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
          if (answered !== undefined || attempt >= MAX_ATTEMPTS) {
            failure ??= (e as Error).message;
            break;
          }
          resent++;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: window }, worker));
  if (resent > 0) process.stderr.write(`${resent} request(s) sent again after no answer\n`);
  return failure;
}

console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.startsWith('run ')) continue;
  const t0 = performance.now();
  const why = await runOnce(Number(line.slice(4)));
  console.log(why === null ? `done ${(performance.now() - t0) / 1000}` : `failed ${why}`);
}
client.destroy();
