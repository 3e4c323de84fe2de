import { describe, expect, it } from 'vitest';
import { describeInvalidation, invalidationReasonOf } from './slot-invalidation.ts';

describe('invalidationReasonOf', () => {
  it('PostgreSQL 17+: the reason the server names', () => {
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: 'idle_timeout' })).toBe(
      'idle_timeout',
    );
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: 'rows_removed' })).toBe(
      'rows_removed',
    );
  });

  it('PostgreSQL 14 – 16 (no column names it): a lost slot lost its WAL', () => {
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: null })).toBe('wal_removed');
  });

  it('a slot that is not invalidated has no reason', () => {
    for (const wal_status of ['reserved', 'extended', 'unreserved', null])
      expect(invalidationReasonOf({ wal_status, invalidation_reason: null })).toBeNull();
  });

  it('each reason is described by its cause', () => {
    expect(describeInvalidation('idle_timeout')).toContain('idle_replication_slot_timeout');
    expect(describeInvalidation('wal_removed')).toContain('max_slot_wal_keep_size');
    expect(describeInvalidation('wal_level_insufficient')).toContain('wal_level');
    expect(describeInvalidation('rows_removed')).toContain('hot_standby_feedback');
  });
});
