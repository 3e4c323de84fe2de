/**
 * The bench's NATS JetStream, RabbitMQ, HTTP, Redis Streams and SQS sections (issues 23, 38): a
 * throwaway server of each (the test harness's, never the machine's shared services; for HTTP a
 * webhook receiver in this process), what the relay needs on it, how many messages a drain left
 * there, and a live reader.
 *
 * What "ack time" is, per sink (the clock a live run stops):
 * - NATS: the stream message's timestamp, which the server takes when it stores the message,
 *   before it sends the PubAck (as Kafka's LogAppendTime is taken before the produce response).
 *   Read back by an ordered consumer of the subject.
 * - RabbitMQ: the confirm carries no time and a queue stamps none, so the clock stops when a
 *   consumer of the bound queue (prefetch 1,000, auto-ack, on loopback) receives the message: an
 *   upper bound of commit → confirm, by a delivery hop (the broker enqueues, confirms and delivers
 *   the persistent message to a waiting consumer in the same round).
 * - HTTP: the receiver's clock when a request's body has arrived and its signature verified,
 *   just before it answers 204 (the relay's acknowledgement is that answer, one loopback hop later).
 * - Redis: the entry id's milliseconds — the server's clock when XADD stored the entry, before the
 *   script's reply. Read back by XREAD BLOCK.
 * - SQS (ElasticMQ): SentTimestamp, which the server sets when it stores the message (sqsSink).
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DeleteMessageBatchCommand, PurgeQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type amqp from 'amqplib';
import type { Redis } from 'ioredis';
import { OPTIONS } from '../src/config/options.ts';
import { LocalElasticMq } from '../src/dev/local-elasticmq.ts';
import { REDIS_SERVER, ThrowawayRedis } from '../src/dev/local-redis.ts';
import { verifyWebhook, webhookKeys } from '../src/dev/webhook-verify.ts';
import { ELASTICMQ_ENV, queueLength, readerFor } from '../test/support/elasticmq.ts';
import { ThrowawayNats } from '../test/support/nats-server.ts';
import { ThrowawayRabbit } from '../test/support/rabbitmq-server.ts';
import { now } from './clock.ts';
import type { LiveReader } from './live.ts';
import {
  startHttpTrivial,
  startNatsTrivial,
  startRabbitTrivial,
  startRedisTrivial,
  startSqsTrivial,
  type TrivialProducer,
} from './trivial-producers.ts';

export type SinkName = 'nats' | 'rabbitmq' | 'http' | 'redis' | 'sqs';
export const BROKER_SINKS: readonly SinkName[] = ['nats', 'rabbitmq', 'http', 'redis', 'sqs'];

/** Each sink's in-flight window option. */
const WINDOW_OPTION: Record<SinkName, string> = {
  nats: 'natsMaxPending',
  rabbitmq: 'rabbitmqMaxUnconfirmed',
  http: 'httpMaxInFlight',
  redis: 'redisMaxPending',
  sqs: 'sqsMaxInFlight',
};

export interface BenchSink {
  readonly name: SinkName;
  /** How the relay reaches it (flags of `outbox-relay run`). */
  readonly relayArgs: string[];
  /** The server's process (CPU per event). */
  brokerPid(): number | undefined;
  /** Messages of aggregate type `type` stored since the last call (each call empties the destination). */
  takeStored(type: string): Promise<number>;
  liveReader(type: string): LiveReader;
  /** The broker's trivial producer (bench/trivial-producers.ts) into the Bulk destination, `window` in flight. */
  startTrivial(window: number): Promise<TrivialProducer>;
  stop(): Promise<void>;
}

/** The relay's in-flight window for a sink: its flag in BENCH_RELAY_ARGS, else the option's default. */
export function relayWindow(name: SinkName): number {
  const spec = OPTIONS.find((o) => o.key === WINDOW_OPTION[name])!;
  const args = process.env.BENCH_RELAY_ARGS?.split(' ').filter(Boolean) ?? [];
  const i = args.indexOf(`--${spec.flag}`);
  return i >= 0 ? Number(args[i + 1]) : Number(spec.default);
}

const STREAM = 'OUTBOX';
const subject = (type: string) => `outbox.event.${type}`;

/**
 * One file-backed stream over outbox.event.> with a 2-minute duplicate window (the relay's
 * preflight asks for file storage and a window above its retry horizon). Every drain sends the
 * same backlog (the same event ids): the stream is deleted and created again between drains, or
 * its duplicate window would drop the next drain's messages instead of storing them.
 */
