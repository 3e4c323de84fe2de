import type { Producer } from 'kafkajs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KafkaErrorCode, KafkaStandIn } from './index.ts';
import { PartitionLog } from './log.ts';
import { lastSequence, ProducerStateTable } from './producer-state.ts';
import { readBatchHeader } from './record-batch.ts';
import { client, encodeBatch, produceBody, rawRequest, readProduceResponse } from './test-helpers.ts';

const INT32_MAX = 2 ** 31 - 1;

async function appendTo(log: PartitionLog, spec: Parameters<typeof encodeBatch>[0]) {
  const bytes = await encodeBatch(spec);
  return log.append(bytes, readBatchHeader(bytes));
}

const msgs = (...values: string[]) => values.map((value) => ({ key: 'k', value }));

describe('partition log sequence handling', () => {
  it('acknowledges a retried batch with its first offset and appends it once', async () => {
    const log = new PartitionLog('t', 0);
    expect(await appendTo(log, { producerId: 7, firstSequence: 0, messages: msgs('a', 'b', 'c') })).toEqual({
      kind: 'appended',
      baseOffset: 0,
    });
    expect(await appendTo(log, { producerId: 7, firstSequence: 3, messages: msgs('d') })).toEqual({
      kind: 'appended',
      baseOffset: 3,
    });
    // Retries of either of the last batches: answered with the original offsets, nothing stored.
    expect(await appendTo(log, { producerId: 7, firstSequence: 0, messages: msgs('a', 'b', 'c') })).toEqual({
      kind: 'duplicate',
      baseOffset: 0,
    });
    expect(await appendTo(log, { producerId: 7, firstSequence: 3, messages: msgs('d') })).toEqual({
      kind: 'duplicate',
      baseOffset: 3,
    });
    expect(log.recordCount).toBe(4);
    expect(log.highWatermark).toBe(4);
    expect(log.batches.map((b) => [b.baseOffset, b.recordCount])).toEqual([
      [0, 3],
      [3, 1],
    ]);
  });

  it('refuses a sequence gap and an older epoch, and restarts sequences on a new epoch', async () => {
    const log = new PartitionLog('t', 0);
    await appendTo(log, { producerId: 9, firstSequence: 0, messages: msgs('a', 'b') });
    expect(await appendTo(log, { producerId: 9, firstSequence: 3, messages: msgs('gap') })).toMatchObject({
      kind: 'error',
      code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    });
    expect(await appendTo(log, { producerId: 9, firstSequence: 1, messages: msgs('overlap') })).toMatchObject(
      {
        kind: 'error',
        code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
      },
    );
    expect(
      await appendTo(log, { producerId: 9, producerEpoch: 1, firstSequence: 5, messages: msgs('x') }),
    ).toMatchObject({
      kind: 'error',
      code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    });
    expect(
      await appendTo(log, { producerId: 9, producerEpoch: 1, firstSequence: 0, messages: msgs('e1') }),
    ).toEqual({
      kind: 'appended',
      baseOffset: 2,
    });
    expect(
      await appendTo(log, { producerId: 9, producerEpoch: 0, firstSequence: 2, messages: msgs('zombie') }),
    ).toMatchObject({
      kind: 'error',
      code: KafkaErrorCode.INVALID_PRODUCER_EPOCH,
    });
    // Other producers have their own sequences; non-idempotent batches are never deduplicated.
    expect(await appendTo(log, { producerId: 10, firstSequence: 0, messages: msgs('p10') })).toMatchObject({
      kind: 'appended',
    });
    await appendTo(log, { producerId: -1, messages: msgs('plain') });
    expect(await appendTo(log, { producerId: -1, messages: msgs('plain') })).toEqual({
      kind: 'appended',
      baseOffset: 5,
    });
    expect(log.recordCount).toBe(6);
  });

  it('wraps sequences at INT32_MAX like Kafka', () => {
    expect(lastSequence(INT32_MAX - 1, 3)).toBe(0);
    const table = new ProducerStateTable();
    table.record(1, 0, INT32_MAX - 1, 2, 0);
    expect(table.check(1, 0, 0, 1)).toEqual({ kind: 'append' });
    expect(table.check(1, 0, INT32_MAX - 1, 2)).toEqual({ kind: 'duplicate', baseOffset: 0 });
    expect(table.check(1, 0, 1, 1)).toMatchObject({
      kind: 'error',
      code: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    });
  });
});

