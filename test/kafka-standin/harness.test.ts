import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { containerEngineReachable, requireStandIn, startKafka } from '../support/kafka.ts';

describe('test/support/kafka.ts in stand-in mode', () => {
  it('creates topics, reads back what kafkajs produced, and exposes the stand-in', async () => {
    const kafka = await startKafka({ mode: 'standin' });
    try {
      expect(kafka.mode).toBe('standin');
      await kafka.createTopic('h.topic', 2);
      expect(await kafka.readAll('h.topic')).toEqual([]);
      expect(await kafka.readAll('h.missing')).toEqual([]);
      const producer = new Kafka({
        clientId: 'h',
        brokers: kafka.brokers,
        logLevel: logLevel.NOTHING,
      }).producer({
        idempotent: true,
      });
      await producer.connect();
      await producer.send({
        topic: 'h.topic',
        messages: [
          { key: 'a', value: 'v1', headers: { h: 'x' }, timestamp: '1700000000000' },
          { key: 'a', value: 'v2', timestamp: '1700000000001' },
        ],
      });
      await producer.disconnect();
      const got = await kafka.readAll('h.topic');
      expect(got.map((r) => [r.key?.toString(), r.value?.toString(), r.offset, r.timestamp])).toEqual([
        ['a', 'v1', 0, 1_700_000_000_000],
        ['a', 'v2', 1, 1_700_000_000_001],
      ]);
      expect(got[0]!.headers.h?.toString()).toBe('x');
      expect(requireStandIn(kafka, 'fault injection').count('h.topic')).toBe(2);
    } finally {
      await kafka.stop();
    }
  });

  it('requireStandIn names the reason and the mode when there is no stand-in', () => {
    const fake = {
      brokers: [],
      mode: 'container' as const,
      createTopic: async () => {},
      readAll: async () => [],
      stop: async () => {},
    };
    expect(() => requireStandIn(fake, 'broker outage is injected')).toThrow(
      "This test needs the Kafka stand-in (broker outage is injected), but KAFKA_TEST_MODE resolved to 'container'",
    );
  });

  it('auto mode falls back to the stand-in when no container engine answers', async (ctx) => {
    // With an engine, auto mode would (rightly) start a container: not this test's business.
    if (await containerEngineReachable()) ctx.skip();
    const kafka = await startKafka({ mode: 'auto' });
    try {
      expect(kafka.mode).toBe('standin');
    } finally {
      await kafka.stop();
    }
  });
});
