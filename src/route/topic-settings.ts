import { type RouteConfig, topicFor } from './router.ts';

/**
 * The settings a topic the relay provisions gets (--kafka-topics create|verify): partitions,
 * replication factor and topic configs, the same for every topic unless an aggregate type
 * overrides some of them (--kafka-topic-override AGGREGATE_TYPE=SETTINGS). Pure: parsing,
 * merging, and which topics are known before any event arrives; the I/O is
 * src/sinks/kafka/kafka-topics.ts.
 */
export interface TopicSettings {
  /** 0: the broker's num.partitions. */
  partitions: number;
  /** 0: the broker's default.replication.factor. */
  replicationFactor: number;
  /** Topic-level configs, e.g. { 'cleanup.policy': 'compact', 'compression.type': 'zstd' }. */
  config: Record<string, string>;
}

export interface TopicSettingsConfig {
  kafkaTopicPartitions: number;
  kafkaTopicReplicationFactor: number;
  kafkaTopicConfig: Record<string, string>;
  kafkaTopicOverrides: Record<string, string>;
}

/**
 * One override's settings: `partitions=12;replication-factor=3;retention.ms=86400000` — `;`
 * between settings (a `,` separates overrides in the environment), `partitions` and
 * `replication-factor` by name, any other name a topic config (Kafka's names all hold a `.`).
 * Throws an Error saying what is wrong (the caller names the option).
 */
export function parseTopicOverride(text: string): Partial<TopicSettings> {
  const out: Partial<TopicSettings> = {};
  for (const item of text.split(';')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    const name = item.slice(0, eq).trim();
    const value = item.slice(eq + 1).trim();
    if (eq <= 0 || value === '')
      throw new Error(`${JSON.stringify(item)} is not NAME=VALUE (e.g. partitions=12;retention.ms=86400000)`);
    if (name === 'partitions' || name === 'replication-factor') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1 || n > 32767)
        throw new Error(`${name}=${value}: must be a whole number from 1 to 32767`);
      if (name === 'partitions') out.partitions = n;
      else out.replicationFactor = n;
    } else if (/^[a-z][a-z0-9]*(\.[a-z0-9]+)+$/.test(name)) out.config = { ...out.config, [name]: value };
    else
      throw new Error(
        `${JSON.stringify(name)} is neither partitions, replication-factor nor a topic config (e.g. retention.ms)`,
      );
  }
  return out;
}

/** The settings of the topics `aggregateType` routes to: the defaults, then its override. */
export function topicSettingsFor(aggregateType: string, c: TopicSettingsConfig): TopicSettings {
  const base: TopicSettings = {
    partitions: c.kafkaTopicPartitions,
    replicationFactor: c.kafkaTopicReplicationFactor,
    config: { ...c.kafkaTopicConfig },
  };
  if (!Object.hasOwn(c.kafkaTopicOverrides, aggregateType)) return base;
  const o = parseTopicOverride(c.kafkaTopicOverrides[aggregateType]!);
  return {
    partitions: o.partitions ?? base.partitions,
    replicationFactor: o.replicationFactor ?? base.replicationFactor,
    config: { ...base.config, ...o.config },
  };
}

export interface KnownTopic {
  topic: string;
  aggregateType: string;
}

/**
 * The topics known from the configuration alone, with the aggregate type whose settings they
 * get: those of every aggregate type named by --topic-override or --kafka-topic-override
 * (when its template does not name {event_type}, which only an event can fill in). Others are
 * met as events arrive (src/sinks/kafka/kafka-topics.ts provisions them then, with --kafka-topics create).
 */
export function knownTopics(route: RouteConfig, c: TopicSettingsConfig): KnownTopic[] {
  const types = new Set([...Object.keys(route.topicOverrides), ...Object.keys(c.kafkaTopicOverrides)]);
  const out = new Map<string, KnownTopic>();
  for (const aggregateType of types) {
    const template = Object.hasOwn(route.topicOverrides, aggregateType)
      ? route.topicOverrides[aggregateType]!
      : route.topicTemplate;
    if (template.includes('{event_type}') || aggregateType === '') continue;
    try {
      const topic = topicFor({ aggregateType, eventType: '' }, route);
      if (!out.has(topic)) out.set(topic, { topic, aggregateType });
    } catch {
      // Not a legal topic: the router fails those events with its own message.
    }
  }
  return [...out.values()];
}