async function natsSink(): Promise<BenchSink> {
  const server = await ThrowawayNats.start();
  const create = () =>
    server.addStream({
      name: STREAM,
      subjects: ['outbox.event.>'],
      storage: 'file' as never,
      duplicate_window: 120e9,
    });
  await create();
  return {
    name: 'nats',
    relayArgs: ['--sink', 'nats', '--nats-servers', server.url],
    brokerPid: () => server.pid,
    async takeStored(type) {
      const jsm = await jetstreamManager(await server.admin());
      const n = (await jsm.streams.info(STREAM, { subjects_filter: subject(type) })).state.subjects?.[
        subject(type)
      ];
      await jsm.streams.delete(STREAM);
      await create();
      return n ?? 0;
    },
    liveReader(type) {
      let stop = async () => {};
      return {
        async start(onRecord) {
          const c = await jetstream(await server.admin()).consumers.get(STREAM, {
            filter_subjects: subject(type),
          });
          const messages = await c.consume();
          const loop = (async () => {
            for await (const m of messages) onRecord(Buffer.from(m.data), Number(m.timestampNanos) / 1e6);
          })();
          stop = async () => {
            await messages.close();
            await loop.catch(() => {});
          };
        },
        stop: () => stop(),
      };
    },
    startTrivial: (window) => startNatsTrivial(server.url, subject('Bulk'), window),
    stop: () => server.stop(),
  };
}

/**
 * A durable topic exchange `outbox` and, per aggregate type, a quorum queue bound to its routing
 * key (quorum: what docs/sinks.md recommends, and what the relay's preflight does not warn about).
 */
async function rabbitSink(): Promise<BenchSink> {
  const server = await ThrowawayRabbit.start();
  const queues = new Set<string>();
  const queueOf = async (type: string) => {
    const q = `bench.${type}`;
    if (!queues.has(q)) {
      await server.exchangeWithQueue('outbox', q, subject(type), { arguments: { 'x-queue-type': 'quorum' } });
      queues.add(q);
    }
    return q;
  };
  for (const t of ['Bulk', 'Txn', 'Live']) await queueOf(t);
  return {
    name: 'rabbitmq',
    relayArgs: ['--sink', 'rabbitmq', '--rabbitmq-url', server.url, '--rabbitmq-exchange', 'outbox'],
    brokerPid: () => {
      try {
        return server.beamPid();
      } catch {
        return undefined;
      }
    },
    async takeStored(type) {
      const q = await queueOf(type);
      return server.withChannel(async (ch) => (await ch.purgeQueue(q)).messageCount);
    },
    liveReader(type) {
      let ch: amqp.Channel | null = null;
      return {
        async start(onRecord) {
          const q = await queueOf(type);
          ch = await (await server.admin()).createChannel();
          await ch.prefetch(1000);
          await ch.consume(q, (m) => m && onRecord(m.content, now()), {
            noAck: true,
          });
        },
        stop: async () => {
          await ch?.close().catch(() => {});
        },
      };
    },
    startTrivial: (window) => startRabbitTrivial(server.url, 'outbox', subject('Bulk'), window),
    stop: () => server.stop(),
  };
}

/**
 * A webhook receiver in this process (node:http on loopback): it verifies each request's Standard
 * Webhooks signature, as a receiver must, counts it by topic (the `outbox-topic` header) and
 * answers 204. Its CPU is this process's: the bench process is otherwise idle during a drain.
 */
