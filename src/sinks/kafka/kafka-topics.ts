import type { Admin, Kafka } from 'kafkajs';
import { ErrorCode, RelayError } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import {
  type KnownTopic,
  type TopicSettings,
  type TopicSettingsConfig,
  topicSettingsFor,
} from '../../route/topic-settings.ts';

/**
 * Topic provisioning (--kafka-topics): the topics the relay routes to, created on purpose with
 * stated settings (create), or checked at start (verify), instead of left to the broker's
 * auto.create.topics.enable (one partition, cluster defaults). The settings per aggregate type
 * are src/route/topic-settings.ts's.
 *
 * The cases, per topic:
 * - exists with at least the configured partitions: nothing to do;
 * - exists with fewer: reported (verify and check), never changed — adding partitions moves
 *   keys to other partitions, which breaks per-key order for consumers: an operator's decision;
 * - missing, create: CreateTopics with its settings. TOPIC_ALREADY_EXISTS (another relay, or
 *   an operator, was first) counts as created. Then the relay waits until every partition has a
 *   leader (the controller elects them just after creation; a Produce before that would fail
 *   with LEADER_NOT_AVAILABLE): no event pays for the race;
 * - missing, verify: an error at start naming the topics (exit 78); a topic met later is
 *   logged once and its events fail as they would without provisioning.
 * A topic ensured once is not asked about again by this process.
 */

export type TopicsMode = 'off' | 'verify' | 'create';

export interface TopicReport {
  topic: string;
  aggregateType: string;
  /** Partitions it has (0: missing). */
  partitions: number;
  /** The fewest wanted (0: no requirement). */
  wanted: number;
  problem?: 'missing' | 'too-few-partitions';
}

/** How long to wait for the leaders of a topic just created. */
const LEADER_WAIT_MS = 30_000;

export class TopicProvisioner {
  readonly #kafka: Kafka;
  readonly #mode: TopicsMode;
  readonly #settings: TopicSettingsConfig;
  readonly #log: Logger;
  /** Topics that exist with their leaders (create) or were reported once (verify). */
  readonly #done = new Set<string>();
  /** Topics this process created (tests, logs). */
  readonly created: string[] = [];
  /** The admin clients in use (#withAdmin). */
  readonly #admins = new Set<Admin>();

  constructor(kafka: Kafka, mode: TopicsMode, settings: TopicSettingsConfig, log: Logger) {
    this.#kafka = kafka;
    this.#mode = mode;
    this.#settings = settings;
    this.#log = log;
  }

  get mode(): TopicsMode {
    return this.#mode;
  }

  /** What each topic lacks, for `check` and verify. */
  async report(topics: readonly KnownTopic[]): Promise<TopicReport[]> {
    return this.#withAdmin((admin) => this.#report(admin, topics));
  }

