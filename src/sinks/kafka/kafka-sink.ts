import { readFileSync } from 'node:fs';
import {
  type Admin,
  CompressionTypes,
  Kafka,
  type KafkaConfig,
  logLevel,
  type Message,
  type Producer,
  type ProducerConfig,
  type SASLOptions,
} from 'kafkajs';
import type { Config } from '../../config/load.ts';
import type { Logger } from '../../observability/logger.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { type KnownTopic, knownTopics } from '../../route/topic-settings.ts';
import type { ExactlyOnceProgress, PublishOptions, Sink } from '../sink.ts';
import { CODEC_IDS, type CodecName, loadCodec, registerKafkajsCodecs } from './kafka-codecs.ts';
import { breaksProducer, type Classified, classifyKafkaError } from './kafka-errors.ts';
import { noDelaySocketFactory } from './kafka-socket.ts';
import { TopicProvisioner, type TopicReport } from './kafka-topics.ts';
import { TransactionalPublisher } from './kafka-transactions.ts';
import { installKafkajsPatches } from './kafkajs/install.ts';
import { logCreator } from './kafkajs/log.ts';
import { oauthBearerAuthenticator } from './kafkajs/oauthbearer.ts';
import { produceRequestsBuilt } from './kafkajs/produce-hook.ts';
import { CachedDefaultPartitioner } from './key-partitioner.ts';
import { MissingTopics } from './missing-topics.ts';
import { oauthTokens, type TokenCache } from './oauth-token.ts';
import { PartitionLedger, UnacknowledgedPartitionsError } from './partition-acks.ts';

export type KafkaSinkConfig = Pick<
  Config,
  | 'kafkaBrokers'
  | 'kafkaClientId'
  | 'kafkaSsl'
  | 'kafkaSslCaFile'
  | 'kafkaSslCertFile'
  | 'kafkaSslKeyFile'
  | 'kafkaSaslMechanism'
  | 'kafkaSaslUsername'
  | 'kafkaSaslPassword'
  | 'kafkaOauthTokenUrl'
  | 'kafkaOauthClientId'
  | 'kafkaOauthClientSecret'
  | 'kafkaOauthScope'
  | 'kafkaOauthAudience'
  | 'kafkaOauthTokenCommand'
  | 'kafkaOauthExtensions'
  | 'kafkaCompression'
  | 'kafkaAutoCreateTopics'
  | 'kafkaRequestTimeoutMs'
> &
  Partial<
    Pick<
      Config,
      | 'delivery'
      | 'kafkaProgressTopic'
      | 'kafkaTransactionTimeoutMs'
      | 'databaseUrl'
      | 'slot'
      | 'batchSize'
      | 'batchBytes'
    >
  > &
  Partial<
    Pick<
      Config,
      | 'kafkaTopics'
      | 'kafkaTopicPartitions'
      | 'kafkaTopicReplicationFactor'
      | 'kafkaTopicConfig'
      | 'kafkaTopicOverrides'
      | 'topicTemplate'
      | 'topicOverrides'
    >
  >;

/** The connection options alone (what a reader of a topic needs). */
export type KafkaClientSettings = Omit<KafkaSinkConfig, 'kafkaCompression' | 'kafkaAutoCreateTopics'>;

function topicSettingsOf(c: KafkaSinkConfig) {
  return {
    kafkaTopicPartitions: c.kafkaTopicPartitions ?? 0,
    kafkaTopicReplicationFactor: c.kafkaTopicReplicationFactor ?? 0,
    kafkaTopicConfig: c.kafkaTopicConfig ?? {},
    kafkaTopicOverrides: c.kafkaTopicOverrides ?? {},
  };
}

