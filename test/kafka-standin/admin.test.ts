import type { Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaStandIn } from './index.ts';
import { client, errorTypes, rejection } from './test-helpers.ts';

let broker: KafkaStandIn;
let admin: Admin;

beforeAll(async () => {
  broker = await KafkaStandIn.start({ defaultPartitions: 2 });
  admin = client(broker).admin();
  await admin.connect();
});

afterAll(async () => {
  await admin.disconnect();
  await broker.stop();
});

describe('admin API against the stand-in', () => {
  it('creates topics and describes them in metadata', async () => {
    expect(
      await admin.createTopics({
        topics: [
          { topic: 'adm.four', numPartitions: 4 },
          { topic: 'adm.default' },
          {
            topic: 'adm.small',
            numPartitions: 1,
            configEntries: [{ name: 'max.message.bytes', value: '2048' }],
          },
        ],
      }),
    ).toBe(true);
    // kafkajs reports an existing topic as "nothing created", not as an error.
    expect(await admin.createTopics({ topics: [{ topic: 'adm.four', numPartitions: 4 }] })).toBe(false);
    expect(broker.topics()).toEqual(['adm.default', 'adm.four', 'adm.small']);

    const meta = await admin.fetchTopicMetadata({ topics: ['adm.four', 'adm.default'] });
    // kafkajs shuffles the topics of a metadata request; the answer follows the request.
    const described = meta.topics.map((t) => [t.name, t.partitions.map((p) => p.partitionId)]);
    expect(described.sort()).toEqual([
      ['adm.default', [0, 1]],
      ['adm.four', [0, 1, 2, 3]],
    ]);
    expect(meta.topics.find((t) => t.name === 'adm.four')!.partitions[0]).toEqual({
      partitionErrorCode: 0,
      partitionId: 0,
      leader: 0,
      replicas: [0],
      isr: [0],
      offlineReplicas: [],
    });
    expect((await admin.listTopics()).sort()).toEqual(['adm.default', 'adm.four', 'adm.small']);
    const cluster = await admin.describeCluster();
    expect(cluster.controller).toBe(0);
    expect(cluster.brokers).toEqual([{ nodeId: 0, host: '127.0.0.1', port: broker.port }]);
  });

  it('refuses what a single broker refuses', async () => {
    const rf = await rejection(admin.createTopics({ topics: [{ topic: 'adm.rf3', replicationFactor: 3 }] }));
    expect(errorTypes(rf)).toContain('INVALID_REPLICATION_FACTOR');
    const bad = await rejection(admin.createTopics({ topics: [{ topic: 'bad name!' }] }));
    expect(errorTypes(bad)).toContain('INVALID_TOPIC_EXCEPTION');
    const zero = await rejection(admin.createTopics({ topics: [{ topic: 'adm.zero', numPartitions: 0 }] }));
    expect(errorTypes(zero)).toContain('INVALID_PARTITIONS');
    const missing = await rejection(admin.fetchTopicMetadata({ topics: ['adm.missing'] }));
    expect(errorTypes(missing)).toContain('UNKNOWN_TOPIC_OR_PARTITION');
    expect(broker.topics()).not.toContain('adm.rf3');
  });

  it('reports offsets, finds offsets by timestamp and deletes topics', async () => {
    const producer = client(broker).producer();
    await producer.connect();
    const t0 = 1_700_000_000_000;
    await producer.send({
      topic: 'adm.four',
      messages: [0, 1, 2, 3, 4].map((i) => ({
        partition: 1,
        value: `v${i}`,
        timestamp: String(t0 + i * 1000),
      })),
    });
    await producer.send({ topic: 'adm.four', messages: [{ partition: 3, value: 'x' }] });
    await producer.disconnect();

    expect(await admin.fetchTopicOffsets('adm.four')).toEqual([
      { partition: 0, offset: '0', high: '0', low: '0' },
      { partition: 1, offset: '5', high: '5', low: '0' },
      { partition: 2, offset: '0', high: '0', low: '0' },
      { partition: 3, offset: '1', high: '1', low: '0' },
    ]);
    const byTime = await admin.fetchTopicOffsetsByTimestamp('adm.four', t0 + 2500);
    expect(byTime.find((o) => o.partition === 1)).toEqual({ partition: 1, offset: '3' });
    expect(
      broker
        .records('adm.four')
        .filter((r) => r.partition === 1)
        .map((r) => r.timestamp),
    ).toEqual([0, 1, 2, 3, 4].map((i) => t0 + i * 1000));

    await admin.deleteTopics({ topics: ['adm.default'] });
    expect(broker.topics()).toEqual(['adm.four', 'adm.small']);
  });
});
