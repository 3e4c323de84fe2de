import { KafkaJSProtocolError, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { transactionalIdOf } from './kafka.ts';
import { isFenced } from './kafka-errors.ts';
import { decodeProgress, encodeProgress } from './kafka-progress.ts';
import { relayLevelOf } from './kafkajs-log.ts';

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
