import { describe, expect, it } from 'vitest';
import { describeInvalidation, invalidationReasonOf } from './slot-invalidation.ts';

describe('invalidationReasonOf', () => {
  it('PostgreSQL 17+: the reason the server names', () => {
    expect(
      invalidationReasonOf({ wal_status: 'lost', invalidation_reason: 'idle_timeout', conflicting: false }),
    ).toBe('idle_timeout');
    expect(
      invalidationReasonOf({ wal_status: 'lost', invalidation_reason: 'rows_removed', conflicting: true }),
    ).toBe('rows_removed');
  });

  it('PostgreSQL 16: conflicting or WAL removal', () => {
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: null, conflicting: true })).toBe(
      'conflict',
    );
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: null, conflicting: false })).toBe(
      'wal_removed',
    );
  });

  it('PostgreSQL 14, 15: a lost slot lost its WAL', () => {
    expect(invalidationReasonOf({ wal_status: 'lost', invalidation_reason: null, conflicting: null })).toBe(
      'wal_removed',
    );
  });

  it('a slot that is not invalidated has no reason', () => {
    for (const wal_status of ['reserved', 'extended', 'unreserved', null])
      expect(invalidationReasonOf({ wal_status, invalidation_reason: null, conflicting: false })).toBeNull();
  });

  it('each reason is described by its cause', () => {
    expect(describeInvalidation('idle_timeout')).toContain('idle_replication_slot_timeout');
    expect(describeInvalidation('wal_removed')).toContain('max_slot_wal_keep_size');
    expect(describeInvalidation('wal_level_insufficient')).toContain('wal_level');
    expect(describeInvalidation('rows_removed')).toContain('hot_standby_feedback');
  });
});
