import { createRequire } from 'node:module';
import {
  KafkaJSAggregateError,
  KafkaJSConnectionError,
  KafkaJSError,
  KafkaJSNonRetriableError,
  KafkaJSProtocolError,
  KafkaJSRequestTimeoutError,
  KafkaJSSASLAuthenticationError,
} from 'kafkajs';
import { describe, expect, it } from 'vitest';
import {
  breaksProducer,
  classifyKafkaError,
  HALF_CONNECTED_BROKER,
  PERMANENT_KAFKA_TYPES,
  PRODUCER_STATE_KAFKA_TYPES,
  TOPIC_LEVEL_KAFKA_TYPES,
} from './kafka-errors.ts';

/** A protocol error the way kafkajs builds it from a broker error code. */
function protocolError(type: string, code: number): KafkaJSProtocolError {
  const e = new KafkaJSProtocolError({
    type,
    code,
    retriable: false,
    message: `broker says ${type}`,
  } as never);
  return e;
}

describe('classifyKafkaError', () => {
  const permanent: [string, number][] = [
    ['UNKNOWN_TOPIC_OR_PARTITION', 3],
    ['INVALID_TOPIC_EXCEPTION', 17],
    ['TOPIC_AUTHORIZATION_FAILED', 29],
    ['MESSAGE_TOO_LARGE', 10],
    ['RECORD_LIST_TOO_LARGE', 18],
    ['INVALID_RECORD', 87],
    ['CORRUPT_MESSAGE', 2],
    ['POLICY_VIOLATION', 44],
  ];
  for (const [type, code] of permanent) {
    it(`${type} is permanent, also wrapped in kafkajs' retry and aggregate errors`, () => {
      const base = protocolError(type, code);
      expect(classifyKafkaError(base)).toMatchObject({ class: 'permanent', reason: type });
      // As kafkajs' retrier wraps: new KafkaJSNonRetriableError(e, { cause: e.cause || e }).
      // (kafkajs' typings omit the options argument that its code takes.)
      const NonRetriable = KafkaJSNonRetriableError as unknown as new (
        e: Error,
        o: { cause: Error },
      ) => Error;
      const wrapped = new NonRetriable(new KafkaJSError(base), { cause: base });
      expect(classifyKafkaError(wrapped).class).toBe('permanent');
      const aggregated = new KafkaJSAggregateError('Failed to send', [base]);
      expect(classifyKafkaError(aggregated)).toMatchObject({ class: 'permanent', reason: type });
      // The topic's own refusals are every event's of that topic (src/outcome/decide.ts).
      expect(classifyKafkaError(base).destinationWide).toBe(
        TOPIC_LEVEL_KAFKA_TYPES.has(type) ? true : undefined,
      );
    });
  }

  it('CLUSTER_AUTHORIZATION_FAILED is about the principal, not an event: transient, with the fix', () => {
    const c = classifyKafkaError(protocolError('CLUSTER_AUTHORIZATION_FAILED', 31));
    expect(c).toMatchObject({ class: 'transient', reason: 'CLUSTER_AUTHORIZATION_FAILED' });
    expect(c.message).toMatch(/IdempotentWrite/);
    expect(breaksProducer(protocolError('CLUSTER_AUTHORIZATION_FAILED', 31))).toBe(false);
  });

  it('every permanent type in the table has a test', () => {
    const tested = new Set(permanent.map(([t]) => t));
    for (const t of Object.keys(PERMANENT_KAFKA_TYPES)) {
      if (t === 'INVALID_REQUIRED_ACKS' || t === 'UNSUPPORTED_FOR_MESSAGE_FORMAT') continue;
      expect(tested.has(t), t).toBe(true);
    }
  });

  const transient: [string, unknown][] = [
    [
      'connection refused',
      new KafkaJSConnectionError('Connection error: ECONNREFUSED', { broker: 'k:9092' } as never),
    ],
    [
      'request timeout',
      new KafkaJSRequestTimeoutError('Request Produce(key: 0, version: 7) timed out', {} as never),
    ],
    ['leader moved', protocolError('NOT_LEADER_FOR_PARTITION', 6)],
    ['not enough replicas', protocolError('NOT_ENOUGH_REPLICAS', 19)],
    ['not enough replicas after append', protocolError('NOT_ENOUGH_REPLICAS_AFTER_APPEND', 20)],
    ['leader not available', protocolError('LEADER_NOT_AVAILABLE', 5)],
    ['network exception', protocolError('NETWORK_EXCEPTION', 13)],
    ['a plain Error', new Error('socket hang up')],
    ['a string', 'something odd'],
  ];
  for (const [name, err] of transient) {
    it(`${name} is transient (unknown errors default to transient)`, () => {
      expect(classifyKafkaError(err).class).toBe('transient');
    });
  }

  it('reports the Kafka type as the reason for transient protocol errors', () => {
    const e = protocolError('NOT_ENOUGH_REPLICAS', 19);
    const NonRetriable = KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error;
    expect(classifyKafkaError(new NonRetriable(e, { cause: e })).reason).toBe('NOT_ENOUGH_REPLICAS');
  });
});