function ssl(c: KafkaClientSettings) {
  if (!c.kafkaSsl && !c.kafkaSslCaFile && !c.kafkaSslCertFile) return undefined;
  if (!c.kafkaSslCaFile && !c.kafkaSslCertFile) return true;
  return {
    ca: c.kafkaSslCaFile ? [readFileSync(c.kafkaSslCaFile, 'utf8')] : undefined,
    cert: c.kafkaSslCertFile ? readFileSync(c.kafkaSslCertFile, 'utf8') : undefined,
    key: c.kafkaSslKeyFile ? readFileSync(c.kafkaSslKeyFile, 'utf8') : undefined,
  };
}

function sasl(c: KafkaClientSettings, tokens: TokenCache | null): SASLOptions | undefined {
  if (c.kafkaSaslMechanism === 'none') return undefined;
  // kafkajs' own OAUTHBEARER takes a refused token for success (src/sinks/kafka/kafkajs/oauthbearer.ts).
  if (tokens)
    return {
      mechanism: 'oauthbearer',
      authenticationProvider: oauthBearerAuthenticator(tokens, c.kafkaOauthExtensions),
    } as unknown as SASLOptions;
  return {
    mechanism: c.kafkaSaslMechanism,
    username: c.kafkaSaslUsername ?? '',
    password: c.kafkaSaslPassword ?? '',
  } as SASLOptions;
}

/**
 * The kafkajs client settings of the relay's connection options (brokers, TLS, SASL/OAUTHBEARER),
 * for the sink and for one-shot readers (migrate's Connect offsets topic).
 */
export function kafkaClientConfig(
  c: KafkaClientSettings,
  tokens: TokenCache | null,
  log: Logger,
): KafkaConfig {
  return {
    clientId: c.kafkaClientId,
    brokers: c.kafkaBrokers,
    ssl: ssl(c),
    sasl: sasl(c, tokens),
    connectionTimeout: 5000,
    requestTimeout: c.kafkaRequestTimeoutMs,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    socketFactory: noDelaySocketFactory,
    logLevel: logLevel.WARN,
    logCreator: logCreator(log.child({ component: 'kafkajs' })),
  };
}

/**
 * Kafka through kafkajs: idempotent producer, acks = all, one request in flight per
 * broker (so a retry cannot reorder a key), no topic auto-creation unless asked.
 * kafkajs's own retries are kept short: the relay's loop retries forever with back-off
 * and keeps the slot unconfirmed meanwhile.
 *
 * A producer whose idempotence state may be broken (breaksProducer: a permanent refusal, a
 * sequence or producer-id error) is replaced before the next send; the replacement connects
 * lazily, so a broker outage at that moment is one more transient error.
 */
export class KafkaSink implements Sink {
  readonly name = 'kafka';
  readonly #kafka: Kafka;
  readonly #producerConfig: ProducerConfig;
  readonly #log: Logger;
  #producer: Producer;
  #connected: Promise<void> | null = null;
  /** Producers replaced so far (tests and logs). */
  producerReplacements = 0;
  readonly #compression: CompressionTypes;
  /** The codec start() loads (none: undefined). */
  readonly #codec: CodecName | undefined;
  readonly #timeout: number;
  /** Exactly-once: the most events and bytes of one produce request inside a transaction. */
  readonly #requestBounds: { size: number; bytes: number };
  /** The (topic, partition)s of the publish in progress (one publish at a time: #tail). */
  readonly #ledger = new PartitionLedger();
  /** Sends the client reported done that a partition's response did not cover (tests, logs). */
  unacknowledgedSends = 0;
  /** OAUTHBEARER tokens (null for other mechanisms). */
  readonly tokens: TokenCache | null;
  /** --kafka-topics (src/sinks/kafka/kafka-topics.ts) and the topics known from the configuration. */
  readonly #topics: TopicProvisioner;
  readonly #known: KnownTopic[];
  /** --delivery exactly-once: every publish is a Kafka transaction (kafka-transactions.ts). */
  readonly transactions: TransactionalPublisher | null = null;
  readonly exactlyOnce?: ExactlyOnceProgress;
  /**
   * Topics found missing (their events fail at once, looked for again at most once a second) and
   * topics known present (a topic never sent to is asked about once first): missing-topics.ts.
   */
  readonly missingTopics: MissingTopics;
  /** The admin client of those probes: connected once, no retries (one request, one answer). */
  #probeAdmin: Admin | null = null;

