import { ConfigResourceTypes } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { OutboundMessage, OutboxEvent } from '../../src/route/event.ts';
import { KafkaSink, type KafkaSinkConfig } from '../../src/sinks/kafka/kafka-sink.ts';
import { TopicProvisioningError } from '../../src/sinks/kafka/kafka-topics.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, slotOf, spawnCli, spawnRelay } from '../support/relay.ts';

/**
 * Topic provisioning (--kafka-topics) against the real broker: create (at start for the
 * configured aggregate types, on first sight for the others, with their settings; two relays
 * racing for the same new topic), verify (start fails naming the missing and short topics) and
 * `outbox-relay check` (reports them; exit 78 with verify).
 */
let kafka: KafkaHarness;
const db = useTestDatabase();

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
});

afterAll(async () => {
  await kafka?.stop();
});

function sink(over: Partial<KafkaSinkConfig>): KafkaSink {
  return new KafkaSink(
    {
      kafkaBrokers: kafka.brokers,
      kafkaClientId: 'topics-test',
      kafkaSsl: false,
      kafkaSaslMechanism: 'none',
      kafkaCompression: 'none',
      kafkaAutoCreateTopics: false,
      kafkaRequestTimeoutMs: 30_000,
      topicTemplate: `${kafka.ns}outbox.event.{aggregate_type}`,
      topicOverrides: {},
      ...over,
    } as KafkaSinkConfig,
    silentLogger(),
  );
}

function messages(topic: string, aggregateType: string, n: number): OutboundMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    topic,
    key: `k${i % 7}`,
    value: Buffer.from(String(i)),
    headers: {},
    timestamp: Date.now(),
    event: { aggregateType } as OutboxEvent,
    bytes: 10,
  }));
}

async function describeTopic(topic: string) {
  const admin = await kafka.admin();
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  const cfg = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
    includeSynonyms: false,
  });
  const entries = cfg.resources[0]!.configEntries;
  return {
    partitions: md.topics[0]!.partitions.length,
    config: (name: string) => entries.find((e) => e.configName === name)?.configValue,
  };
}

describe('--kafka-topics create', () => {
  it('creates the configured topics at start and a new aggregate type’s topic on first sight, with their settings', async () => {
    const invoices = kafka.topic('invoices');
    const s = sink({
      kafkaTopics: 'create',
      kafkaTopicPartitions: 3,
      kafkaTopicConfig: { 'retention.ms': '3600000' },
      kafkaTopicOverrides: { Invoice: 'partitions=5;cleanup.policy=compact' },
      topicOverrides: { Invoice: invoices },
    });
    await s.start();
    try {
      expect(s.createdTopics).toEqual([invoices]);
      const inv = await describeTopic(invoices);
      expect(inv.partitions).toBe(5);
      expect(inv.config('cleanup.policy')).toBe('compact');
      expect(inv.config('retention.ms')).toBe('3600000');

      // An aggregate type met only now: created before the publish, which then succeeds at once.
      const orders = kafka.topic('outbox.event.Order');
      await s.publish(messages(orders, 'Order', 50));
      expect(s.createdTopics).toEqual([invoices, orders]);
      const ord = await describeTopic(orders);
      expect(ord.partitions).toBe(3);
      expect(ord.config('retention.ms')).toBe('3600000');
      expect(ord.config('cleanup.policy')).toBe('delete');
      expect(await kafka.readAll('outbox.event.Order')).toHaveLength(50);
      await s.publish(messages(invoices, 'Invoice', 20));
      expect(await kafka.readAll('invoices')).toHaveLength(20);
    } finally {
      await s.stop();
    }
  });

  it('two relays racing to create the same topic: one creates it, both publish, no event fails', async () => {
    const topic = kafka.topic('outbox.event.Race');
    const relays = [0, 1, 2].map(() => sink({ kafkaTopics: 'create', kafkaTopicPartitions: 4 }));
    await Promise.all(relays.map((r) => r.start()));
    try {
      await Promise.all(relays.map((r) => r.publish(messages(topic, 'Race', 100))));
      expect(relays.flatMap((r) => r.createdTopics)).toEqual([topic]);
      expect((await describeTopic(topic)).partitions).toBe(4);
      expect(await kafka.readAll('outbox.event.Race')).toHaveLength(300);
    } finally {
      await Promise.all(relays.map((r) => r.stop()));
    }
  });
});

describe('the relay process: --kafka-topics create with --kafka-compression zstd', () => {
  it('creates the topics of new aggregate types as their events arrive; every event arrives (zstd batches, kafkajs reading them)', async () => {
    const relay = spawnRelay(db, kafka, [
      '--kafka-topics',
      'create',
      '--kafka-topic-partitions',
      '3',
      '--kafka-compression',
      'zstd',
    ]);
    try {
      await relay.waitForLog(/streaming from the slot/, 60_000);
      const rows = ['Shipment', 'Refund'].flatMap((aggregateType) =>
        Array.from({ length: 40 }, (_, i) => ({
          aggregateType,
          aggregateId: `${aggregateType}-${i % 5}`,
          eventType: 'Happened',
          payload: JSON.stringify({ i, aggregateType }),
        })),
      );
      await insertEvents(db.pool, rows);
      for (const type of ['Shipment', 'Refund']) {
        await waitFor(async () => (await kafka.readAll(`outbox.event.${type}`)).length === 40, {
          timeoutMs: 60_000,
          message: `40 ${type} events in Kafka`,
        });
        expect((await describeTopic(kafka.topic(`outbox.event.${type}`))).partitions).toBe(3);
      }
      expect(relay.logs()).toMatch(/"msg":"topic created"/);
    } finally {
      relay.kill();
      await relay.exited;
    }
  });
});