describe('idempotent kafkajs producer against a misbehaving network', () => {
  let broker: KafkaStandIn;
  let producer: Producer | undefined;

  beforeAll(async () => {
    broker = await KafkaStandIn.start();
  });

  afterEach(async () => {
    await producer?.disconnect();
    producer = undefined;
    broker.clearFaults();
  });

  afterAll(async () => {
    await broker.stop();
  });

  async function connectProducer(requestTimeout = 2000): Promise<Producer> {
    const kafka = client(broker, {
      requestTimeout,
      retry: { retries: 3, initialRetryTime: 50, maxRetryTime: 200 },
    });
    producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    return producer;
  }

  const values = (topic: string) => broker.records(topic).map((r) => [r.offset, r.value!.toString()]);

  it('stores a batch once when its response arrives after the request timeout and kafkajs retries it', async () => {
    broker.createTopic('idem.timeout');
    const p = await connectProducer(300);
    const before = broker.stats();
    broker.injectFault('Produce', { type: 'delay', ms: 500 });
    const [ack] = await p.send({ topic: 'idem.timeout', acks: -1, messages: msgs('a', 'b', 'c') });
    const after = broker.stats();
    // Every retry (how many depends on timing) is recognised as the same batch.
    const attempts = after.requests.Produce! - (before.requests.Produce ?? 0);
    expect(attempts).toBeGreaterThanOrEqual(2);
    expect(after.duplicateBatches - before.duplicateBatches).toBe(attempts - 1);
    expect(ack).toMatchObject({ errorCode: 0, baseOffset: '0' });
    // The sequence carries on after the deduplicated retry.
    await p.send({ topic: 'idem.timeout', acks: -1, messages: msgs('d') });
    expect(values('idem.timeout')).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
      [3, 'd'],
    ]);
  });

  it('stores a batch once when the connection drops after the append, before the response', async () => {
    broker.createTopic('idem.drop-after');
    const p = await connectProducer();
    const dupsBefore = broker.stats().duplicateBatches;
    broker.injectFault('Produce', { type: 'disconnect', when: 'after' });
    await p.send({ topic: 'idem.drop-after', acks: -1, messages: msgs('x', 'y') });
    expect(broker.stats().duplicateBatches - dupsBefore).toBe(1);
    expect(values('idem.drop-after')).toEqual([
      [0, 'x'],
      [1, 'y'],
    ]);
  });

  it('stores a batch once when the connection drops before the broker saw it', async () => {
    broker.createTopic('idem.drop-before');
    const p = await connectProducer();
    const dupsBefore = broker.stats().duplicateBatches;
    broker.injectFault('Produce', { type: 'disconnect', when: 'before' });
    await p.send({ topic: 'idem.drop-before', acks: -1, messages: msgs('x') });
    expect(broker.stats().duplicateBatches - dupsBefore).toBe(0);
    expect(values('idem.drop-before')).toEqual([[0, 'x']]);
  });

  it('answers a gap on the wire with OUT_OF_ORDER_SEQUENCE_NUMBER and a retry with the first offset', async () => {
    broker.createTopic('idem.raw', { partitions: 2 });
    const batch = (firstSequence: number, ...v: string[]) =>
      encodeBatch({ producerId: 4242, firstSequence, messages: msgs(...v) });
    const send = async (records: Buffer) =>
      readProduceResponse(await rawRequest(broker, 0, 7, produceBody('idem.raw', 1, records)));
    expect(await send(await batch(0, 'a', 'b'))).toEqual({ errorCode: 0, baseOffset: 0 });
    expect(await send(await batch(2, 'c'))).toEqual({ errorCode: 0, baseOffset: 2 });
    expect(await send(await batch(0, 'a', 'b'))).toEqual({ errorCode: 0, baseOffset: 0 });
    expect(await send(await batch(7, 'z'))).toEqual({
      errorCode: KafkaErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
      baseOffset: -1,
    });
    expect(values('idem.raw')).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
    ]);
    expect(broker.stats().rejectedBatches.OUT_OF_ORDER_SEQUENCE_NUMBER).toBe(1);
  });
});
