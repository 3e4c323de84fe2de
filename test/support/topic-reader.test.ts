import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KafkaHarness, startKafka } from './kafka.ts';
import { TopicReader, tp } from './topic-reader.ts';

let kafka: KafkaHarness;
let client: Kafka;

beforeAll(async () => {
  kafka = await startKafka();
  client = new Kafka({ clientId: 'topic-reader-test', brokers: kafka.brokers, logLevel: logLevel.NOTHING });
});

afterAll(async () => {
  await kafka?.stop();
});

async function produce(topic: string, values: [partition: number, value: string][]): Promise<void> {
  const producer = client.producer();
  await producer.connect();
  try {
    await producer.send({
      topic,
      acks: -1,
      messages: values.map(([partition, value]) => ({ partition, value })),
    });
  } finally {
    await producer.disconnect();
  }
}

describe('TopicReader', () => {
  it('reads every record below the high watermarks, in (partition, offset) order', async () => {
    await kafka.createTopic('reader.ok', 2);
    const topic = kafka.topic('reader.ok');
    await produce(topic, [
      [1, 'b0'],
      [0, 'a0'],
      [1, 'b1'],
      [0, 'a1'],
      [0, 'a2'],
    ]);
    const reader = new TopicReader(client, [topic]);
    try {
      const got = await reader.readUpTo(
        new Map([
          [tp(topic, 0), 2],
          [tp(topic, 1), 2],
        ]),
      );
      // a2 lies above partition 0's given watermark: not part of the answer.
      expect(got.map((r) => `${r.partition}:${r.message.value}`)).toEqual(['0:a0', '0:a1', '1:b0', '1:b1']);
    } finally {
      await reader.stop();
    }
  });

  it('replaces a consumer that makes no progress, and gives up once nothing moves for idleMs', async () => {
    await kafka.createTopic('reader.stuck', 1);
    const topic = kafka.topic('reader.stuck');
    await produce(topic, [[0, 'only']]);
    const reader = new TopicReader(client, [topic]);
    try {
      expect(await reader.readUpTo(new Map([[tp(topic, 0), 1]]))).toHaveLength(1);
      // Offset 1 never comes: the joined consumer stalls after the one record.
      const started = Date.now();
      const failure = reader.readUpTo(new Map([[tp(topic, 0), 2]]), { stallMs: 300, idleMs: 5000 });
      await expect(failure).rejects.toThrow(/no progress for \d+ ms .*at 1 of 2; consumers replaced: [1-9]/);
      expect(Date.now() - started, 'bounded by idleMs, not by a long wall-clock timeout').toBeLessThan(
        30_000,
      );
    } finally {
      await reader.stop();
    }
  });
});
