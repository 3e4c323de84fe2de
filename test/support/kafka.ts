/**
 * Real Apache Kafka for the tests.
 *
 *   const kafka = await startKafka();                 // the run's shared broker, a topic namespace of its own
 *   await kafka.createTopic('outbox.event.Orders', 3); // really '<ns>outbox.event.Orders'
 *   spawnRelay(db, kafka)                              // relay args carry the brokers and the namespaced template
 *   const records = await kafka.readAll('outbox.event.Orders');
 *   await kafka.stop();                                // deletes the namespace's topics
 *
 *   const ded = await startDedicatedKafka({ brokers: 3, proxy: true });  // brokers of this test alone
 *   await ded.cluster.kill(2); await ded.cluster.start(2); ded.proxies[0].cut(); …
 *
 * The shared broker is started once per run by test/support/global-setup.ts, chosen in this order:
 * KAFKA_TEST_BROKERS (an existing cluster) → a local broker from Apache's jars (Java ≥ 17 + Maven)
 * → testcontainers where a container engine answers → a loud failure. Dedicated brokers (faults:
 * kill -9, leader failover, SASL/ACLs, broker-level settings) are always local brokers from the
 * jars, since the tests must control their processes. KAFKA_VERSION picks the Kafka version.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { type Admin, Kafka, logLevel } from 'kafkajs';
import { inject } from 'vitest';
import { LocalKafkaCluster, type OAuthBearerListener, type SaslUsers } from '../../src/dev/local-kafka.ts';
import { TcpProxy } from './tcp-proxy.ts';
import { type RawRecord, type ReadUpToOptions, TopicReader, tp } from './topic-reader.ts';

/** A record as read back from a topic by an independent consumer. */
export interface ReadRecord {
  topic: string;
  partition: number;
  offset: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer>;
  timestamp: number;
}

export interface CreateTopicOptions {
  /** Topic-level configs, e.g. { 'max.message.bytes': '400' }. */
  config?: Record<string, string>;
  /** Replica assignment per partition (first = preferred leader); dedicated clusters. */
  replicas?: number[][];
  replicationFactor?: number;
}

export interface KafkaHarness {
  /** Bootstrap servers the relay uses (--kafka-brokers). */
  readonly brokers: string[];
  /** Prefix of every topic this harness creates and reads ('' on a dedicated cluster). */
  readonly ns: string;
  /** Which source provided the broker, for messages. */
  readonly source: string;
  /** The real topic name of `name` (ns + name). */
  topic(name: string): string;
  /** The relay's Kafka arguments: brokers and a topic template inside the namespace. */
  relayArgs(): string[];
  createTopic(name: string, partitions?: number, opts?: CreateTopicOptions): Promise<void>;
  deleteTopic(name: string): Promise<void>;
  /** Names (without the namespace) of the namespace's topics. */
  listTopics(): Promise<string[]>;
  /**
   * Every record of `topic` at the time of the call, in (partition, offset) order; [] if it does
   * not exist. Survives broker restarts; bounded by progress (test/support/topic-reader.ts).
   */
  readAll(topic: string, opts?: ReadAllOptions): Promise<ReadRecord[]>;
  /** A kafkajs admin for anything else (connected; do not disconnect it). */
  admin(): Promise<Admin>;
  stop(): Promise<void>;
}

export interface ReadAllOptions extends ReadUpToOptions {
  /** The former name of `idleMs` (readAll once waited this long in all). */
  timeoutMs?: number;
}

export interface DedicatedKafka extends KafkaHarness {
  readonly cluster: LocalKafkaCluster;
  /** One per node when started with `proxy: true` (the relay's path to node i is proxies[i-1]). */
  readonly proxies: TcpProxy[];
}

declare module 'vitest' {
  export interface ProvidedContext {
    kafkaBrokers: string[];
    kafkaSource: string;
    /** Directory under which dedicated clusters are created (cleaned up by the global teardown). */
    kafkaRunDir: string;
  }
}

/** The topic template the relay uses by default, inside a namespace. */
export function namespacedTemplate(ns: string): string {
  return `${ns}outbox.event.{aggregate_type}`;
}

/** The run's shared broker with a fresh topic namespace. */
export async function startKafka(): Promise<KafkaHarness> {
  const brokers = inject('kafkaBrokers');
  const source = inject('kafkaSource');
  if (!brokers || brokers.length === 0)
    throw new Error('no shared Kafka: test/support/global-setup.ts did not run');
  const ns = `t${randomBytes(4).toString('hex')}.`;
  return new Harness(brokers, brokers, ns, source, undefined);
}

