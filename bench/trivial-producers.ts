/**
 * The brokers' own ceilings of the bulk drain (issue 23), as bench/KafkaFloor.java is Kafka's floor: per
 * broker sink, a trivial producer with the relay's message size and headers, its acknowledgement
 * rule and its in-flight window, and no database — RabbitMQ's Java client (bench/RabbitTrivialProducer.java,
 * com.rabbitmq:amqp-client from Maven Central: confirms, persistent, mandatory) and nats.js core
 * publish with a reply inbox (bench/nats-trivial-producer.ts: PubAcks), ioredis running the
 * relay's dedup script (bench/redis-trivial-producer.ts). It publishes the bulk backlog's count
 * into the destination the relay's drain uses (the bench's stream / quorum queue), so the broker
 * does the same work; the ratio relay ÷ trivial producer of the same round says how much of the
 * gap to pg_recvlogical is the broker's on these shared cores.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { javaBinary } from '../src/dev/local-kafka.ts';
import { javaProgram } from './java-program.ts';
import { watchChild } from './proc.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const AMQP_CLIENT_VERSION = '5.37.1';
/** The relay's payload in the bulk backlog (bench/backlog.ts). */
const VALUE_BYTES = 500;

export type TrivialRun = { seconds: number; cpuSeconds: number; brokerCpuSeconds: number };

/** A trivial producer process, warm across rounds (as the relay's JIT warms within a drain). */
export interface TrivialProducer {
  readonly pid: number;
  /** What it is, for the report. */
  readonly label: string;
  /** Publishes `n` messages and waits for every acknowledgement: the seconds it took. */
  run(n: number): Promise<number>;
  stop(): Promise<void>;
}

/** amqp-client's jars (and slf4j-api's), resolved with mvn from Maven Central on first use. */
function amqpClientJars(): string {
  const base = join(ROOT, '.cache', 'amqp-client', AMQP_CLIENT_VERSION);
  const libs = join(base, 'libs');
  if (existsSync(join(base, '.complete'))) return libs;
  mkdirSync(base, { recursive: true });
  writeFileSync(
    join(base, 'pom.xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pg-outbox-relay</groupId><artifactId>amqp-client-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>com.rabbitmq</groupId><artifactId>amqp-client</artifactId><version>${AMQP_CLIENT_VERSION}</version></dependency>
  </dependencies>
</project>
`,
  );
  const r = spawnSync(
    'mvn',
    ['-B', '-q', '-f', join(base, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (r.error) throw new Error(`mvn is needed to fetch amqp-client's jars: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(
      `mvn could not resolve amqp-client ${AMQP_CLIENT_VERSION}:\n${(r.stdout + r.stderr).slice(-3000)}`,
    );
  writeFileSync(join(base, '.complete'), `${new Date().toISOString()}\n`);
  return libs;
}

/** RabbitMQ: bench/RabbitTrivialProducer.java publishing to `exchange` with `routingKey`, `window` unconfirmed. */
export function startRabbitTrivial(url: string, exchange: string, routingKey: string, window: number) {
  const java = javaBinary();
  const source = fileURLToPath(new URL('./RabbitTrivialProducer.java', import.meta.url));
  const child = spawn(
    java,
    [
      '-Xmx256m',
      ...javaProgram(source, amqpClientJars(), java),
      url,
      exchange,
      routingKey,
      String(window),
      String(VALUE_BYTES),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  return producerProcess(
    child,
    `trivial RabbitMQ producer (Java amqp-client ${AMQP_CLIENT_VERSION}: confirms, persistent, mandatory; ${window} unconfirmed)`,
  );
}

/** NATS: bench/nats-trivial-producer.ts publishing to `subject`, `window` awaiting their PubAck. */
export function startNatsTrivial(url: string, subject: string, window: number) {
  const script = fileURLToPath(new URL('./nats-trivial-producer.ts', import.meta.url));
  const child = spawn(process.execPath, [script, url, subject, String(window), String(VALUE_BYTES)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return producerProcess(child, `trivial NATS publisher (nats.js core publish + PubAck; ${window} pending)`);
}

/** HTTP: bench/http-trivial-producer.ts POSTing signed webhooks to `url`, `window` in flight. */
export function startHttpTrivial(url: string, secret: string, window: number) {
  const script = fileURLToPath(new URL('./http-trivial-producer.ts', import.meta.url));
  const child = spawn(process.execPath, [script, url, secret, String(window), String(VALUE_BYTES)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return producerProcess(
    child,
    `trivial webhook sender (undici keep-alive pool, Standard Webhooks signed, 2xx counted; ${window} in flight)`,
  );
}

/** Redis: bench/redis-trivial-producer.ts running the relay's dedup script into `stream`, `window` awaiting replies. */
export function startRedisTrivial(url: string, stream: string, window: number) {
  const script = fileURLToPath(new URL('./redis-trivial-producer.ts', import.meta.url));
  const child = spawn(process.execPath, [script, url, stream, String(window), String(VALUE_BYTES)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return producerProcess(
    child,
    `trivial Redis client (ioredis, the relay's dedup script per entry, auto-pipelined; ${window} pending)`,
  );
}

/** SQS: bench/sqs-trivial-producer.ts sending to `queueUrl` on `endpoint`, `window` requests of 10 in flight. */
export function startSqsTrivial(endpoint: string, queueUrl: string, window: number) {
  const script = fileURLToPath(new URL('./sqs-trivial-producer.ts', import.meta.url));
  const child = spawn(process.execPath, [script, endpoint, queueUrl, String(window), String(VALUE_BYTES)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  return producerProcess(
    child,
    `trivial SQS producer (@aws-sdk/client-sqs SendMessageBatch of 10; ${window} requests in flight)`,
  );
}

/** The line protocol they all speak: "ready", then "run N" → "done <seconds>" | "failed <why>". */
async function producerProcess(child: ChildProcess, label: string): Promise<TrivialProducer> {
  const w = watchChild(child);
  /** The next line of stdout (within 15 minutes). */
  const line = async (what: string): Promise<string> => {
    const deadline = Date.now() + 900_000;
    for (;;) {
      const nl = w.out.indexOf('\n');
      if (nl >= 0) {
        const l = w.out.slice(0, nl);
        w.out = w.out.slice(nl + 1);
        return l;
      }
      if (w.code !== undefined || Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(
          `${label} ${w.code !== undefined ? `exited ${w.code}` : 'hung'} before ${what}:\n${w.err.slice(-3000)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const first = await line('starting');
  if (first !== 'ready') throw new Error(`${label}: expected "ready", got "${first}"\n${w.err.slice(-3000)}`);
  return {
    pid: child.pid!,
    label,
    async run(n) {
      child.stdin!.write(`run ${n}\n`);
      const l = await line('the end of a run');
      if (!l.startsWith('done ')) throw new Error(`${label}: ${l}\n${w.err.slice(-3000)}`);
      return Number(l.slice(5));
    },
    async stop() {
      child.stdin!.end();
      await Promise.race([w.exited, new Promise((r) => setTimeout(r, 5000))]);
      if (w.code === undefined) child.kill('SIGKILL');
    },
  };
}
