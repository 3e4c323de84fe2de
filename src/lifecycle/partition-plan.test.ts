import { describe, expect, it } from 'vitest';
import {
  agedPartitions,
  coveredUntil,
  inferInterval,
  intervalStart,
  missingPartitions,
  nextStart,
  type PartitionInfo,
  partitionName,
} from './partition-plan.ts';

const d = (s: string) => new Date(s);
const part = (from: string | null, to: string | null, name = `p_${from}`): PartitionInfo => ({
  name,
  qualified: `"public"."${name}"`,
  isDefault: false,
  from: from ? d(from) : null,
  to: to ? d(to) : null,
});

describe('partition intervals (UTC)', () => {
  it('starts and next starts', () => {
    const t = d('2026-11-28T18:53:12.345Z'); // a Saturday
    expect(intervalStart(t, 'hour').toISOString()).toBe('2026-11-28T18:00:00.000Z');
    expect(intervalStart(t, 'day').toISOString()).toBe('2026-11-28T00:00:00.000Z');
    expect(intervalStart(t, 'week').toISOString()).toBe('2026-11-23T00:00:00.000Z'); // Monday
    expect(intervalStart(t, 'month').toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(nextStart(d('2026-12-01T00:00:00Z'), 'month').toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(nextStart(d('2026-11-23T00:00:00Z'), 'week').toISOString()).toBe('2026-11-30T00:00:00.000Z');
  });

  it('names partitions by their start; refuses a name PostgreSQL would truncate', () => {
    expect(partitionName('outbox', d('2026-11-28T00:00:00Z'), 'day')).toBe('outbox_p20261128');
    expect(partitionName('outbox', d('2026-11-28T07:00:00Z'), 'hour')).toBe('outbox_p2026112807');
    expect(partitionName('outbox', d('2026-11-01T00:00:00Z'), 'month')).toBe('outbox_p202611');
    expect(() => partitionName('x'.repeat(60), d('2026-11-28T00:00:00Z'), 'day')).toThrow(/63 bytes/);
  });

  it('infers the width from the newest bounded partition', () => {
    expect(inferInterval([])).toBeNull();
    expect(inferInterval([part('2026-11-28T00:00:00Z', '2026-11-29T00:00:00Z')])).toBe('day');
    expect(inferInterval([part('2026-11-28T05:00:00Z', '2026-11-28T06:00:00Z')])).toBe('hour');
    expect(inferInterval([part('2026-02-01T00:00:00Z', '2026-03-01T00:00:00Z')])).toBe('month');
    expect(
      inferInterval([
        part('2026-11-01T00:00:00Z', '2026-11-28T00:00:00Z'),
        part('2026-11-28T00:00:00Z', '2026-12-05T00:00:00Z'),
      ]),
    ).toBe('week');
    expect(inferInterval([part('2026-11-28T00:00:00Z', '2026-11-30T00:00:00Z')])).toBeNull();
  });
});

describe('which partitions', () => {
  const now = d('2026-11-28T18:00:00Z');
  it('to create: now and `ahead` after it, skipping ranges an existing partition overlaps', () => {
    const existing = [
      part('2026-11-28T00:00:00Z', '2026-11-29T00:00:00Z'),
      part('2026-11-30T12:00:00Z', null),
    ];
    expect(missingPartitions(existing, now, 'day', 3).map((r) => r.from.toISOString())).toEqual([
      '2026-11-29T00:00:00.000Z',
    ]);
    const withDefault = [{ ...part(null, null, 'outbox_default'), isDefault: true }];
    expect(missingPartitions(withDefault, now, 'day', 1)).toHaveLength(2);
  });

  it('aged: upper bound at or before the cutoff, oldest first; never the default one', () => {
    const ps = [
      part('2026-11-20T00:00:00Z', '2026-11-21T00:00:00Z'),
      part('2026-11-19T00:00:00Z', '2026-11-20T00:00:00Z'),
      part('2026-11-21T00:00:00Z', '2026-11-22T00:00:00Z'),
      { ...part(null, null, 'outbox_default'), isDefault: true },
    ];
    expect(agedPartitions(ps, d('2026-11-21T00:00:00Z')).map((p) => p.from!.toISOString())).toEqual([
      '2026-11-19T00:00:00.000Z',
      '2026-11-20T00:00:00.000Z',
    ]);
  });

  it('covered until: the end of the gapless run of partitions from now; null when now has none', () => {
    const ps = [
      part('2026-11-28T00:00:00Z', '2026-11-29T00:00:00Z'),
      part('2026-11-29T00:00:00Z', '2026-11-30T00:00:00Z'),
      part('2026-12-01T00:00:00Z', '2026-12-02T00:00:00Z'),
    ];
    expect(coveredUntil(ps, now)?.toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(coveredUntil(ps, d('2026-11-30T01:00:00Z'))).toBeNull();
  });
});
