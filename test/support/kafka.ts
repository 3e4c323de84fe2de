/**
 * A Kafka for integration tests: the in-process wire-protocol stand-in (test/kafka-standin) or a real
 * single-node broker in a container.
 *
 *   const kafka = await startKafka();            // mode from KAFKA_TEST_MODE, default 'auto'
 *   await kafka.createTopic('orders', 3);
 *   … point the relay at kafka.brokers …
 *   const records = await kafka.readAll('orders');
 *   await kafka.stop();
 *
 * KAFKA_TEST_MODE: 'standin' | 'container' | 'auto' (container when a container engine answers,
 * else stand-in). KAFKA_TEST_IMAGE overrides the container image.
 */
import { randomUUID } from 'node:crypto';
import { type Admin, type Consumer, Kafka, logLevel } from 'kafkajs';
import { KafkaStandIn, type StoredRecord } from '../kafka-standin/index.ts';

export type KafkaTestMode = 'standin' | 'container';

/** A record as read back from a topic: what a real broker's consumer sees of the stand-in's StoredRecord. */
export type ReadRecord = Omit<StoredRecord, 'headerList' | 'producerId'>;

export interface KafkaHarness {
  /** Bootstrap servers for kafkajs / the relay's --kafka-brokers. */
  readonly brokers: string[];
  readonly mode: KafkaTestMode;
  /** Only in stand-in mode: fault injection and direct access to what was stored. */
  readonly standin?: KafkaStandIn;
  createTopic(name: string, partitions?: number): Promise<void>;
  /**
   * Every record of `topic` at the time of the call, in (partition, offset) order; [] for a topic
   * that does not exist.
   */
  readAll(topic: string, opts?: { timeoutMs?: number }): Promise<ReadRecord[]>;
  stop(): Promise<void>;
}

export interface StartKafkaOptions {
  /** Overrides KAFKA_TEST_MODE. */
  mode?: KafkaTestMode | 'auto';
  /** auto.create.topics.enable. Default false: tests create their topics. */
  autoCreateTopics?: boolean;
  /** num.partitions for auto-created topics and createTopic without a count. Default 1. */
  defaultPartitions?: number;
  /** message.max.bytes. */
  maxMessageBytes?: number;
}

/** Confluent Platform 7.9 ships Apache Kafka 3.9, run in KRaft mode (no ZooKeeper). */
const DEFAULT_IMAGE = 'confluentinc/cp-kafka:7.9.1';
const CONTAINER_KAFKA_PORT = 9093;

function modeFromEnv(): KafkaTestMode | 'auto' {
  const raw = (process.env.KAFKA_TEST_MODE ?? 'auto').trim().toLowerCase();
  if (raw === 'standin' || raw === 'container' || raw === 'auto') return raw;
  throw new Error(`KAFKA_TEST_MODE must be standin, container or auto; got "${process.env.KAFKA_TEST_MODE}"`);
}

