import { describe, expect, it } from 'vitest';
import { infoField, preflightWarnings } from './preflight.ts';

const info = (o: Record<string, string>) =>
  `# Server\r\nredis_version:7.0.15\r\n# Persistence\r\n${Object.entries(o)
    .map(([k, v]) => `${k}:${v}\r\n`)
    .join('')}`;

describe('Redis preflight warnings', () => {
  it('none for AOF on, noeviction, enough replicas', () => {
    expect(
      preflightWarnings(info({ aof_enabled: '1', maxmemory: '0', maxmemory_policy: 'noeviction' }), 0),
    ).toEqual([]);
    expect(infoField(info({ aof_enabled: '1' }), 'redis_version')).toBe('7.0.15');
  });

  it('AOF off', () => {
    expect(preflightWarnings(info({ aof_enabled: '0' }), 0)).toEqual([
      expect.stringMatching(/appendonly no.*CONFIG SET appendonly yes/),
    ]);
  });

  it('an eviction policy with maxmemory set; none without maxmemory', () => {
    const w = preflightWarnings(
      info({ aof_enabled: '1', maxmemory: '1000000', maxmemory_policy: 'volatile-lru' }),
      0,
    );
    expect(w).toEqual([expect.stringMatching(/volatile-lru.*dedup keys.*stored twice.*noeviction/)]);
    expect(
      preflightWarnings(info({ aof_enabled: '1', maxmemory: '0', maxmemory_policy: 'allkeys-lru' }), 0),
    ).toEqual([]);
  });

  it('fewer replicas than --redis-wait-replicas', () => {
    const w = preflightWarnings(info({ aof_enabled: '1', connected_slaves: '1' }), 2);
    expect(w).toEqual([expect.stringMatching(/--redis-wait-replicas 2 but Redis has 1 replica/)]);
  });
});