export interface DedicatedKafkaOptions {
  brokers?: number;
  autoCreateTopics?: boolean;
  maxMessageBytes?: number;
  /** Put a TcpProxy in front of each node's client listener. */
  proxy?: boolean;
  sasl?: SaslUsers;
  oauthbearer?: OAuthBearerListener;
  extraConfig?: Record<string, string | number | boolean>;
}

/** Broker(s) for this test alone, from the local jars (the test may kill, freeze or restart them). */
export async function startDedicatedKafka(opts: DedicatedKafkaOptions = {}): Promise<DedicatedKafka> {
  const count = opts.brokers ?? 1;
  const dir = join(inject('kafkaRunDir'), `dedicated-${randomUUID().slice(0, 8)}`);
  // Proxies first, on ports the kernel picked: the brokers advertise them; they learn their
  // targets once the brokers' own ports are known.
  const proxies: TcpProxy[] = [];
  if (opts.proxy) for (let i = 0; i < count; i++) proxies.push(await TcpProxy.start());
  let cluster: LocalKafkaCluster;
  try {
    cluster = await LocalKafkaCluster.up({
      dir,
      port: 0,
      brokers: count,
      autoCreateTopics: opts.autoCreateTopics,
      maxMessageBytes: opts.maxMessageBytes,
      sasl: opts.sasl,
      oauthbearer: opts.oauthbearer,
      extraConfig: opts.extraConfig,
      advertisedPorts: proxies.length > 0 ? proxies.map((p) => p.port) : undefined,
      heapMb: 384,
    });
  } catch (e) {
    await Promise.all(proxies.map((p) => p.stop()));
    await LocalKafkaCluster.down(dir);
    throw e;
  }
  for (const [i, n] of cluster.nodes.entries()) proxies[i]?.forwardTo({ port: n.clientPort });
  const harness = new Harness(cluster.bootstrap, cluster.internalBootstrap, '', `dedicated ${dir}`, cluster);
  return Object.assign(harness, { cluster, proxies }) as unknown as DedicatedKafka;
}

class Harness implements KafkaHarness {
  readonly brokers: string[];
  readonly ns: string;
  readonly source: string;
  readonly #kafka: Kafka;
  readonly #cluster: LocalKafkaCluster | undefined;
  #admin: Promise<Admin> | null = null;
  readonly #readers = new Map<string, TopicReader>();
  readonly #created = new Set<string>();

