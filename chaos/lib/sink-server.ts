/**
 * The NATS JetStream and RabbitMQ servers of a chaos scenario (issue 23): throwaway ones from the
 * test harness (test/support/nats-server.ts, rabbitmq-server.ts: their own ports, data and
 * processes — never the machine's shared services), set up as docs/sinks.md asks (a file-backed
 * stream with a duplicate window; a durable topic exchange and a quorum queue), how the relay
 * reaches them, and a read-back in the order the server stored.
 */
import { LocalElasticMq } from '../../src/dev/local-elasticmq.ts';
import { drainQueue, ELASTICMQ_ENV, readerFor } from '../../test/support/elasticmq.ts';
import { ThrowawayNats } from '../../test/support/nats-server.ts';
import { ThrowawayRabbit } from '../../test/support/rabbitmq-server.ts';
import type { BackRecord } from './read-back.ts';

export type SinkServerName = 'nats' | 'rabbitmq' | 'sqs';

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
  return name === 'nats' ? natsServer() : name === 'rabbitmq' ? rabbitServer() : sqsServer();
}
