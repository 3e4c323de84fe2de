import { randomBytes } from 'node:crypto';
import type { Producer } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KafkaErrorCode, KafkaStandIn } from './index.ts';
import { client, errorChain, errorTypes, rejection } from './test-helpers.ts';

const producers: Producer[] = [];

async function idempotentProducer(broker: KafkaStandIn): Promise<Producer> {
  const p = client(broker).producer({ idempotent: true, maxInFlightRequests: 1 });
  producers.push(p);
  await p.connect();
  return p;
}

afterEach(async () => {
  await Promise.allSettled(producers.splice(0).map((p) => p.disconnect()));
});

const send = (p: Producer, topic: string, ...values: (string | Buffer)[]) =>
  p.send({ topic, acks: -1, messages: values.map((value) => ({ key: 'k', value })) });

const valuesOf = (broker: KafkaStandIn, topic: string) =>
  broker.records(topic).map((r) => r.value!.toString());

describe('fault injection', () => {
  let broker: KafkaStandIn;

  beforeAll(async () => {
    broker = await KafkaStandIn.start();
  });

  afterAll(async () => {
    await broker.stop();
  });

  it('down() fails sends with a retriable connection error; up() on the same port brings them back', async () => {
    broker.createTopic('f.down');
    const p = await idempotentProducer(broker);
    await send(p, 'f.down', 'before');
    const port = broker.port;

    await broker.down();
    expect(broker.isUp).toBe(false);
    const err = await rejection(send(p, 'f.down', 'during'));
    const connectionErrors = errorChain(err).filter((e) =>
      ['KafkaJSConnectionError', 'KafkaJSConnectionClosedError'].includes(String(e.name)),
    );
    expect(connectionErrors.length, `error chain: ${errorTypes(err).join(' <- ')}`).toBeGreaterThan(0);
    expect(connectionErrors.every((e) => e.retriable === true)).toBe(true);

    await broker.up();
    expect(broker.port).toBe(port);
    expect(broker.brokers).toEqual([`127.0.0.1:${port}`]);
    await send(p, 'f.down', 'after');
    expect(valuesOf(broker, 'f.down')).toEqual(['before', 'after']);
  });

  it('setTopicError(t, 29) rejects sends to t with TOPIC_AUTHORIZATION_FAILED and leaves other topics alone', async () => {
    broker.createTopic('f.auth');
    broker.createTopic('f.ok');
    const p = await idempotentProducer(broker);
    await send(p, 'f.auth', 'a1');
    await send(p, 'f.ok', 'o1');

    broker.setTopicError('f.auth', KafkaErrorCode.TOPIC_AUTHORIZATION_FAILED);
    // Known topic: the Produce answer carries the error.
    expect(errorTypes(await rejection(send(p, 'f.auth', 'refused')))).toContain('TOPIC_AUTHORIZATION_FAILED');
    await send(p, 'f.ok', 'o2');
    // Unknown to a fresh client: Metadata already refuses it, as a broker with ACLs would.
    const fresh = await idempotentProducer(broker);
    await send(fresh, 'f.ok', 'o3');
    expect(errorTypes(await rejection(send(fresh, 'f.auth', 'refused')))).toContain(
      'TOPIC_AUTHORIZATION_FAILED',
    );
    await send(fresh, 'f.ok', 'o4');
    expect(broker.stats().rejectedBatches.TOPIC_AUTHORIZATION_FAILED).toBeGreaterThanOrEqual(1);

    broker.setTopicError('f.auth', null);
    await send(p, 'f.auth', 'a2');
    expect(valuesOf(broker, 'f.auth')).toEqual(['a1', 'a2']);
    expect(valuesOf(broker, 'f.ok')).toEqual(['o1', 'o2', 'o3', 'o4']);
  });

  it('answers a topic that does not exist with UNKNOWN_TOPIC_OR_PARTITION when auto-creation is off', async () => {
    const p = await idempotentProducer(broker);
    const err = await rejection(send(p, 'f.missing', 'x'));
    expect(errorTypes(err)).toContain('UNKNOWN_TOPIC_OR_PARTITION');
    expect(broker.topics()).not.toContain('f.missing');
    expect(broker.count()).toBe(broker.records().length);
  });

  it('delays every response by the configured latency', async () => {
    broker.createTopic('f.latency');
    const p = await idempotentProducer(broker);
    await send(p, 'f.latency', 'warm-up');
    broker.setLatency(300);
    let t = performance.now();
    await send(p, 'f.latency', 'slow');
    const slow = performance.now() - t;
    broker.setLatency(0);
    t = performance.now();
    await send(p, 'f.latency', 'fast');
    const fast = performance.now() - t;
    expect(slow).toBeGreaterThanOrEqual(300);
    expect(fast).toBeLessThan(300);
    expect(valuesOf(broker, 'f.latency')).toEqual(['warm-up', 'slow', 'fast']);
  });

  it('accepts acks=0 without answering', async () => {
    broker.createTopic('f.acks0');
    const p = client(broker).producer();
    producers.push(p);
    await p.connect();
    await p.send({ topic: 'f.acks0', acks: 0, messages: [{ value: 'fire' }, { value: 'forget' }] });
    await broker.waitForCount(2, { topic: 'f.acks0', timeoutMs: 2000 });
    expect(valuesOf(broker, 'f.acks0')).toEqual(['fire', 'forget']);
  });

  it('waitForCount rejects with a clear message on timeout', async () => {
    broker.createTopic('f.wait');
    await expect(broker.waitForCount(1, { topic: 'f.wait', timeoutMs: 50 })).rejects.toThrow(
      'KafkaStandIn.waitForCount: timed out after 50 ms waiting for 1 records in topic "f.wait"; 0 stored',
    );
  });
});

