import { type Kafka, KafkaJSProtocolError, logLevel } from 'kafkajs';
import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../observability/logger.ts';
import { isFenced } from './kafka-errors.ts';
import { decodeProgress, encodeProgress } from './kafka-progress.ts';
import { requestsOf, transactionalIdOf } from './kafka-sink.ts';
import { TransactionalPublisher } from './kafka-transactions.ts';
import { relayLevelOf } from './kafkajs/log.ts';

/** Pure parts of exactly-once delivery (docs/delivery.md); the protocol itself is tested on the real broker (test/integration/exactly-once.test.ts). */

const protocolError = (type: string, code: number, message = `broker says ${type}`) =>
  new KafkaJSProtocolError({ type, code, retriable: false, message } as never);

describe('isFenced', () => {
  it('is true for a stale epoch and PRODUCER_FENCED (code 90, which kafkajs 2.2.4 does not name), also as a cause', () => {
    expect(isFenced(protocolError('INVALID_PRODUCER_EPOCH', 47))).toBe(true);
    expect(isFenced(protocolError('KAFKAJS_UNKNOWN_ERROR_CODE', -99, 'Unknown error code 90'))).toBe(true);
    expect(
      isFenced(
        Object.assign(new Error('retries exhausted'), { cause: protocolError('INVALID_PRODUCER_EPOCH', 47) }),
      ),
    ).toBe(true);
  });
  it('is false for anything else', () => {
    expect(isFenced(protocolError('CONCURRENT_TRANSACTIONS', 51))).toBe(false);
    expect(isFenced(protocolError('KAFKAJS_UNKNOWN_ERROR_CODE', -99, 'Unknown error code 900'))).toBe(false);
    expect(isFenced(new Error('ECONNRESET'))).toBe(false);
  });
});

describe('the progress record', () => {
  it('round-trips, and anything else reads as no record', () => {
    const p = { v: 1 as const, id: 'pg-outbox-relay/app/s', published: '{[1,5),[7,9)}', token: 'ab:3' };
    expect(decodeProgress(Buffer.from(encodeProgress(p)))).toEqual(p);
    expect(decodeProgress(null)).toBeNull();
    expect(decodeProgress(Buffer.from('not json'))).toBeNull();
    expect(decodeProgress(Buffer.from('{"v":2,"published":"{}","token":"x"}'))).toBeNull();
  });
});

describe('transactionalIdOf', () => {
  it('names the database and the slot, not the host (standbys reach the server by other names)', () => {
    expect(transactionalIdOf('postgres://relay@db-1:5432/app', 'orders')).toBe('pg-outbox-relay/app/orders');
    expect(transactionalIdOf('postgresql://relay@10.0.0.7/app', 'orders')).toBe('pg-outbox-relay/app/orders');
    // no database in the URL: PostgreSQL's default, the user name
    expect(transactionalIdOf('postgres://relay@db-1', 's')).toBe('pg-outbox-relay/relay/s');
  });
});

describe('kafkajs lines of a busy transaction coordinator', () => {
  it('are debug: the relay retries them itself', () => {
    const error =
      'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing';
    expect(relayLevelOf(logLevel.ERROR, 'Response AddPartitionsToTxn(key: 24, version: 1)', { error })).toBe(
      'debug',
    );
  });
});