describe('breaksProducer: what an error means for the producer that raised it', () => {
  const NonRetriable = KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error;
  const codes: Record<string, number> = {
    OUT_OF_ORDER_SEQUENCE_NUMBER: 45,
    DUPLICATE_SEQUENCE_NUMBER: 46,
    INVALID_PRODUCER_EPOCH: 47,
    INVALID_PRODUCER_ID_MAPPING: 49,
    UNKNOWN_PRODUCER_ID: 59,
  };
  for (const type of Object.keys(PRODUCER_STATE_KAFKA_TYPES)) {
    it(`${type}: transient for the events, but the producer is replaced`, () => {
      const base = protocolError(type, codes[type]!);
      const wrapped = new NonRetriable(new KafkaJSError(base), { cause: base });
      expect(breaksProducer(wrapped)).toBe(true);
      expect(classifyKafkaError(wrapped)).toMatchObject({ class: 'transient', reason: type });
      expect(classifyKafkaError(wrapped).message).toMatch(/new producer/);
    });
  }

  it('a permanent refusal (maybe partial: other partitions of the request stored) replaces the producer', () => {
    const e = protocolError('MESSAGE_TOO_LARGE', 10);
    expect(breaksProducer(new KafkaJSAggregateError('Failed to send', [e]))).toBe(true);
  });

  it("a broker kafkajs holds half-connected replaces the producer (the installed kafkajs' own error)", async () => {
    // kafkajs' Broker before its ApiVersions answer: what every request on it throws when that
    // first request failed on a socket that stayed open (HALF_CONNECTED_BROKER).
    const Broker = createRequire(import.meta.url)('kafkajs/src/broker/index.js') as new (
      o: object,
    ) => {
      metadata(topics: string[]): Promise<unknown>;
    };
    const broker = new Broker({
      connectionPool: { connectionTimeout: 1000, host: 'h', port: 1 },
      logger: { namespace: () => ({}) },
    });
    const e = await broker.metadata(['t']).then(
      () => null,
      (err: unknown) => err,
    );
    expect((e as Error).message).toBe(HALF_CONNECTED_BROKER);
    expect(breaksProducer(e)).toBe(true);
    expect(breaksProducer(new KafkaJSNonRetriableError(e as Error))).toBe(true);
    expect(classifyKafkaError(e).class).toBe('transient');
  });

  it('transient errors keep the producer: its resend of the same batch is deduplicated by sequence', () => {
    expect(breaksProducer(protocolError('NOT_LEADER_FOR_PARTITION', 6))).toBe(false);
    expect(breaksProducer(new KafkaJSConnectionError('Connection error: ECONNREFUSED', {} as never))).toBe(
      false,
    );
    expect(breaksProducer(new Error('socket hang up'))).toBe(false);
  });
});

describe('SASL authentication failures', () => {
  it("the brokers refusing the relay's credentials (e.g. an expired token) is transient and names the fix", () => {
    // kafkajs' typings omit the constructor's message argument.
    const refused = new (KafkaJSSASLAuthenticationError as unknown as new (m: string) => Error)(
      'SASL OAUTHBEARER authentication failed: invalid_token',
    );
    // As kafkajs' retrier wraps it (its typings omit the options argument).
    const wrapped = new (KafkaJSNonRetriableError as unknown as new (e: Error, o: { cause: Error }) => Error)(
      refused,
      { cause: refused },
    );
    for (const e of [refused, wrapped]) {
      const c = classifyKafkaError(e);
      expect(c).toMatchObject({ class: 'transient', reason: 'KafkaJSSASLAuthenticationError' });
      expect(c.message).toMatch(/refused the relay's credentials .* nothing is failed meanwhile/);
      expect(breaksProducer(e)).toBe(false);
    }
  });
});
