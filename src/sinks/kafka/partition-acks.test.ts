import type { Kafka, PartitionerArgs, ProducerBatch, ProducerConfig } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../observability/logger.ts';
import type { OutboundMessage, OutboxEvent } from '../../route/event.ts';
import { KafkaSink, type KafkaSinkConfig } from './kafka-sink.ts';
import { acknowledges, PartitionLedger, UnacknowledgedPartitionsError } from './partition-acks.ts';

describe('acknowledges', () => {
  it('only a response with no error and a real base offset', () => {
    expect(acknowledges({ topicName: 't', partition: 0, errorCode: 0, baseOffset: '42' })).toBe(true);
    expect(acknowledges({ topicName: 't', partition: 0, errorCode: 0, baseOffset: '0' })).toBe(true);
    expect(acknowledges({ topicName: 't', partition: 0, errorCode: 0, baseOffset: '-1' })).toBe(false);
    expect(acknowledges({ topicName: 't', partition: 0, errorCode: 0 })).toBe(false);
    expect(acknowledges({ topicName: 't', partition: 0, errorCode: 6, baseOffset: '5' })).toBe(false);
    expect(acknowledges(undefined)).toBe(false);
  });
});

describe('PartitionLedger', () => {
  it('lists every assigned partition that no response acknowledges, per topic', () => {
    const l = new PartitionLedger();
    l.begin();
    for (const [t, p] of [
      ['a', 0],
      ['a', 2],
      ['b', 1],
      ['a', 0],
      ['b', 1],
      ['a', 1],
    ] as const)
      l.record(t, p);
    expect(l.assigned()).toEqual(['a/0', 'a/1', 'a/2', 'b/1']);
    expect(
      l.unacknowledged([
        { topicName: 'a', partition: 0, errorCode: 0, baseOffset: '1' },
        { topicName: 'a', partition: 2, errorCode: 0, baseOffset: '9' },
        { topicName: 'b', partition: 1, errorCode: 0, baseOffset: '-1' },
        { topicName: 'c', partition: 1, errorCode: 0, baseOffset: '3' },
      ]),
    ).toEqual(['a/1', 'b/1']);
    expect(l.unacknowledged(undefined)).toEqual(['a/0', 'a/1', 'a/2', 'b/1']);
    l.begin();
    expect(l.unacknowledged([])).toEqual([]);
  });

  it('agrees with the plain rule for random assignments and responses, few or many', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const l = new PartitionLedger();
    for (let round = 0; round < 500; round++) {
      l.begin();
      for (let i = rand(6); i >= 0; i--) l.record(`t${rand(3)}`, rand(20));
      const responses = Array.from({ length: rand(30) }, () => ({
        topicName: `t${rand(3)}`,
        partition: rand(20),
        errorCode: rand(8) === 0 ? 6 : 0,
        baseOffset: rand(8) === 0 ? '-1' : String(rand(1000)),
      }));
      const acked = new Set(
        responses.filter((r) => acknowledges(r)).map((r) => `${r.topicName}/${r.partition}`),
      );
      expect(l.unacknowledged(responses)).toEqual(l.assigned().filter((tp) => !acked.has(tp)));
    }
  });
});

/**
 * A Kafka client whose sendBatch partitions the messages with the producer's own partitioner and
 * resolves with a response for every partition but `drop` — a client that silently loses one.
 */
function clientDropping(drop: number | null): typeof Kafka {
  return class {
    producer(config: ProducerConfig) {
      const partitioner = config.createPartitioner!();
      return {
        async connect() {},
        async disconnect() {},
        async sendBatch({ topicMessages }: ProducerBatch) {
          const out: { topicName: string; partition: number; errorCode: number; baseOffset: string }[] = [];
          for (const { topic, messages } of topicMessages ?? []) {
            const partitionMetadata = [0, 1, 2].map((partitionId) => ({
              partitionId,
              leader: 1,
              partitionErrorCode: 0,
              replicas: [1],
              isr: [1],
            })) as PartitionerArgs['partitionMetadata'];
            const parts = new Set(
              messages.map((message) => partitioner({ topic, partitionMetadata, message })),
            );
            for (const partition of parts)
              if (partition !== drop)
                out.push({ topicName: topic, partition, errorCode: 0, baseOffset: '0' });
          }
          return out;
        },
      };
    }
  } as unknown as typeof Kafka;
}

const config = {
  kafkaBrokers: ['127.0.0.1:1'],
  kafkaClientId: 'ack-test',
  kafkaSsl: false,
  kafkaSaslMechanism: 'none',
  kafkaCompression: 'none',
  kafkaAutoCreateTopics: false,
  kafkaRequestTimeoutMs: 1000,
} as KafkaSinkConfig;

const batch: OutboundMessage[] = Array.from({ length: 40 }, (_, i) => ({
  topic: 'outbox.event.T',
  key: `key-${i}`,
  value: Buffer.from(String(i)),
  headers: {},
  timestamp: 0,
  event: {} as OutboxEvent,
  bytes: 10,
}));

describe('KafkaSink: the acknowledgement is the relay’s, not the client’s', () => {
  it('a send the client resolved without a response for one partition is a transient failure naming it', async () => {
    const sink = new KafkaSink(config, silentLogger(), clientDropping(1));
    await sink.start();
    const e = await sink.publish(batch).then(
      () => null,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(UnacknowledgedPartitionsError);
    expect((e as UnacknowledgedPartitionsError).partitions).toEqual(['outbox.event.T/1']);
    expect(sink.classify(e).class).toBe('transient');
    expect(sink.unacknowledgedSends).toBe(1);
  });

  it('a send with every partition acknowledged resolves', async () => {
    const sink = new KafkaSink(config, silentLogger(), clientDropping(null));
    await sink.start();
    await expect(sink.publish(batch)).resolves.toBeUndefined();
    // The next publish starts a fresh ledger: a smaller batch is checked against its own partitions.
    await expect(sink.publish(batch.slice(0, 1))).resolves.toBeUndefined();
    expect(sink.unacknowledgedSends).toBe(0);
  });
});
