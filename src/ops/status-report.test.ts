import { describe, expect, it } from 'vitest';
import { evaluate, formatStatus, type StatusSnapshot } from './status-report.ts';

function snapshot(
  over: Partial<StatusSnapshot> = {},
  slot: Partial<StatusSnapshot['slot']> = {},
): StatusSnapshot {
  return {
    slot: {
      name: 'outbox_relay',
      exists: true,
      active: true,
      activePid: 4242,
      walStatus: 'reserved',
      retainedWalBytes: 2048,
      lagBytes: 0,
      confirmedFlushLsn: '0/16B3748',
      ...slot,
    },
    publication: { name: 'outbox_pub', ok: true, error: null },
    counts: { published: 10, failed: 1, parked: 2 },
    oldestPendingAgeSeconds: null,
    oldestFailedAgeSeconds: 120,
    dead: 0,
    parkedAggregates: 1,
    ...over,
  };
}

describe('evaluate', () => {
  it('healthy: active slot, publication ok, nothing dead (failed and parked alone are not unhealthy)', () => {
    const r = evaluate(snapshot());
    expect(r.healthy).toBe(true);
    expect(r.problems).toEqual([]);
    expect(formatStatus(r)).toMatch(/slot\s+outbox_relay: active \(pid 4242\), wal_status reserved/);
    expect(formatStatus(r)).toMatch(/retained WAL\s+2\.0 KiB/);
    expect(formatStatus(r)).toMatch(
      /events\s+pending 0, published 10, failed 1, dead 0, parked 2, discarded 0/,
    );
    expect(formatStatus(r)).toMatch(/oldest failed\s+2m0s/);
    expect(formatStatus(r)).toMatch(/\n\nhealthy$/);
  });

  it.each([
    ['a missing slot', snapshot({}, { exists: false, active: null }), /slot outbox_relay does not exist/],
    ['an inactive slot', snapshot({}, { active: false }), /is not active/],
    ['a lost slot', snapshot({}, { walStatus: 'lost' }), /invalidated \(wal_status = lost\)/],
    [
      'a failed publication check',
      snapshot({
        publication: { name: 'p', ok: false, error: '[PUBLICATION_MISSING] publication p does not exist' },
      }),
      /publication check failed: \[PUBLICATION_MISSING\]/,
    ],
    ['dead events', snapshot({ dead: 3 }), /3 dead event\(s\)/],
  ])('unhealthy with %s', (_what, s, problem) => {
    const r = evaluate(s);
    expect(r.healthy).toBe(false);
    expect(r.problems.join('\n')).toMatch(problem);
    expect(formatStatus(r)).toMatch(/UNHEALTHY\n {2}- /);
  });
});