  /** `client`: the Kafka client class (tests pass one to check the acknowledgement rule against). */
  constructor(c: KafkaSinkConfig, log: Logger, client?: typeof Kafka) {
    this.#log = log;
    this.tokens = oauthTokens(c);
    // The relay's kafkajs patches (src/sinks/kafka/kafkajs/README.md): record batches written in
    // one pass, no 1 ms timer per idle connection, and kafkajs' client with the relay's
    // sendMessages — a partition is sent until a response acknowledges it, even after its leader
    // moved. Each one only where kafkajs' internals are as expected; the log says which.
    const patches = installKafkajsPatches(log);
    const Client = client ?? patches.Client;
    this.#kafka = new (Client ?? Kafka)(kafkaClientConfig(c, this.tokens, log));
    this.#producerConfig = {
      // kafkajs 2's default (named, so kafkajs does not warn that the default changed), each
      // key's partition remembered: murmur2 of the key, as the Java client partitions
      // (consumers of other clients agree on partitions).
      // Every assignment is recorded in the ledger, which checks the responses against them.
      createPartitioner: () => {
        const partition = CachedDefaultPartitioner();
        const ledger = this.#ledger;
        return (args) => {
          const p = partition(args);
          ledger.record(args.topic, p);
          return p;
        };
      },
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: c.kafkaAutoCreateTopics,
      retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    };
    this.#producer = this.#kafka.producer(this.#producerConfig);
    // A topic the producer may create is never missing for long: no probe before its first send.
    this.missingTopics = new MissingTopics((topic) => this.#probeTopic(topic), {
      probeFirst: !c.kafkaAutoCreateTopics,
    });
    if (c.delivery === 'exactly-once') {
      const t = new TransactionalPublisher(
        this.#kafka,
        this.#producerConfig,
        {
          transactionalId: transactionalIdOf(c.databaseUrl ?? '', c.slot ?? ''),
          progressTopic: c.kafkaProgressTopic ?? 'outbox-relay.progress',
          transactionTimeoutMs: c.kafkaTransactionTimeoutMs ?? 60000,
        },
        log,
      );
      this.transactions = t;
      this.exactlyOnce = {
        committed: async () => {
          const p = await t.committed();
          return { published: p?.published ?? '{}', timeline: p?.timeline ?? null };
        },
        timeline: (key) => t.setTimeline(key),
        recorded: (ids) => t.recorded(ids),
        fenced: () => t.fenced,
        counts: () => ({
          commits: t.commits,
          replacements: t.replacements,
          progressTopicLosses: t.progressTopicLosses,
        }),
      };
    }
    // snappy, lz4, zstd: the relay's codecs (src/sinks/kafka/kafka-codecs.ts), given to kafkajs too.
    registerKafkajsCodecs();
    this.#compression = c.kafkaCompression === 'none' ? CompressionTypes.None : CODEC_IDS[c.kafkaCompression];
    this.#codec = c.kafkaCompression === 'none' ? undefined : c.kafkaCompression;
    this.#timeout = c.kafkaRequestTimeoutMs;
    this.#requestBounds = { size: c.batchSize ?? 0, bytes: c.batchBytes ?? 0 };
    this.#topics = new TopicProvisioner(this.#kafka, c.kafkaTopics ?? 'off', topicSettingsOf(c), log);
    this.#known = knownTopics(
      { topicTemplate: c.topicTemplate ?? '', topicOverrides: c.topicOverrides ?? {} },
      topicSettingsOf(c),
    );
  }

  async start(): Promise<void> {
    // The chosen codec's module, for the Produce encoder (src/sinks/kafka/kafka-codecs.ts).
    if (this.#codec) await loadCodec(this.#codec);
    await this.#topics.start(this.#known);
    if (this.transactions) await this.transactions.start();
    else await this.#connect();
  }

  /** The configured topics' state (`outbox-relay check`), whatever --kafka-topics says. */
  topicReport(): Promise<TopicReport[]> {
    return this.#topics.report(this.#known);
  }

  /** Topics this sink created (--kafka-topics create). */
  get createdTopics(): readonly string[] {
    return this.#topics.created;
  }

  /**
   * The producer's connection, shared by whoever waits for it. A failed connect drops the
   * producer (and its connections) for a new one: kafkajs 2.2.4 keeps a broker whose first
   * ApiVersions request failed (a frozen broker: a time-out) on its open socket, "connected" but
   * without request versions, and every later request of that producer to it fails `Broker not
   * connected` until the broker closes the idle socket (connections.max.idle.ms, 10 minutes).
   * The next attempt connects afresh.
   */
  #connect(): Promise<void> {
    if (this.#connected) return this.#connected;
    const producer = this.#producer;
    const connected = producer.connect().catch((e: unknown) => {
      // At debug: the relay's outage log says once that the sink cannot start, and why.
      this.#log.debug(
        { err: classifyKafkaError(e).message },
        'Kafka producer could not connect: dropping it, the next attempt connects afresh',
      );
      void this.#drop(producer);
      throw e;
    });
    this.#connected = connected;
    return connected;
  }

  /**
   * Drops `old` (if it is still the current producer) for a new one, not yet connected; resolves
   * once `old` is disconnected (its requests in flight end first).
   */
  #drop(old: Producer): Promise<void> {
    if (this.#producer !== old) return Promise.resolve();
    this.#producer = this.#kafka.producer(this.#producerConfig);
    this.#connected = null;
    return old.disconnect().catch(() => {});
  }

  /**
   * The relay stopped waiting for start() (--sink-start-timeout-ms): every client the start may
   * hang on is dropped, without waiting for them (their requests may never be answered); the
   * next start() connects new ones.
   */
  abandonStart(): void {
    void this.#drop(this.#producer);
    const admin = this.#probeAdmin;
    this.#probeAdmin = null;
    void admin?.disconnect().catch(() => {});
    this.#topics.abandon();
    this.transactions?.abandonStart();
  }

  /** The publish in progress: the next one waits for it (the ledger and kafkajs' sequences need one at a time). */
  #tail: Promise<unknown> = Promise.resolve();

  publish(batch: readonly OutboundMessage[], opts?: PublishOptions): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch, opts));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[], opts?: PublishOptions): Promise<void> {
    const topicMessages = byTopic(batch);
    if (this.#topics.mode !== 'off')
      await this.#topics.ensure(
        topicMessages.map((t) => ({
          topic: t.topic,
          aggregateType: (t.messages[0] as unknown as OutboundMessage).event?.aggregateType ?? '',
        })),
      );
    // Nothing on the usual path (every topic sent to before, none missing): no list, no await.
    const checked = this.missingTopics.needsCheck(topicMessages);
    if (checked) {
      const found = this.missingTopics.foundBeforeSend;
      const refused = await this.missingTopics.refusal(
        topicMessages.map((t) => t.topic),
        opts?.stream === true,
      );
      if (refused) {
        if (this.missingTopics.foundBeforeSend !== found)
          this.#log.warn({ topic: refused.topic }, MISSING_TOPIC);
        throw refused;
      }
    }
    try {
      await this.#send(batch, topicMessages, opts);
      if (checked) this.missingTopics.sent(topicMessages.map((t) => t.topic));
    } catch (e) {
      const topic = topicMessages[0]?.topic ?? '';
      if (
        topicMessages.length === 1 &&
        !this.#producerConfig.allowAutoTopicCreation &&
        classifyKafkaError(e).reason === 'UNKNOWN_TOPIC_OR_PARTITION' &&
        !this.missingTopics.has(topic) &&
        (await this.missingTopics.confirm(topic))
      )
        this.#log.warn({ topic }, MISSING_TOPIC);
      throw e;
    }
  }

  async #send(
    batch: readonly OutboundMessage[],
    topicMessages: { topic: string; messages: Message[] }[],
    opts?: PublishOptions,
  ): Promise<void> {
    if (this.transactions) {
      const send = { timeout: this.#timeout, compression: this.#compression };
      // A transaction of several batches (--kafka-transaction-batches): one produce request per
      // batch's worth, in stream order, so no record batch outgrows the broker's message.max.bytes.
      const requests = requestsOf(batch, topicMessages, this.#requestBounds);
      return this.transactions.publish(batch, requests, opts?.progress === true, send, this.#ledger);
    }
    await this.#connect();
    const producer = this.#producer;
    const builtBefore = produceRequestsBuilt();
    this.#ledger.begin();
    let responses: Awaited<ReturnType<Producer['sendBatch']>>;
    try {
      responses = await producer.sendBatch({
        acks: -1,
        timeout: this.#timeout,
        compression: this.#compression,
        topicMessages,
      });
    } catch (e) {
      // A permanent refusal breaks the producer only if a Produce request went out (the broker may
      // have stored its other partitions); one raised before any (a missing topic, found by the
      // metadata request) leaves the sequence state intact: replacing would only stall the stream.
      const produced = builtBefore === null || produceRequestsBuilt() !== builtBefore;
      if (breaksProducer(e) && (produced || classifyKafkaError(e).class !== 'permanent'))
        await this.#replace(producer, e);
      throw e;
    }
    // The client's "done" is not the broker's acknowledgement: every partition a message was
    // assigned to needs a response of its own (src/sinks/kafka/partition-acks.ts).
    const missing = this.#ledger.unacknowledged(responses);
    if (missing.length > 0) {
      this.unacknowledgedSends++;
      const e = new UnacknowledgedPartitionsError(missing);
      this.#log.warn({ partitions: missing }, e.message);
      throw e;
    }
  }

  /** Drops `old` (if it is still the current producer) for a new one: new producer id, fresh sequence numbers. */
  async #replace(old: Producer, cause: unknown): Promise<void> {
    if (this.#producer !== old) return;
    this.producerReplacements++;
    this.#log.warn(
      { reason: classifyKafkaError(cause).reason },
      'replacing the Kafka producer (its sequence state may no longer match the broker): events already stored may be sent again (duplicates, never losses)',
    );
    await this.#drop(old);
  }

  classify(e: unknown): Classified {
    return classifyKafkaError(e);
  }

  /**
   * Whether the relay can publish to `topic` (the dead-letter topic, checked at start): it exists
   * (or the producer may create it) and its metadata is not refused. `unreachable` when the
   * brokers cannot be asked now; the relay's own retries handle that.
   */
  async checkTopic(topic: string): Promise<'ok' | 'missing' | 'unauthorized' | 'unreachable'> {
    const admin = this.#kafka.admin();
    try {
      await admin.connect();
      // The answer must name the topic with partitions: a call that merely resolved is not a "yes".
      const md = await admin.fetchTopicMetadata({ topics: [topic] });
      const found = md.topics.find((t) => t.name === topic);
      if (found && found.partitions.length > 0) return 'ok';
      return this.#producerConfig.allowAutoTopicCreation ? 'ok' : 'missing';
    } catch (e) {
      const type = (e as { type?: string }).type ?? '';
      if (type === 'UNKNOWN_TOPIC_OR_PARTITION')
        return this.#producerConfig.allowAutoTopicCreation ? 'ok' : 'missing';
      if (type === 'TOPIC_AUTHORIZATION_FAILED') return 'unauthorized';
      return 'unreachable';
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }

  /** Whether `topic` exists, by one metadata request without kafkajs' retries. */
  async #probeTopic(topic: string): Promise<'ok' | 'missing' | 'unauthorized' | 'unreachable'> {
    try {
      if (!this.#probeAdmin) {
        const admin = this.#kafka.admin({ retry: { retries: 0 } });
        await admin.connect();
        this.#probeAdmin = admin;
      }
      const md = await this.#probeAdmin.fetchTopicMetadata({ topics: [topic] });
      return md.topics.some((t) => t.name === topic && t.partitions.length > 0) ? 'ok' : 'missing';
    } catch (e) {
      const type = (e as { type?: string }).type ?? '';
      if (type === 'UNKNOWN_TOPIC_OR_PARTITION') return 'missing';
      if (type === 'TOPIC_AUTHORIZATION_FAILED') return 'unauthorized';
      const admin = this.#probeAdmin;
      this.#probeAdmin = null;
      await admin?.disconnect().catch(() => {});
      return 'unreachable';
    }
  }

  async stop(): Promise<void> {
    await this.#probeAdmin?.disconnect().catch(() => {});
    this.#probeAdmin = null;
    await this.transactions?.stop();
    await this.#producer.disconnect();
  }
}

type TopicMessages = { topic: string; messages: Message[] }[];

const MISSING_TOPIC =
  'topic does not exist: its events are refused at once, and it is looked for again at most once a second';

/**
 * The batch grouped by topic, keeping stream order within each (order within a key, hence a
 * partition, is kept). The messages go to kafkajs as they are: they have its Message's key, value
 * and headers, and a numeric timestamp, which kafkajs (and src/sinks/kafka/produce-encoder.ts) take as
 * well as its string. No copy per event; a batch for one topic (the usual case) is not copied at all.
 */
function byTopic(batch: readonly OutboundMessage[]): TopicMessages {
  const topic = batch[0]?.topic;
  if (batch.every((m) => m.topic === topic))
    return [{ topic: topic ?? '', messages: batch as unknown as Message[] }];
  const groups = new Map<string, Message[]>();
  for (const m of batch) {
    let list = groups.get(m.topic);
    if (!list) groups.set(m.topic, (list = []));
    list.push(m as unknown as Message);
  }
  return [...groups].map(([topic, messages]) => ({ topic, messages }));
}

/**
 * Exactly-once: a transaction's batch cut into produce requests of at most `bounds` events and
 * bytes (0: no bound), consecutive in stream order — sent one after another, they keep each
 * partition's order. A batch within the bounds is one request (`whole`, not regrouped).
 */
export function requestsOf(
  batch: readonly OutboundMessage[],
  whole: TopicMessages,
  bounds: { size: number; bytes: number },
): TopicMessages[] {
  const size = bounds.size > 0 ? bounds.size : Infinity;
  const maxBytes = bounds.bytes > 0 ? bounds.bytes : Infinity;
  const requests: TopicMessages[] = [];
  let start = 0;
  let bytes = 0;
  for (let i = 0; i < batch.length; i++) {
    const b = batch[i]!.bytes;
    if (i > start && (i - start >= size || bytes + b > maxBytes)) {
      requests.push(byTopic(batch.slice(start, i)));
      start = i;
      bytes = 0;
    }
    bytes += b;
  }
  if (start === 0) return [whole];
  requests.push(byTopic(batch.slice(start)));
  return requests;
}

/**
 * Exactly-once: the transactional id of a slot's relay, stable across restarts and equal for
 * every relay of that database and slot (an active one and its standbys: the newer fences the
 * older), whatever host name each uses for the server. Only the database name and the slot:
 * two PostgreSQL clusters whose database and slot names are the same, publishing to one Kafka
 * cluster, fence each other loudly (exit 75) — give them different slot names. A host in the id
 * would instead let two relays of one slot, reaching it by different names, both publish.
 */
export function transactionalIdOf(databaseUrl: string, slot: string): string {
  let db = databaseUrl;
  try {
    const u = new URL(databaseUrl);
    db = decodeURIComponent(u.pathname.slice(1)) || decodeURIComponent(u.username);
  } catch {
    // not a URL: the whole string names the database
  }
  return `pg-outbox-relay/${db}/${slot}`;
}
