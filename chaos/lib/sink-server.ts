/**
 * The NATS JetStream, RabbitMQ and Redis servers of a chaos scenario (issues 23, 38): throwaway
 * ones from the test harness (test/support/nats-server.ts, rabbitmq-server.ts, src/dev/local-redis.ts:
 * their own ports, data and processes — never the machine's shared services), set up as
 * docs/sinks.md asks (a file-backed stream with a duplicate window; a durable topic exchange and a
 * quorum queue; appendonly yes), how the relay reaches them, and a read-back in the order the
 * server stored. The HTTP sink's "server" is the tests' webhook receiver as a process of its own
 * (test/support/webhook-receiver-process.ts: verifies every signature, journals each accepted
 * event before answering 2xx), read back from its journal in arrival order.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalElasticMq } from '../../src/dev/local-elasticmq.ts';
import { ThrowawayRedis } from '../../src/dev/local-redis.ts';
import { reservePort } from '../../src/dev/ports.ts';
import { drainQueue, ELASTICMQ_ENV, readerFor } from '../../test/support/elasticmq.ts';
import { ThrowawayNats } from '../../test/support/nats-server.ts';
import { ThrowawayRabbit } from '../../test/support/rabbitmq-server.ts';
import type { BackRecord } from './read-back.ts';

export type SinkServerName = 'nats' | 'rabbitmq' | 'http' | 'redis' | 'sqs';

export interface SinkServer {
  readonly name: SinkServerName;
  /** Flags of `outbox-relay run` for this sink (no Kafka flags). */
  readonly relayArgs: string[];
  /** Environment of the relay process (SQS: the credentials the SDK's default chain finds). */
  readonly relayEnv?: Record<string, string>;
  kill9(): Promise<void>;
  /** SIGSTOP / SIGCONT of the server process. */
  freeze(): void;
  thaw(): void;
  /** After kill9: the same port and data directory. */
  restart(): Promise<void>;
  /** Every stored message, in stored order (stream order, queue order). */
  readBack(): Promise<BackRecord[]>;
  stop(): Promise<void>;
}

const STREAM = 'OUTBOX';
const QUEUE = 'chaos';

/** The writer's payload is JSON with its key: the read-back takes the key from there. */
function record(topic: string, offset: number, value: Buffer): BackRecord {
  let key: string | null = null;
  try {
    const k = (JSON.parse(value.toString()) as { key?: unknown }).key;
    if (typeof k === 'string') key = k;
  } catch {
    // not one of the writer's
  }
  return { topic, partition: 0, offset, key, value, timestamp: 0 };
}

async function natsServer(): Promise<SinkServer> {
  const s = await ThrowawayNats.start();
  await s.addStream({
    name: STREAM,
    subjects: ['outbox.event.>'],
    storage: 'file' as never,
    duplicate_window: 120e9,
  });
  return {
    name: 'nats',
    relayArgs: ['--sink', 'nats', '--nats-servers', s.url, '--nats-timeout-ms', '5000'],
    kill9: () => s.kill9(),
    freeze: () => s.freeze(),
    thaw: () => s.thaw(),
    restart: () => s.restart(),
    async readBack() {
      return (await s.readAll(STREAM)).map((m) => record(m.subject, m.seq, m.data));
    },
    stop: () => s.stop(),
  };
}

async function rabbitServer(): Promise<SinkServer> {
  const s = await ThrowawayRabbit.start();
  await s.exchangeWithQueue('outbox', QUEUE, 'outbox.event.#', { arguments: { 'x-queue-type': 'quorum' } });
  return {
    name: 'rabbitmq',
    relayArgs: [
      ...['--sink', 'rabbitmq', '--rabbitmq-url', s.url, '--rabbitmq-exchange', 'outbox'],
      ...['--rabbitmq-timeout-ms', '5000'],
    ],
    kill9: () => s.kill9(),
    freeze: () => s.freeze(),
    thaw: () => s.thaw(),
    restart: () => s.restart(),
    async readBack() {
      return (await s.drain(QUEUE)).map((m, i) => record(m.routingKey, i, m.content));
    },
    stop: () => s.stop(),
  };
}

const RECEIVER = new URL('../../test/support/webhook-receiver-process.ts', import.meta.url).pathname;

