import { describe, expect, it } from 'vitest';
import { evaluate, formatStatus, type RelayStatus, type StatusSnapshot } from './status-report.ts';

const activeRelay: RelayStatus = {
  error: null,
  recorded: true,
  state: 'active',
  detail: null,
  holder: '4242@relay-0',
  sinceSeconds: 3600,
  heartbeatAgeSeconds: 2,
  stale: false,
  lastProgressAgeSeconds: 1,
  confirmedLsn: '0/16B3748',
  lastError: null,
  lastErrorAgeSeconds: null,
  poisonLsn: null,
};

function snapshot(
  over: Partial<StatusSnapshot> = {},
  slot: Partial<StatusSnapshot['slot']> = {},
  relay: Partial<RelayStatus> = {},
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
      error: null,
      ...slot,
    },
    publication: { name: 'outbox_pub', ok: true, error: null },
    relay: { ...activeRelay, ...relay },
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
    expect(formatStatus(r)).toMatch(/relay\s+active for 1h0m \(4242@relay-0, heartbeat 2s ago\)/);
    expect(formatStatus(r)).toMatch(/last progress\s+1s ago/);
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
    [
      'a slot of that name on another database',
      snapshot(
        {},
        { exists: false, error: '[SLOT_OTHER_DATABASE] slot s belongs to database app, not to app2' },
      ),
      /SLOT_OTHER_DATABASE.*app, not to app2/,
    ],
    [
      'a stale relay heartbeat',
      snapshot({}, {}, { stale: true, heartbeatAgeSeconds: 95 }),
      /no relay is running for slot outbox_relay: its heartbeat is 1m35s old \(last recorded state: active\)/,
    ],
    [
      'a poison position',
      snapshot({}, {}, { state: 'poison-position', detail: 'poison position after 0/1', poisonLsn: '0/2' }),
      /the relay is stuck: poison position after 0\/1 — see docs\/operations.md#poison-position/,
    ],
    [
      'a broker outage',
      snapshot({}, {}, { state: 'broker-outage', sinceSeconds: 30, lastError: 'broker: [X] down' }),
      /broker outage for 30s; last error: broker: \[X\] down/,
    ],
    ['a stopped relay', snapshot({}, {}, { state: 'stopped' }), /the relay is stopped/],
    ['no recorded relay', snapshot({}, {}, { recorded: false, state: null }), /no relay has recorded/],
    [
      'an unreadable relay state',
      snapshot({}, {}, { error: 'relation does not exist' }),
      /relay state unavailable/,
    ],
  ])('unhealthy with %s', (_what, s, problem) => {
    const r = evaluate(s);
    expect(r.healthy).toBe(false);
    expect(r.problems.join('\n')).toMatch(problem);
    expect(formatStatus(r)).toMatch(/UNHEALTHY\n {2}- /);
  });
});