async function httpSink(): Promise<BenchSink> {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const keys = webhookKeys([secret]);
  const counts = new Map<string, number>();
  const readers = new Map<string, (value: Buffer, atMs: number) => void>();
  let bad = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (!verifyWebhook(req.headers, body, keys)) {
        bad++;
        res.writeHead(401).end();
        return;
      }
      const topic = String(req.headers['outbox-topic']);
      counts.set(topic, (counts.get(topic) ?? 0) + 1);
      readers.get(topic)?.(body, now());
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    name: 'http',
    relayArgs: ['--sink', 'http', '--http-url', `${url}/hooks/{topic}`, '--http-secret', secret],
    brokerPid: () => process.pid,
    async takeStored(type) {
      if (bad > 0) throw new Error(`the webhook receiver refused ${bad} requests with a bad signature`);
      const n = counts.get(subject(type)) ?? 0;
      counts.delete(subject(type));
      return n;
    },
    liveReader(type) {
      return {
        async start(onRecord) {
          readers.set(subject(type), onRecord);
        },
        async stop() {
          readers.delete(subject(type));
        },
      };
    },
    startTrivial: (window) => startHttpTrivial(`${url}/hooks/${subject('Bulk')}`, secret, window),
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * A redis-server of its own (appendonly yes, appendfsync everysec), one stream per aggregate type.
 * Every drain sends the same backlog (the same event ids): takeStored deletes the stream and its
 * dedup keys, or the next drain's events would be found stored already and not written.
 */
async function redisSink(): Promise<BenchSink> {
  const server = await ThrowawayRedis.start();
  return {
    name: 'redis',
    relayArgs: ['--sink', 'redis', '--redis-url', server.url],
    brokerPid: () => server.pid,
    async takeStored(type) {
      const a = await server.admin();
      const stream = subject(type);
      const n = await a.xlen(stream);
      let cursor = '0';
      do {
        const [next, keys] = await a.scan(cursor, 'MATCH', `{${stream}}:dedup:*`, 'COUNT', 10_000);
        if (keys.length > 0) await a.unlink(...keys);
        cursor = next;
      } while (cursor !== '0');
      await a.unlink(stream);
      return n;
    },
    liveReader(type) {
      let running = false;
      let loop: Promise<void> = Promise.resolve();
      let reader: Redis | null = null;
      return {
        async start(onRecord) {
          reader = (await server.admin()).duplicate();
          running = true;
          let last = '$';
          loop = (async () => {
            while (running) {
              const r = (await reader!.xreadBuffer(
                'COUNT',
                1000,
                'BLOCK',
                200,
                'STREAMS',
                subject(type),
                last,
              )) as [Buffer, [Buffer, Buffer[]][]][] | null;
              for (const [, entries] of r ?? [])
                for (const [id, kv] of entries) {
                  last = id.toString();
                  const vi = kv.findIndex((f, i) => i % 2 === 0 && f.toString() === 'value');
                  onRecord(vi >= 0 ? kv[vi + 1]! : Buffer.alloc(0), Number(last.slice(0, last.indexOf('-'))));
                }
            }
          })();
        },
        stop: async () => {
          running = false;
          await loop.catch(() => {});
          reader?.disconnect();
        },
      };
    },
    startTrivial: (window) => startRedisTrivial(server.url, subject('Bulk'), window),
    stop: () => server.stop(),
  };
}

/**
 * ElasticMQ (SQS-compatible, not AWS), in memory: the bench measures the relay's cost against the
 * trivial producer on the same server, not a disk. Standard queues, one per aggregate type: a FIFO
 * queue's 5-minute deduplication window would drop every drain after the first (each drain sends
 * the same event ids), and per-key order costs the same (one message per key per request).
 * Ack time: SentTimestamp, which ElasticMQ sets when it stores the message (ms).
 */
async function sqsSink(): Promise<BenchSink> {
  const types = ['Bulk', 'Txn', 'Live', 'LiveSqs'];
  // The relays the bench spawns inherit its environment: there the SDK's default chain finds
  // ElasticMQ's (unchecked) credentials and region.
  Object.assign(process.env, ELASTICMQ_ENV);
  const server = await LocalElasticMq.start({ queues: types, fullJit: true, heapMb: 1024 });
  const reader = readerFor(server);
  return {
    name: 'sqs',
    relayArgs: [
      ...['--sink', 'sqs', '--sqs-endpoint', server.endpoint],
      ...['--sqs-queue-url-template', server.queueUrl('{aggregate_type}')],
    ],
    brokerPid: () => server.pid,
    async takeStored(type) {
      const url = server.queueUrl(type);
      const n = await queueLength(reader, url);
      await reader.send(new PurgeQueueCommand({ QueueUrl: url }));
      return n;
    },
    liveReader(type) {
      let running = false;
      let loop: Promise<void> = Promise.resolve();
      return {
        async start(onRecord) {
          running = true;
          const url = server.queueUrl(type);
          loop = (async () => {
            while (running) {
              const r = await reader.send(
                new ReceiveMessageCommand({
                  QueueUrl: url,
                  MaxNumberOfMessages: 10,
                  WaitTimeSeconds: 1,
                  MessageSystemAttributeNames: ['SentTimestamp'],
                }),
              );
              const got = r.Messages ?? [];
              for (const m of got) onRecord(Buffer.from(m.Body ?? ''), Number(m.Attributes?.SentTimestamp));
              if (got.length > 0)
                await reader.send(
                  new DeleteMessageBatchCommand({
                    QueueUrl: url,
                    Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
                  }),
                );
            }
          })();
        },
        stop: async () => {
          running = false;
          await loop.catch(() => {});
        },
      };
    },
    startTrivial: (window) => startSqsTrivial(server.endpoint, server.queueUrl('Bulk'), window),
    async stop() {
      reader.destroy();
      await server.stop();
    },
  };
}

/** Whether the machine has the sink's server (nats-server on PATH, Debian's rabbitmq-server, redis-server; Java and Maven for ElasticMQ). */
export function sinkInstalled(name: SinkName): boolean {
  if (name === 'http') return true;
  if (name === 'rabbitmq') return existsSync('/usr/lib/rabbitmq/lib');
  if (name === 'redis') return existsSync(REDIS_SERVER);
  if (name === 'sqs') return !spawnSync('java', ['-version']).error && !spawnSync('mvn', ['-v']).error;
  return (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, 'nats-server')));
}

export function startBenchSink(name: SinkName): Promise<BenchSink> {
  if (name === 'http') return httpSink();
  if (name === 'nats') return natsSink();
  if (name === 'rabbitmq') return rabbitSink();
  return name === 'redis' ? redisSink() : sqsSink();
}