async function webhookReceiver(): Promise<SinkServer> {
  const lease = await reservePort();
  const dir = mkdtempSync(join(tmpdir(), 'chaos-webhook-'));
  const secrets = join(dir, 'secrets');
  const journal = join(dir, 'journal.ndjson');
  writeFileSync(secrets, `whsec_${randomBytes(32).toString('base64')}\n`);
  writeFileSync(journal, '');
  let child: ChildProcess | null = null;
  const start = async () => {
    const c = spawn(process.execPath, [RECEIVER, String(lease.port), secrets, journal], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child = c;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      c.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('listening')) resolve();
      });
      c.once('exit', (code) => reject(new Error(`webhook receiver exited (${code}) before listening`)));
    });
  };
  const stopChild = async () => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await gone;
  };
  await start();
  return {
    name: 'http',
    relayArgs: [
      ...['--sink', 'http', '--http-url', `http://127.0.0.1:${lease.port}/hooks/{topic}`],
      ...['--http-secret-file', secrets, '--http-timeout-ms', '5000'],
    ],
    kill9: stopChild,
    freeze: () => void child?.kill('SIGSTOP'),
    thaw: () => void child?.kill('SIGCONT'),
    restart: start,
    async readBack() {
      return readFileSync(journal, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l, i) => {
          const j = JSON.parse(l) as { topic: string; value: string };
          return record(j.topic, i, Buffer.from(j.value, 'base64'));
        });
    },
    async stop() {
      child?.kill('SIGCONT');
      await stopChild();
      lease.release();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** appendonly yes, appendfsync everysec (src/dev/local-redis.ts); streams named by topic. */
async function redisServer(): Promise<SinkServer> {
  const s = await ThrowawayRedis.start();
  return {
    name: 'redis',
    relayArgs: ['--sink', 'redis', '--redis-url', s.url, '--redis-timeout-ms', '5000'],
    kill9: () => s.kill9(),
    freeze: () => s.freeze(),
    thaw: () => s.thaw(),
    restart: () => s.restart(),
    async readBack() {
      const a = await s.admin();
      // SCAN pages may be empty before the cursor returns to 0: the dedup keys outnumber the streams.
      const streams: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = (await a.call('SCAN', cursor, 'COUNT', '1000', 'TYPE', 'stream')) as [
          string,
          string[],
        ];
        streams.push(...keys);
        cursor = next;
      } while (cursor !== '0');
      const out: BackRecord[] = [];
      for (const stream of streams.sort())
        for (const [i, e] of (await s.readAll(stream)).entries())
          out.push(record(stream, i, e.fields.value ?? Buffer.alloc(0)));
      return out;
    },
    stop: () => s.stop(),
  };
}

/**
 * ElasticMQ (an SQS-compatible server, not AWS: docs/sinks.md) with its messages in H2, one FIFO
 * queue per aggregate type the scenarios write (`Chaos.fifo`); read back by a client of its own,
 * in the queue's order per message group.
 */
async function sqsServer(): Promise<SinkServer> {
  const s = await LocalElasticMq.start({ queues: ['Chaos.fifo'], persistent: true });
  const reader = readerFor(s);
  return {
    name: 'sqs',
    relayArgs: [
      ...['--sink', 'sqs', '--sqs-endpoint', s.endpoint],
      ...['--sqs-queue-url-template', s.queueUrl('{aggregate_type}.fifo'), '--sqs-timeout-ms', '5000'],
    ],
    relayEnv: { ...ELASTICMQ_ENV },
    kill9: () => s.kill9(),
    freeze: () => s.freeze(),
    thaw: () => s.thaw(),
    restart: () => s.restart(),
    async readBack() {
      const got = await drainQueue(reader, s.queueUrl('Chaos.fifo'));
      return got.map((m, i) => record('Chaos.fifo', i, Buffer.from(m.Body ?? '')));
    },
    async stop() {
      reader.destroy();
      await s.stop();
    },
  };
}

export function startSinkServer(name: SinkServerName): Promise<SinkServer> {
  if (name === 'http') return webhookReceiver();
  if (name === 'nats') return natsServer();
  if (name === 'rabbitmq') return rabbitServer();
  return name === 'redis' ? redisServer() : sqsServer();
}
