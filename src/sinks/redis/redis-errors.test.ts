import { describe, expect, it } from 'vitest';
import { classifyRedisError, RedisSinkError, replyCode } from './redis-errors.ts';

/** A Redis error reply as ioredis raises it (redis-errors' ReplyError). */
function reply(message: string): Error {
  const e = new Error(message);
  e.name = 'ReplyError';
  return e;
}

describe('classifyRedisError', () => {
  it('WRONGTYPE is permanent and the stream’s as a whole', () => {
    const c = classifyRedisError(reply('WRONGTYPE Operation against a key holding the wrong kind of value'));
    expect(c).toMatchObject({ class: 'permanent', reason: 'WRONGTYPE', destinationWide: true });
    expect(c.message).toMatch(/not a stream.*--redis-stream-template/);
  });

  it('finds the code inside a Redis 6 script error', () => {
    const m =
      'ERR Error running script (call to f_abc): @user_script:14: WRONGTYPE Operation against a key holding the wrong kind of value';
    expect(replyCode(m)).toBe('WRONGTYPE');
    expect(classifyRedisError(reply(m)).class).toBe('permanent');
    expect(replyCode('ERR syntax error')).toBe('ERR');
  });

  it.each([
    ["OOM command not allowed when used memory > 'maxmemory'.", 'OOM'],
    ['LOADING Redis is loading the dataset in memory', 'LOADING'],
    ['BUSY Redis is busy running a script.', 'BUSY'],
    ['TRYAGAIN Multiple keys request during rehashing of slot', 'TRYAGAIN'],
    ['CLUSTERDOWN The cluster is down', 'CLUSTERDOWN'],
    ['NOSCRIPT No matching script. Please use EVAL.', 'NOSCRIPT'],
    ["READONLY You can't write against a read only replica.", 'READONLY'],
    ['MOVED 3999 127.0.0.1:6381', 'MOVED'],
    ['ERR unknown command', 'ERR'],
  ])('%s is transient (%s)', (message, reason) => {
    expect(classifyRedisError(reply(message))).toMatchObject({ class: 'transient', reason });
  });

  it('connection loss and timeouts are transient', () => {
    expect(classifyRedisError(new Error('Connection is closed.'))).toMatchObject({
      class: 'transient',
      reason: 'CONNECTION_CLOSED',
    });
    expect(classifyRedisError(new Error('Command timed out'))).toMatchObject({ reason: 'TIMEOUT' });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    expect(classifyRedisError(refused)).toMatchObject({ class: 'transient', reason: 'ECONNREFUSED' });
    expect(classifyRedisError('something odd')).toMatchObject({ class: 'transient', reason: 'UNKNOWN' });
  });

  it('the sink’s own codes: too large permanent, too few replicas transient', () => {
    expect(classifyRedisError(new RedisSinkError('VALUE_TOO_LARGE', 'x'))).toMatchObject({
      class: 'permanent',
      reason: 'VALUE_TOO_LARGE',
    });
    expect(classifyRedisError(new RedisSinkError('NOT_ENOUGH_REPLICAS', 'x')).class).toBe('transient');
    expect(
      classifyRedisError(new Error('wrapped', { cause: new RedisSinkError('INVALID_STREAM', 'x') })),
    ).toMatchObject({
      class: 'permanent',
      destinationWide: true,
    });
  });
});
