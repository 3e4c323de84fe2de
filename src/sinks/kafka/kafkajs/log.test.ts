import { Writable } from 'node:stream';
import { logLevel } from 'kafkajs';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { logCreator, relayLevelOf } from './log.ts';

const { ERROR, WARN } = logLevel;

describe('relayLevelOf: kafkajs lines at the relay’s levels', () => {
  it.each([
    // A permanent refusal the relay records as the event's failure (its own warn line per event).
    [
      ERROR,
      'Response Metadata(key: 3, version: 6)',
      { error: 'This server does not host this topic-partition' },
      'debug',
    ],
    [ERROR, 'Failed to send messages: This server does not host this topic-partition', {}, 'debug'],
    [
      ERROR,
      'Response Produce(key: 0, version: 7)',
      { error: 'Not authorized to access topics: [Topic authorization failed]' },
      'debug',
    ],
    [
      ERROR,
      'Response Produce(key: 0, version: 7)',
      { error: 'The request included a message larger than the max message size the server will accept' },
      'debug',
    ],
    // Transient: kafkajs and then the relay retry; the relay reports the outage.
    [ERROR, 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', {}, 'warn'],
    [ERROR, 'Connection timeout', {}, 'warn'],
    [
      ERROR,
      'Failed to connect to seed broker, trying another broker from the list: Connection error: connect ECONNREFUSED',
      {},
      'warn',
    ],
    [
      ERROR,
      'Response Produce(key: 0, version: 7)',
      { error: 'This server is not the leader for that topic-partition' },
      'warn',
    ],
    [
      ERROR,
      'Failed to send messages: There is no leader for this topic-partition as we are in the middle of a leadership election',
      {},
      'warn',
    ],
    // The relay itself in trouble.
    [
      ERROR,
      'SASL PLAIN authentication failed: Authentication failed during authentication due to invalid credentials',
      {},
      'error',
    ],
    [ERROR, 'SASL SCRAM SHA512 authentication failed: Authentication failed', {}, 'error'],
    [ERROR, 'Failed to execute listener: boom', {}, 'error'],
    // Warnings stay warnings, except the one that does not apply.
    [WARN, 'Response without match', {}, 'warn'],
    [WARN, 'Limiting retries for the idempotent producer may invalidate EoS guarantees', {}, 'debug'],
  ] as const)('%i %s %o → %s', (level, message, extra, expected) => {
    expect(relayLevelOf(level, message, extra)).toBe(expected);
  });
});

describe('logCreator', () => {
  it('logs at the mapped level under component kafkajs, with the namespace, and drops INFO/DEBUG', () => {
    const lines: Record<string, unknown>[] = [];
    const out = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const log = pino({ level: 'debug' }, out).child({ component: 'kafkajs' });
    const entry = logCreator(log)();
    const at = (level: number, message: string, extra: Record<string, unknown> = {}) =>
      entry({
        level,
        namespace: 'Connection',
        log: { message, timestamp: 'x', logger: 'kafkajs', ...extra },
      });
    at(ERROR, 'Response Produce(key: 0, version: 7)', {
      error: 'This server does not host this topic-partition',
      broker: 'b:1',
    });
    at(ERROR, 'Connection error: connect ECONNREFUSED 127.0.0.1:1');
    at(logLevel.INFO, 'Starting');
    at(logLevel.DEBUG, 'Request Produce');
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [20, 'kafkajs: Response Produce(key: 0, version: 7)'],
      [40, 'kafkajs: Connection error: connect ECONNREFUSED 127.0.0.1:1'],
    ]);
    expect(lines[0]).toMatchObject({ component: 'kafkajs', namespace: 'Connection', broker: 'b:1' });
    expect(lines[0]).not.toHaveProperty('timestamp');
  });
});
