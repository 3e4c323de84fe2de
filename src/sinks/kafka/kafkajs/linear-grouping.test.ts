import { createRequire } from 'node:module';
import { type Message, Partitioners, type PartitionMetadata } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KafkaHarness, startKafka } from '../../../../test/support/kafka.ts';
import { silentLogger } from '../../../observability/logger.ts';
import type { OutboundMessage, OutboxEvent } from '../../../route/event.ts';
import { KafkaSink, type KafkaSinkConfig } from '../kafka-sink.ts';
import * as linear from './linear-grouping.ts';

const require = createRequire(import.meta.url);
const kafkajsGroup =
  require('kafkajs/src/producer/groupMessagesPerPartition.js') as typeof linear.groupMessagesPerPartition;

const meta = (n: number): PartitionMetadata[] =>
  Array.from({ length: n }, (_, i) => ({
    partitionId: i,
    leader: 0,
    partitionErrorCode: 0,
    replicas: [0],
    isr: [0],
  }));

describe('groupMessagesPerPartition (linear)', () => {
  it("groups as kafkajs' own does: same partitions, same messages, batch order kept", () => {
    let seed = 11;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    for (let round = 0; round < 50; round++) {
      const partitionMetadata = meta(1 + rnd(8));
      const messages: Message[] = Array.from({ length: rnd(400) }, (_, i) => ({
        key: rnd(5) ? `k${rnd(50)}` : null,
        value: String(i),
        partition: rnd(10) ? undefined : rnd(partitionMetadata.length),
      }));
      // The keyless round-robin counter starts at random: one partitioner per side, same seed of calls.
      const args = (p: ReturnType<typeof Partitioners.DefaultPartitioner>) => ({
        topic: 't',
        partitionMetadata,
        messages,
        partitioner: p,
      });
      const keyed = messages.map((m) => ({ ...m, key: m.key ?? 'x' }));
      const theirs = kafkajsGroup({ ...args(Partitioners.DefaultPartitioner()), messages: keyed });
      const ours = linear.groupMessagesPerPartition({
        ...args(Partitioners.DefaultPartitioner()),
        messages: keyed,
      });
      expect(ours).toEqual(theirs);
      expect(Object.keys(ours)).toEqual(Object.keys(theirs));
    }
    expect(
      linear.groupMessagesPerPartition({
        topic: 't',
        partitionMetadata: [],
        messages: [{ value: 'v' }],
        partitioner: () => 0,
      }),
    ).toEqual({});
  });
});

describe('KafkaSink on a real broker, through the encoder, the partitioner and the linear grouping', () => {
  let kafka: KafkaHarness;
  beforeAll(async () => {
    kafka = await startKafka();
    await kafka.createTopic('outbox.event.Grouping', 3);
  });
  afterAll(async () => {
    await kafka?.stop();
  });

  it("stores every message on kafkajs' partition for its key, in order per key, once", async () => {
    const config: KafkaSinkConfig = {
      kafkaBrokers: kafka.brokers,
      kafkaClientId: 'grouping-test',
      kafkaSsl: false,
      kafkaSaslMechanism: 'none',
      kafkaCompression: 'none',
      kafkaAutoCreateTopics: false,
      kafkaRequestTimeoutMs: 30_000,
    } as KafkaSinkConfig;
    const sink = new KafkaSink(config, silentLogger());
    await sink.start();
    const topic = kafka.topic('outbox.event.Grouping');
    const before = linear.groupedBatches;
    try {
      const batch: OutboundMessage[] = Array.from({ length: 600 }, (_, i) => ({
        topic,
        key: `order-${i % 23}`,
        value: Buffer.from(`{"seq":${i}}`),
        headers: { id: `e${i}`, event_type: 'E', 'content-type': 'application/json' },
        timestamp: 1_763_000_000_000 + i,
        event: {} as OutboxEvent,
        bytes: 100,
      }));
      await sink.publish(batch.slice(0, 300));
      await sink.publish(batch.slice(300));
      expect(linear.groupedBatches).toBeGreaterThanOrEqual(before + 2);
      const records = await kafka.readAll('outbox.event.Grouping');
      expect(records).toHaveLength(600);
      const partitioner = Partitioners.DefaultPartitioner();
      const seqByKey = new Map<string, number[]>();
      for (const r of [...records].sort((a, b) => a.partition - b.partition || a.offset - b.offset)) {
        const key = r.key!.toString();
        expect(r.partition).toBe(
          partitioner({ topic, partitionMetadata: meta(3), message: { key, value: null } }),
        );
        const seq = JSON.parse(r.value!.toString()).seq as number;
        expect(r.headers.id?.toString()).toBe(`e${seq}`);
        expect(r.timestamp).toBe(1_763_000_000_000 + seq);
        seqByKey.set(key, [...(seqByKey.get(key) ?? []), seq]);
      }
      for (const [key, seqs] of seqByKey) {
        const n = Number(key.slice(6));
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, j) => n + 23 * j));
      }
    } finally {
      await sink.stop();
    }
  });
});