describe('requestsOf (a transaction of several batches: one produce request per batch)', () => {
  const msg = (topic: string, id: number, bytes = 100) =>
    ({
      topic,
      key: `k${id}`,
      value: null,
      headers: {},
      timestamp: 0,
      event: { id: String(id) },
      bytes,
    }) as never;
  const ids = (requests: { topic: string; messages: unknown[] }[][]) =>
    requests.map((r) =>
      r.map((t) => `${t.topic}:${t.messages.map((m) => (m as { key: string }).key).join('')}`),
    );

  it('keeps a batch within the bounds whole (the same grouping, not regrouped)', () => {
    const batch = [msg('a', 1), msg('a', 2)];
    const whole = [{ topic: 'a', messages: batch }];
    const r = requestsOf(batch, whole, { size: 2, bytes: 200 });
    expect(r).toHaveLength(1);
    expect(r[0]).toBe(whole);
  });
  it('cuts by events and by bytes, in stream order, each request grouped by topic', () => {
    const batch = [msg('a', 1), msg('b', 2), msg('a', 3), msg('a', 4), msg('b', 5, 250), msg('a', 6)];
    expect(ids(requestsOf(batch, [], { size: 3, bytes: 10_000 }))).toEqual([
      ['a:k1k3', 'b:k2'],
      ['a:k4k6', 'b:k5'],
    ]);
    expect(ids(requestsOf(batch, [], { size: 100, bytes: 300 }))).toEqual([
      ['a:k1k3', 'b:k2'],
      ['a:k4'],
      ['b:k5'],
      ['a:k6'],
    ]);
  });
  it('sends an event larger than the byte bound alone, and no bounds means one request', () => {
    const batch = [msg('a', 1, 500), msg('a', 2)];
    expect(ids(requestsOf(batch, [], { size: 10, bytes: 300 }))).toEqual([['a:k1'], ['a:k2']]);
    expect(requestsOf(batch, [{ topic: 'a', messages: batch }], { size: 0, bytes: 0 })).toHaveLength(1);
  });
});

describe('TransactionalPublisher.abandonStart (a start past --sink-start-timeout-ms)', () => {
  /**
   * A Kafka whose producers' connects wait until released; records each InitProducerId
   * (transaction()), which `initError` (if given) fails once released.
   */
  function fakeKafka() {
    type FakeProducer = {
      release(): void;
      inits: number;
      disconnected: boolean;
      initError?: { error: Error; release(): void };
    };
    const producers: FakeProducer[] = [];
    const kafka = {
      admin: () => ({
        connect: async () => {},
        listTopics: async () => ['progress'],
        disconnect: async () => {},
      }),
      producer: () => {
        let release = () => {};
        const connected = new Promise<void>((r) => {
          release = r;
        });
        const p: FakeProducer = { release, inits: 0, disconnected: false };
        producers.push(p);
        return {
          connect: () => connected,
          transaction: async () => {
            p.inits++;
            const failed = p.initError;
            if (failed) await new Promise<void>((r) => (failed.release = r));
            if (failed) throw failed.error;
            return { abort: async () => {} };
          },
          disconnect: async () => {
            p.disconnected = true;
          },
        };
      },
    };
    return { kafka: kafka as unknown as Kafka, producers };
  }
  const config = {
    transactionalId: 'pg-outbox-relay/app/s',
    progressTopic: 'progress',
    transactionTimeoutMs: 60000,
  };

  it("a producer connected after its start was abandoned sends no InitProducerId (it would fence the next start's producer) and is dropped", async () => {
    const { kafka, producers } = fakeKafka();
    const t = new TransactionalPublisher(kafka, {}, config, silentLogger());
    const first = t.start();
    await vi.waitFor(() => expect(producers).toHaveLength(1));
    t.abandonStart();
    const second = t.start();
    await vi.waitFor(() => expect(producers).toHaveLength(2));
    producers[1]!.release();
    await second;
    // The broker thawed: the abandoned producer's connect comes through late.
    producers[0]!.release();
    await expect(first).rejects.toThrow(/abandoned/);
    expect(producers.map((p) => p.inits)).toEqual([0, 1]);
    expect(producers.map((p) => p.disconnected)).toEqual([true, false]);
    expect(t.fenced).toBeNull();
  });

  it("an abandoned start's producer fenced late (by the next start's InitProducerId) does not fence the relay", async () => {
    const { kafka, producers } = fakeKafka();
    const t = new TransactionalPublisher(kafka, {}, config, silentLogger());
    const first = t.start();
    await vi.waitFor(() => expect(producers).toHaveLength(1));
    const fenced = protocolError('INVALID_PRODUCER_EPOCH', 47);
    producers[0]!.initError = { error: fenced, release: () => {} };
    producers[0]!.release();
    await vi.waitFor(() => expect(producers[0]!.inits).toBe(1));
    t.abandonStart();
    const second = t.start();
    await vi.waitFor(() => expect(producers).toHaveLength(2));
    producers[1]!.release();
    await second;
    producers[0]!.initError!.release();
    await expect(first).rejects.toBe(fenced);
    expect(t.fenced).toBeNull();
  });
});