  /** At start: create the known topics (create), or fail naming those missing or short of partitions (verify). */
  async start(topics: readonly KnownTopic[]): Promise<void> {
    if (this.#mode === 'off' || topics.length === 0) return;
    if (this.#mode === 'create') return this.ensure(topics);
    const problems = (await this.report(topics)).filter((r) => r.problem);
    for (const t of topics) this.#done.add(t.topic);
    if (problems.length === 0) {
      this.#log.info({ topics: topics.map((t) => t.topic) }, 'topics verified');
      return;
    }
    throw new RelayError(
      ErrorCode.KAFKA_TOPICS_NOT_READY,
      `--kafka-topics verify: ${describeTopicProblems(problems)}`,
      {
        details: { topics: problems },
      },
    );
  }

  /** Before a publish: the topics not seen yet are created (create) or checked and logged (verify). */
  async ensure(topics: readonly KnownTopic[]): Promise<void> {
    if (this.#mode === 'off') return;
    const fresh = topics.filter((t) => !this.#done.has(t.topic));
    if (fresh.length === 0) return;
    await this.#withAdmin(async (admin) => {
      const reports = await this.#report(admin, fresh);
      if (this.#mode === 'verify') {
        const problems = reports.filter((r) => r.problem);
        if (problems.length > 0)
          this.#log.warn({ topics: problems }, `--kafka-topics verify: ${describeTopicProblems(problems)}`);
      } else {
        for (const r of reports) {
          if (r.problem === 'missing') await this.#create(admin, r.topic, r.aggregateType);
          else if (r.problem) this.#log.warn({ topic: r }, describeTopicProblems([r]));
          await this.#leaders(admin, r.topic);
        }
      }
      for (const t of fresh) this.#done.add(t.topic);
    });
  }

  async #create(admin: Admin, topic: string, aggregateType: string): Promise<void> {
    const s: TopicSettings = topicSettingsFor(aggregateType, this.#settings);
    const made = await admin
      .createTopics({
        topics: [
          {
            topic,
            numPartitions: s.partitions || -1,
            replicationFactor: s.replicationFactor || -1,
            configEntries: Object.entries(s.config).map(([name, value]) => ({ name, value })),
          },
        ],
        waitForLeaders: false,
        timeout: LEADER_WAIT_MS,
      })
      .catch((e: unknown) => {
        throw new TopicProvisioningError(topic, s, e);
      });
    if (made) {
      this.created.push(topic);
      this.#log.info({ topic, aggregateType, ...s }, 'topic created');
    } else this.#log.info({ topic }, 'topic created meanwhile by someone else');
  }

  /** Waits until the topic's metadata lists partitions, each with a leader. */
  async #leaders(admin: Admin, topic: string): Promise<void> {
    const deadline = Date.now() + LEADER_WAIT_MS;
    for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
      const md = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => null);
      const parts = md?.topics.find((t) => t.name === topic)?.partitions ?? [];
      if (parts.length > 0 && parts.every((p) => p.leader >= 0 && p.partitionErrorCode === 0)) return;
      if (Date.now() > deadline)
        throw new RelayError(
          ErrorCode.BROKER_UNAVAILABLE,
          `topic ${topic}: no leader for every partition after ${LEADER_WAIT_MS} ms`,
          {
            retriable: true,
          },
        );
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  async #report(admin: Admin, topics: readonly KnownTopic[]): Promise<TopicReport[]> {
    const existing = new Set(await admin.listTopics());
    const present = topics.filter((t) => existing.has(t.topic)).map((t) => t.topic);
    const md = present.length > 0 ? await admin.fetchTopicMetadata({ topics: present }) : { topics: [] };
    const partitions = new Map(md.topics.map((t) => [t.name, t.partitions.length]));
    return topics.map(({ topic, aggregateType }) => {
      const have = partitions.get(topic) ?? 0;
      const wanted = topicSettingsFor(aggregateType, this.#settings).partitions;
      const problem = have === 0 ? 'missing' : wanted > have ? 'too-few-partitions' : undefined;
      return { topic, aggregateType, partitions: have, wanted, ...(problem ? { problem } : {}) };
    });
  }

  /** A new admin client for `fn`, disconnected after it (after a failed connect too: no half-open socket left). */
  async #withAdmin<T>(fn: (admin: Admin) => Promise<T>): Promise<T> {
    const admin = this.#kafka.admin();
    this.#admins.add(admin);
    try {
      await admin.connect();
      return await fn(admin);
    } finally {
      this.#admins.delete(admin);
      await admin.disconnect().catch(() => {});
    }
  }

  /** The sink's start was abandoned (--sink-start-timeout-ms): the admin clients in use are disconnected. */
  abandon(): void {
    for (const admin of this.#admins) void admin.disconnect().catch(() => {});
    this.#admins.clear();
  }
}

/**
 * A topic the relay could not create (INVALID_REPLICATION_FACTOR, POLICY_VIOLATION, no CREATE
 * ACL…): a problem of the relay's settings or rights, not of the events routed there, so none
 * is failed for it. Transient by the sink's table (the Kafka error is kept out of `cause`,
 * whose permanent types would fail the events): the stream stalls, retries and says why.
 */
export class TopicProvisioningError extends Error {
  override name = 'TopicProvisioningError';
  /** The broker's or the client's error. */
  readonly refusal: unknown;

  constructor(topic: string, s: TopicSettings, e: unknown) {
    // kafkajs reports CreateTopics' per-topic errors inside a KafkaJSAggregateError's `errors`.
    const inner = (e as { errors?: unknown[] }).errors?.[0] ?? e;
    const type = (inner as { type?: string }).type;
    super(
      `--kafka-topics create: cannot create topic ${topic} (partitions ${s.partitions || 'broker default'}, replication factor ${s.replicationFactor || 'broker default'}${
        Object.keys(s.config).length
          ? `, ${Object.entries(s.config)
              .map(([k, v]) => `${k}=${v}`)
              .join(', ')}`
          : ''
      }): ${type ? `${type}: ` : ''}${inner instanceof Error ? inner.message : String(inner)}. Nothing is failed; the relay retries. Fix the --kafka-topic-* settings, grant CREATE on the topic, or create it yourself`,
    );
    this.refusal = e;
  }
}

/** "missing: a, b; fewer partitions than configured: c (2 of 6)". */
export function describeTopicProblems(problems: readonly TopicReport[]): string {
  const missing = problems.filter((p) => p.problem === 'missing').map((p) => p.topic);
  const short = problems
    .filter((p) => p.problem === 'too-few-partitions')
    .map((p) => `${p.topic} (${p.partitions} of ${p.wanted})`);
  return [
    missing.length ? `missing: ${missing.join(', ')}` : '',
    short.length ? `fewer partitions than configured: ${short.join(', ')}` : '',
  ]
    .filter(Boolean)
    .join('; ');
}
