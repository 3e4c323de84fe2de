import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { Redis } from 'ioredis';
import { sleep } from '../retry/backoff.ts';
import { LocalElasticMq } from './local-elasticmq.ts';
import { kafkaVersionFromEnv, LocalKafkaCluster } from './local-kafka.ts';
import { ThrowawayRedis } from './local-redis.ts';
import { verifyWebhook, webhookKeys } from './webhook-verify.ts';

/**
 * The destinations of `npm run playground -- --sink kafka|redis|http|sqs`: each starts a server of
 * its own on loopback (never the machine's shared ones), says how the relay reaches it, makes the
 * topic of the failing aggregate type fail in its own way (so `status` and the console have a
 * failure and its remedy to show), and — except Kafka, which kcat reads — reads back what arrives
 * and prints a line per event.
 *
 *   kafka  a one-node Apache Kafka from its jars (local-kafka.ts); the failing topic is not created
 *   redis  a redis-server (local-redis.ts, appendonly yes); the failing stream's key holds a string
 *          (WRONGTYPE)
 *   http   a webhook receiver in this process that verifies every signature (webhook-verify.ts);
 *          it answers 404 for the failing topic
 *   sqs    ElasticMQ from its jars (local-elasticmq.ts), FIFO queues; the failing queue is not
 *          created (QueueDoesNotExist)
 */
export const PLAYGROUND_SINKS = ['kafka', 'redis', 'http', 'sqs'] as const;
export type PlaygroundSink = (typeof PLAYGROUND_SINKS)[number];

/** The Kafka port `npm run kafka` documents; the playground takes it when free, else any. */
export const PLAYGROUND_KAFKA_PORT = 19092;

export interface DestinationOptions {
  /** The playground's directory (a destination keeps its files under it). */
  dir: string;
  out: (line: string) => void;
  /** The topics to create (or that must work). */
  topics: readonly string[];
  /** The topic whose events must fail. */
  failing: string;
  /** Resolves when the playground stops: the read-back ends. */
  stop: Promise<void>;
  /** Whether the Kafka port is free (the caller's check). */
  portIsFree: (port: number) => Promise<boolean>;
}

export interface Destination {
  /** e.g. "Kafka 127.0.0.1:19092 (pid 123)", for the ready line. */
  readonly summary: string;
  /** The relay's flags for it (--sink … and how to reach it). */
  readonly relayArgs: readonly string[];
  /** Lines under the ready line: the topics, how to read them. */
  readonly lines: readonly string[];
  /** The `export NAME=value` lines of the env file besides DATABASE_URL. */
  readonly env: readonly string[];
  /** Reads back what arrives, a line per event, until the playground stops (none for Kafka). */
  watch(): Promise<void>;
  /** At process exit (a second signal): kill the server's process, if it has one. */
  kill(): void;
  stop(): Promise<void>;
}

/** How the events of an aggregate type are named (--topic-template): SQS queue names take no dots. */
export function topicTemplateOf(sink: PlaygroundSink): string {
  return sink === 'sqs' ? 'outbox-event-{aggregate_type}.fifo' : 'outbox.event.{aggregate_type}';
}

export function startDestination(sink: PlaygroundSink, o: DestinationOptions): Promise<Destination> {
  switch (sink) {
    case 'kafka':
      return startKafka(o);
    case 'redis':
      return startRedis(o);
    case 'http':
      return startReceiver(o);
    case 'sqs':
      return startElasticMq(o);
  }
}

const preview = (b: Buffer | string | undefined) => {
  const s = (b ?? '').toString();
  return s.length > 200 ? `${s.slice(0, 200)}…` : s;
};