describe('--kafka-topics create refused', () => {
  it('a topic the broker will not create (replication factor 3 on one broker): transient, named, no event failed', async () => {
    const topic = kafka.topic('outbox.event.Refused');
    const s = sink({ kafkaTopics: 'create', kafkaTopicReplicationFactor: 3 });
    await s.start();
    try {
      const e = await s.publish(messages(topic, 'Refused', 5)).then(
        () => null,
        (err: unknown) => err,
      );
      expect(e).toBeInstanceOf(TopicProvisioningError);
      expect((e as Error).message).toMatch(
        new RegExp(
          `cannot create topic ${topic.replace(/\./g, '\\.')} \\(partitions broker default, replication factor 3\\): INVALID_REPLICATION_FACTOR`,
        ),
      );
      expect(s.classify(e).class).toBe('transient');
      expect(await kafka.listTopics()).not.toContain('outbox.event.Refused');
    } finally {
      await s.stop();
    }
  });
});

describe('--kafka-topics verify and check', () => {
  const overrides = () => ({
    topicOverrides: { Short: kafka.topic('short'), Fine: kafka.topic('fine'), Gone: kafka.topic('gone') },
  });

  beforeAll(async () => {
    await kafka.createTopic('short', 2);
    await kafka.createTopic('fine', 6);
  });

  it('fails at start naming the missing topic and the one with too few partitions', async () => {
    const s = sink({ kafkaTopics: 'verify', kafkaTopicPartitions: 6, ...overrides() });
    const e = await s.start().then(
      () => null,
      (err: unknown) => err as { code: string; message: string },
    );
    await s.stop().catch(() => {});
    expect(e?.code).toBe('KAFKA_TOPICS_NOT_READY');
    expect(e?.message).toBe(
      `--kafka-topics verify: missing: ${kafka.topic('gone')}; fewer partitions than configured: ${kafka.topic('short')} (2 of 6)`,
    );
    // Nothing was created by verify.
    expect(await kafka.listTopics()).not.toContain('gone');
    // Enough partitions asked for, and the missing one left out: start passes.
    const ok = sink({
      kafkaTopics: 'verify',
      kafkaTopicPartitions: 2,
      topicOverrides: { Short: kafka.topic('short') },
    });
    await ok.start();
    await ok.stop();
  });

  it('`outbox-relay check` reports them; exit 78 with verify, a warning with off', async () => {
    const args = [
      'check',
      '--database-url',
      db.url,
      '--kafka-brokers',
      kafka.brokers.join(','),
      '--topic-override',
      `Short=${kafka.topic('short')}`,
      '--topic-override',
      `Gone=${kafka.topic('gone')}`,
      '--topic-override',
      `Fine=${kafka.topic('fine')}`,
      '--kafka-topic-partitions',
      '6',
    ];
    const verify = spawnCli([...args, '--kafka-topics', 'verify'], { OUTBOX_SLOT: slotOf(db) });
    expect(await verify.exited).toBe(EXIT.CONFIG);
    expect(verify.logs()).toContain(
      `[KAFKA_TOPICS_NOT_READY] --kafka-topics verify: missing: ${kafka.topic('gone')}; fewer partitions than configured: ${kafka.topic('short')} (2 of 6)`,
    );
    const off = spawnCli(args, { OUTBOX_SLOT: slotOf(db) });
    expect(await off.exited).toBe(EXIT.OK);
    expect(off.logs()).toContain(`missing: ${kafka.topic('gone')}`);
    expect(off.logs()).toContain(`fewer partitions than configured: ${kafka.topic('short')} (2 of 6)`);
    expect(off.logs()).toMatch(/preflight passed/);
  });

  it('`outbox-relay run --kafka-topics verify` ends with exit 78 naming the missing topic', async () => {
    const p = spawnCli(
      [
        'run',
        '--database-url',
        db.url,
        '--kafka-brokers',
        kafka.brokers.join(','),
        '--topic-override',
        `Gone=${kafka.topic('gone')}`,
        '--kafka-topics',
        'verify',
      ],
      { OUTBOX_SLOT: slotOf(db) },
    );
    expect(await p.exited).toBe(EXIT.CONFIG);
    expect(p.logs()).toContain(
      `[KAFKA_TOPICS_NOT_READY] --kafka-topics verify: missing: ${kafka.topic('gone')}`,
    );
  });

  it('a bad override names the option: a bad command line from a flag (64), bad configuration from the environment (78)', async () => {
    const args = ['check', '--database-url', db.url, '--kafka-brokers', kafka.brokers.join(',')];
    const flag = spawnCli([...args, '--kafka-topic-override', 'Order=partitions=many'], {
      OUTBOX_SLOT: slotOf(db),
    });
    expect(await flag.exited).toBe(EXIT.USAGE);
    expect(flag.logs()).toMatch(
      /--kafka-topic-override \(flag\): Order=partitions=many: partitions=many: must be a whole number/,
    );
    const env = spawnCli(args, { OUTBOX_SLOT: slotOf(db), KAFKA_TOPIC_OVERRIDES: 'Order=partitions=many' });
    expect(await env.exited).toBe(EXIT.CONFIG);
    expect(env.logs()).toMatch(
      /--kafka-topic-override \/ KAFKA_TOPIC_OVERRIDES: Order=partitions=many: partitions=many: must be a whole number/,
    );
  });
});