/** Whether testcontainers finds a container engine (what 'auto' mode decides on). */
export async function containerEngineReachable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timed out')), 10_000);
    });
    try {
      await Promise.race([getContainerRuntimeClient(), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return true;
  } catch {
    return false;
  }
}

export async function startKafka(opts: StartKafkaOptions = {}): Promise<KafkaHarness> {
  let mode = opts.mode ?? modeFromEnv();
  if (mode === 'auto') mode = (await containerEngineReachable()) ? 'container' : 'standin';
  return mode === 'container' ? startContainer(opts) : startStandIn(opts);
}

/** The stand-in behind a harness, or a clear error for tests that need fault injection. */
export function requireStandIn(kafka: KafkaHarness, reason: string): KafkaStandIn {
  if (kafka.mode !== 'standin' || kafka.standin === undefined) {
    throw new Error(
      `This test needs the Kafka stand-in (${reason}), but KAFKA_TEST_MODE resolved to '${kafka.mode}'. ` +
        'Run it with KAFKA_TEST_MODE=standin, or skip it in container mode.',
    );
  }
  return kafka.standin;
}

async function startStandIn(opts: StartKafkaOptions): Promise<KafkaHarness> {
  const standin = await KafkaStandIn.start({
    autoCreateTopics: opts.autoCreateTopics ?? false,
    defaultPartitions: opts.defaultPartitions,
    maxMessageBytes: opts.maxMessageBytes,
  });
  return {
    brokers: standin.brokers,
    mode: 'standin',
    standin,
    async createTopic(name, partitions) {
      standin.createTopic(name, { partitions: partitions ?? opts.defaultPartitions ?? 1 });
    },
    async readAll(topic) {
      return standin.records(topic);
    },
    stop: () => standin.stop(),
  };
}

async function startContainer(opts: StartKafkaOptions): Promise<KafkaHarness> {
  const { KafkaContainer } = await import('@testcontainers/kafka');
  const env: Record<string, string> = {
    KAFKA_AUTO_CREATE_TOPICS_ENABLE: String(opts.autoCreateTopics ?? false),
    KAFKA_NUM_PARTITIONS: String(opts.defaultPartitions ?? 1),
  };
  if (opts.maxMessageBytes !== undefined) env.KAFKA_MESSAGE_MAX_BYTES = String(opts.maxMessageBytes);
  const container = await new KafkaContainer(process.env.KAFKA_TEST_IMAGE ?? DEFAULT_IMAGE)
    .withKraft()
    .withEnvironment(env)
    .start();
  const brokers = [`${container.getHost()}:${container.getMappedPort(CONTAINER_KAFKA_PORT)}`];
  const kafka = new Kafka({ clientId: 'test-harness', brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const readers = new Map<string, TopicReader>();

  return {
    brokers,
    mode: 'container',
    async createTopic(name, partitions) {
      await admin.createTopics({
        topics: [{ topic: name, numPartitions: partitions ?? opts.defaultPartitions ?? 1 }],
        waitForLeaders: true,
      });
    },
    async readAll(topic, readOpts) {
      let reader = readers.get(topic);
      if (reader === undefined) {
        if (!(await admin.listTopics()).includes(topic)) return [];
        reader = await TopicReader.start(kafka, topic);
        readers.set(topic, reader);
      }
      return reader.readUpTo(await highWatermarks(admin, topic), readOpts?.timeoutMs ?? 30_000);
    },
    async stop() {
      await Promise.allSettled([...readers.values()].map((r) => r.stop()));
      await admin.disconnect().catch(() => {});
      await container.stop();
    },
  };
}

async function highWatermarks(admin: Admin, topic: string): Promise<Map<number, number>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, Number(o.high)]));
}

/**
 * One long-lived consumer (in a group of its own) per topic, collecting from the beginning, so
 * repeated readAll calls — tests poll with it — cost a high-watermark lookup, not a group join.
 */
class TopicReader {
  private readonly consumer: Consumer;
  private readonly topic: string;
  private readonly byPartition = new Map<number, ReadRecord[]>();
  /** Next offset to read per partition. */
  private readonly position = new Map<number, number>();
  private failure: Error | null = null;

  private constructor(consumer: Consumer, topic: string) {
    this.consumer = consumer;
    this.topic = topic;
  }

  static async start(kafka: Kafka, topic: string): Promise<TopicReader> {
    const consumer = kafka.consumer({ groupId: `test-read-all-${randomUUID()}`, maxWaitTimeInMs: 250 });
    const reader = new TopicReader(consumer, topic);
    consumer.on(consumer.events.CRASH, (e) => {
      if (!e.payload.restart) reader.failure = e.payload.error;
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const list = reader.byPartition.get(batch.partition) ?? [];
        reader.byPartition.set(batch.partition, list);
        for (const m of batch.messages) {
          const headers: Record<string, Buffer> = {};
          for (const [k, v] of Object.entries(m.headers ?? {})) {
            const last = Array.isArray(v) ? v.at(-1) : v;
            if (last !== undefined) headers[k] = Buffer.isBuffer(last) ? last : Buffer.from(last);
          }
          list.push({
            topic: batch.topic,
            partition: batch.partition,
            offset: Number(m.offset),
            key: m.key,
            value: m.value,
            headers,
            timestamp: Number(m.timestamp),
          });
          reader.position.set(batch.partition, Number(m.offset) + 1);
        }
      },
    });
    return reader;
  }

  async readUpTo(highWatermarks: Map<number, number>, timeoutMs: number): Promise<ReadRecord[]> {
    const deadline = Date.now() + timeoutMs;
    const behind = () =>
      [...highWatermarks].filter(([p, high]) => high > 0 && (this.position.get(p) ?? 0) < high);
    while (behind().length > 0) {
      if (this.failure) throw this.failure;
      if (Date.now() > deadline) {
        const lag = behind()
          .map(([p, high]) => `partition ${p}: at ${this.position.get(p) ?? 0} of ${high}`)
          .join(', ');
        throw new Error(`readAll(${this.topic}): not caught up after ${timeoutMs} ms (${lag})`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const out: ReadRecord[] = [];
    for (const p of [...this.byPartition.keys()].sort((a, b) => a - b)) {
      const high = highWatermarks.get(p) ?? Number.POSITIVE_INFINITY;
      for (const r of this.byPartition.get(p)!) if (r.offset < high) out.push(r);
    }
    return out;
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}