describe('message size limits', () => {
  let broker: KafkaStandIn;

  beforeAll(async () => {
    broker = await KafkaStandIn.start({ maxMessageBytes: 10_000 });
    broker.createTopic('size.broker');
    broker.createTopic('size.topic', { maxMessageBytes: 2_000 });
  });

  afterAll(async () => {
    await broker.stop();
  });

  it('rejects a batch larger than maxMessageBytes with MESSAGE_TOO_LARGE and stores nothing of it', async () => {
    const p = await idempotentProducer(broker);
    const err = await rejection(send(p, 'size.broker', randomBytes(20_000)));
    expect(errorTypes(err)).toContain('MESSAGE_TOO_LARGE');
    expect(errorChain(err).find((e) => e.type === 'MESSAGE_TOO_LARGE')?.retriable).toBe(false);
    expect(broker.count('size.broker')).toBe(0);
    const small = randomBytes(5_000);
    await send(p, 'size.broker', small);
    expect(broker.records('size.broker').map((r) => r.value)).toEqual([small]);
  });

  it('honours a topic-level max.message.bytes', async () => {
    const p = await idempotentProducer(broker);
    expect(errorTypes(await rejection(send(p, 'size.topic', randomBytes(3_000))))).toContain(
      'MESSAGE_TOO_LARGE',
    );
    await send(p, 'size.topic', 'fits');
    expect(valuesOf(broker, 'size.topic')).toEqual(['fits']);
    expect(broker.stats().rejectedBatches.MESSAGE_TOO_LARGE).toBe(2);
  });
});

describe('auto-created topics', () => {
  it('creates an unknown topic with the default partition count when auto-creation is on', async () => {
    const broker = await KafkaStandIn.start({ autoCreateTopics: true, defaultPartitions: 3 });
    try {
      const p = await idempotentProducer(broker);
      await send(p, 'auto.topic', 'x');
      const admin = client(broker).admin();
      await admin.connect();
      const meta = await admin.fetchTopicMetadata({ topics: ['auto.topic'] });
      await admin.disconnect();
      expect(meta.topics[0]!.partitions).toHaveLength(3);
      expect(valuesOf(broker, 'auto.topic')).toEqual(['x']);
    } finally {
      await Promise.allSettled(producers.splice(0).map((p) => p.disconnect()));
      await broker.stop();
    }
  });
});