async function startKafka(o: DestinationOptions): Promise<Destination> {
  const dir = join(o.dir, 'kafka');
  const port = (await o.portIsFree(PLAYGROUND_KAFKA_PORT)) ? PLAYGROUND_KAFKA_PORT : 0;
  o.out(`playground: starting Apache Kafka ${kafkaVersionFromEnv()} (one node, KRaft)`);
  const kafka = await LocalKafkaCluster.up({ dir, port, log: (line) => o.out(`playground: ${line}`) });
  try {
    const admin = kafka.client('playground').admin();
    await admin.connect();
    try {
      await admin.createTopics({
        topics: o.topics.map((topic) => ({ topic, numPartitions: 3 })),
        waitForLeaders: true,
      });
    } finally {
      await admin.disconnect();
    }
  } catch (e) {
    await kafka.destroy();
    throw e;
  }
  const brokers = kafka.bootstrap.join(',');
  return {
    summary: `Kafka ${brokers} (pid ${kafka.pidOf(1)})`,
    relayArgs: ['--kafka-brokers', brokers],
    lines: [
      `  topics:   ${o.topics.join(', ')} (${o.failing} is not created: its events fail)`,
      `  read:     kcat -b ${brokers} -C -t ${o.topics[0]} -f '%k %s\\n'`,
    ],
    env: [`export KAFKA_BROKERS=${brokers}`],
    watch: async () => {},
    kill() {
      for (const n of kafka.nodes) {
        const pid = kafka.pidOf(n.id);
        if (pid) process.kill(pid, 'SIGKILL');
      }
    },
    stop: () => kafka.destroy(),
  };
}

/** A playground killed with -9 leaves its Kafka broker running: stopped before a new start. */
export async function cleanUpKafka(dir: string): Promise<void> {
  await LocalKafkaCluster.down(join(dir, 'kafka'));
}

async function startRedis(o: DestinationOptions): Promise<Destination> {
  o.out('playground: starting redis-server (appendonly yes)');
  const redis = await ThrowawayRedis.start();
  const reader = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  reader.on('error', () => {});
  try {
    await reader.connect();
    await reader.set(o.failing, 'not a stream: the playground makes this stream fail (WRONGTYPE)');
  } catch (e) {
    reader.disconnect();
    await redis.stop();
    throw e;
  }
  return {
    summary: `Redis ${redis.url} (pid ${redis.pid}, data in ${redis.dir})`,
    relayArgs: ['--sink', 'redis', '--redis-url', redis.url],
    lines: [
      `  streams:  ${o.topics.join(', ')} (the key ${o.failing} holds a string: its events fail, WRONGTYPE)`,
      `  read:     redis-cli -p ${redis.port} XRANGE ${o.topics[0]} - +`,
    ],
    env: [`export REDIS_URL=${redis.url}`],
    async watch() {
      // XREAD BLOCK from the streams' ends: each entry as it arrives (a client of the playground's own).
      const last = o.topics.map(() => '$');
      let stopping = false;
      void o.stop.then(() => {
        stopping = true;
      });
      while (!stopping) {
        const got = (await reader
          .xreadBuffer('COUNT', 100, 'BLOCK', 500, 'STREAMS', ...o.topics, ...last)
          .catch(() => null)) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [stream, entries] of got ?? []) {
          const i = o.topics.indexOf(stream.toString());
          for (const [entryId, kv] of entries) {
            last[i] = entryId.toString();
            const f = new Map<string, Buffer>();
            for (let k = 0; k < kv.length; k += 2) f.set(kv[k]!.toString(), kv[k + 1]!);
            o.out(
              `playground: arrived in stream ${stream} (entry ${entryId}): id=${f.get('id')} type=${f.get('type')} ${preview(f.get('value'))}`,
            );
          }
        }
      }
    },
    kill() {
      if (redis.pid) process.kill(redis.pid, 'SIGKILL');
    },
    async stop() {
      reader.disconnect();
      await redis.stop();
    },
  };
}