  constructor(
    brokers: string[],
    adminBrokers: string[],
    ns: string,
    source: string,
    cluster: LocalKafkaCluster | undefined,
  ) {
    this.brokers = brokers;
    this.ns = ns;
    this.source = source;
    this.#cluster = cluster;
    this.#kafka = new Kafka({
      clientId: 'test-harness',
      brokers: adminBrokers,
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3000,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 2000 },
    });
  }

  topic(name: string): string {
    return name.startsWith(this.ns) ? name : `${this.ns}${name}`;
  }

  relayArgs(): string[] {
    const args = ['--kafka-brokers', this.brokers.join(',')];
    if (this.ns) args.push('--topic-template', namespacedTemplate(this.ns));
    return args;
  }

  admin(): Promise<Admin> {
    this.#admin ??= (async () => {
      const a = this.#kafka.admin();
      await a.connect();
      return a;
    })();
    return this.#admin;
  }

  async createTopic(name: string, partitions = 1, opts: CreateTopicOptions = {}): Promise<void> {
    const admin = await this.admin();
    const topic = this.topic(name);
    const configEntries = Object.entries(opts.config ?? {}).map(([n, value]) => ({ name: n, value }));
    const created = await admin.createTopics({
      topics: [
        opts.replicas
          ? {
              topic,
              replicaAssignment: opts.replicas.map((replicas, partition) => ({ partition, replicas })),
              configEntries,
            }
          : {
              topic,
              numPartitions: partitions,
              replicationFactor: opts.replicationFactor ?? Math.min(this.#cluster?.nodes.length ?? 1, 3),
              configEntries,
            },
      ],
      // kafkajs' own wait gives up on UNKNOWN_TOPIC_OR_PARTITION from a broker that has not
      // seen the new topic yet; #untilProducible waits for every partition's leader instead.
      waitForLeaders: false,
    });
    if (!created) throw new Error(`createTopic(${topic}): the topic exists already`);
    this.#created.add(topic);
    await this.#untilProducible(topic);
  }

  /** A real broker may answer LEADER_NOT_AVAILABLE for a moment after a create: wait it out here. */
  async #untilProducible(topic: string): Promise<void> {
    const admin = await this.admin();
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const md = await admin.fetchTopicMetadata({ topics: [topic] });
        const parts = md.topics[0]?.partitions ?? [];
        if (parts.length > 0 && parts.every((p) => p.leader >= 0 && p.partitionErrorCode === 0)) return;
      } catch {
        // Not there yet.
      }
      if (Date.now() > deadline) throw new Error(`topic ${topic} has no leaders after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async deleteTopic(name: string): Promise<void> {
    const admin = await this.admin();
    const topic = this.topic(name);
    await this.#readers.get(topic)?.stop();
    this.#readers.delete(topic);
    await admin.deleteTopics({ topics: [topic], timeout: 30_000 });
    this.#created.delete(topic);
    // Deletion is asynchronous in the broker: wait until the name is free again.
    const deadline = Date.now() + 30_000;
    while ((await admin.listTopics()).includes(topic)) {
      if (Date.now() > deadline) throw new Error(`topic ${topic} still listed 30 s after its deletion`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async listTopics(): Promise<string[]> {
    const admin = await this.admin();
    return (await admin.listTopics())
      .filter((t) => t.startsWith(this.ns) && !t.startsWith('__'))
      .map((t) => t.slice(this.ns.length));
  }

  async readAll(name: string, { timeoutMs, ...opts }: ReadAllOptions = {}): Promise<ReadRecord[]> {
    const topic = this.topic(name);
    const admin = await this.admin();
    let reader = this.#readers.get(topic);
    if (reader === undefined) {
      if (!(await admin.listTopics()).includes(topic)) return [];
      // One reader per topic for the harness' life: repeated readAll calls (tests poll with it)
      // cost a high-watermark lookup, not a group join.
      reader = new TopicReader(this.#kafka, [topic], 'test-read-all');
      this.#readers.set(topic, reader);
    }
    const offsets = await this.#offsets(topic);
    const high = new Map(offsets.map((o) => [tp(topic, o.partition), Number(o.high)]));
    return (await reader.readUpTo(high, { idleMs: timeoutMs, ...opts })).map(toReadRecord);
  }

  /**
   * The topic's offsets. After a partition's leader moved (a broker killed), kafkajs' admin keeps
   * asking the old leader — it refreshes its metadata only for an unknown topic — and fails with
   * NOT_LEADER_FOR_PARTITION or a connection error: a fresh admin reads fresh metadata. Retriable
   * errors only, for 10 s at most.
   */
  async #offsets(topic: string) {
    for (let attempt = 1; ; attempt++) {
      try {
        return await (await this.admin()).fetchTopicOffsets(topic);
      } catch (e) {
        if ((e as { retriable?: boolean }).retriable !== true || attempt >= 20) throw e;
        const stale = this.#admin;
        this.#admin = null;
        await stale?.then((a) => a.disconnect()).catch(() => {});
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  async stop(): Promise<void> {
    await Promise.allSettled([...this.#readers.values()].map((r) => r.stop()));
    this.#readers.clear();
    if (this.#cluster) {
      await this.#admin?.then((a) => a.disconnect()).catch(() => {});
      await this.#cluster.destroy();
      for (const p of (this as unknown as { proxies?: TcpProxy[] }).proxies ?? []) await p.stop();
      return;
    }
    // Shared broker: leave it as we found it (the namespace's topics, also those the relay auto-created).
    try {
      const admin = await this.admin();
      const mine = (await admin.listTopics()).filter((t) => t.startsWith(this.ns));
      if (mine.length > 0) await admin.deleteTopics({ topics: mine, timeout: 30_000 });
    } catch {
      // Best effort: a leftover topic in a namespace nobody uses again harms nobody.
    } finally {
      await this.#admin?.then((a) => a.disconnect()).catch(() => {});
    }
  }
}

function toReadRecord({ topic, partition, message: m }: RawRecord): ReadRecord {
  const headers: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    const last = Array.isArray(v) ? v.at(-1) : v;
    if (last !== undefined) headers[k] = Buffer.isBuffer(last) ? last : Buffer.from(last);
  }
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: m.key,
    value: m.value,
    headers,
    timestamp: Number(m.timestamp),
  };
}