async function startReceiver(o: DestinationOptions): Promise<Destination> {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const secretFile = join(o.dir, 'webhook-secret');
  writeFileSync(secretFile, `${secret}\n`, { mode: 0o600 });
  const keys = webhookKeys([secret]);
  const failingPath = `/hooks/${encodeURIComponent(o.failing)}`;
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    if (req.method !== 'POST') return void res.writeHead(204).end();
    if (!verifyWebhook(req.headers, body, keys)) {
      o.out(`playground: REFUSED ${req.method} ${req.url}: the signature does not verify (401)`);
      return void res.writeHead(401).end('bad signature');
    }
    if (req.url === failingPath)
      return void res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end(`no endpoint for ${o.failing} (the playground refuses it on purpose)`);
    o.out(
      `playground: arrived POST ${req.url} webhook-id=${req.headers['webhook-id']} (signature verified): ${preview(body)}`,
    );
    res.writeHead(204).end();
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/{topic}`;
  return {
    summary: `a webhook receiver ${url} (in this process; it verifies every signature)`,
    relayArgs: ['--sink', 'http', '--http-url', url, '--http-secret-file', secretFile],
    lines: [
      `  topics:   ${o.topics.join(', ')} (the receiver answers 404 for ${o.failing}: its events fail)`,
      `  secret:   ${secretFile} (WEBHOOK_SECRET_FILE; the receiver verifies with it)`,
    ],
    env: [`export WEBHOOK_URL='${url}'`, `export WEBHOOK_SECRET_FILE=${secretFile}`],
    watch: async () => {},
    kill() {},
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** ElasticMQ checks no signature: the playground's relay and reader sign with these. */
const ELASTICMQ_CREDENTIALS = { accessKeyId: 'playground', secretAccessKey: 'playground' };

async function startElasticMq(o: DestinationOptions): Promise<Destination> {
  o.out('playground: starting ElasticMQ, an SQS-compatible server (Java; the first run fetches its jars)');
  const mq = await LocalElasticMq.start({ queues: o.topics });
  // The relay finds credentials by the SDK's default chain: these, never the machine's own AWS
  // credentials, for a local server.
  process.env.AWS_ACCESS_KEY_ID = ELASTICMQ_CREDENTIALS.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = ELASTICMQ_CREDENTIALS.secretAccessKey;
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
  const reader = new SQSClient({
    endpoint: mq.endpoint,
    region: 'elasticmq',
    credentials: ELASTICMQ_CREDENTIALS,
  });
  const template = mq.queueUrl('{topic}');
  return {
    summary: `ElasticMQ ${mq.endpoint} (pid ${mq.pid}; SQS-compatible, not AWS)`,
    // An SQS body is text without most control characters; some sample payloads are binary, so
    // the body is the event's JSON envelope (the payload base64 in it).
    relayArgs: [
      '--value-format',
      'envelope-json',
      '--sink',
      'sqs',
      '--sqs-endpoint',
      mq.endpoint,
      '--sqs-region',
      'elasticmq',
      '--sqs-queue-url-template',
      template,
    ],
    lines: [
      `  queues:   ${o.topics.join(', ')} (FIFO; ${o.failing} is not created: its events fail, QueueDoesNotExist)`,
      `  read:     aws --endpoint-url ${mq.endpoint} --region elasticmq sqs receive-message --queue-url ${mq.queueUrl(o.topics[0]!)}  (the playground reads and deletes them first)`,
    ],
    env: [
      `export SQS_ENDPOINT=${mq.endpoint} SQS_REGION=elasticmq SQS_QUEUE_URL_TEMPLATE='${template}'`,
      `export AWS_ACCESS_KEY_ID=${ELASTICMQ_CREDENTIALS.accessKeyId} AWS_SECRET_ACCESS_KEY=${ELASTICMQ_CREDENTIALS.secretAccessKey}`,
    ],
    async watch() {
      let stopping = false;
      void o.stop.then(() => {
        stopping = true;
      });
      while (!stopping) {
        let any = false;
        for (const q of o.topics) {
          const url = mq.queueUrl(q);
          const r = await reader
            .send(
              new ReceiveMessageCommand({
                QueueUrl: url,
                MaxNumberOfMessages: 10,
                MessageSystemAttributeNames: ['MessageGroupId'],
              }),
            )
            .catch(() => null);
          const got: Message[] = r?.Messages ?? [];
          if (!got.length) continue;
          any = true;
          for (const m of got)
            o.out(
              `playground: arrived in queue ${q} (group ${m.Attributes?.MessageGroupId}): ${preview(m.Body)}`,
            );
          await reader
            .send(
              new DeleteMessageBatchCommand({
                QueueUrl: url,
                Entries: got.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
              }),
            )
            .catch(() => {});
        }
        if (!any) await Promise.race([sleep(500), o.stop]);
      }
    },
    kill() {
      if (mq.pid) process.kill(mq.pid, 'SIGKILL');
    },
    async stop() {
      reader.destroy();
      await mq.stop();
    },
  };
}
