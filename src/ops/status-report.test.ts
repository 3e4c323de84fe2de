import { describe, expect, it } from 'vitest';
import { formatStatus } from './status-format.ts';
import { evaluate, type RelayStatus, type StatusSnapshot } from './status-report.ts';

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
      safeWalSizeBytes: null,
      criticalBytes: 10 * 1024 ** 3,
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
    failing: [],
    ...over,
  };
}

describe('evaluate', () => {
  it('healthy: active slot, publication ok, nothing failed or dead', () => {
    const r = evaluate(snapshot({ counts: { published: 10 }, parkedAggregates: 0 }));
    expect(r.verdict).toBe('healthy');
    expect(r.healthy).toBe(true);
    expect(r.findings).toEqual([]);
    expect(formatStatus(r)).toMatch(/\n\nhealthy$/);
  });

  it('degraded (still healthy, exit 0): failed and parked events, with their topic and the fix for their error', () => {
    const r = evaluate(
      snapshot({
        failing: [
          {
            status: 'failed',
            topic: 'outbox.event.Missing',
            aggregateType: 'Missing',
            reason: 'UNKNOWN_TOPIC_OR_PARTITION',
            count: 1,
          },
        ],
      }),
    );
    expect(r.verdict).toBe('degraded');
    expect(r.healthy).toBe(true);
    expect(r.problems).toEqual([]);
    expect(r.findings).toEqual([
      expect.objectContaining({ id: 'failed_events', severity: 'warning', topics: ['outbox.event.Missing'] }),
    ]);
    expect(r.findings[0]!.text).toMatch(
      /^1 failed event\(s\) \(outbox\.event\.Missing: UNKNOWN_TOPIC_OR_PARTITION\)/,
    );
    expect(r.findings[0]!.fix).toMatch(
      /outbox\.event\.Missing: create the topic: kafka-topics\.sh .*--create --topic outbox\.event\.Missing.*then `outbox-relay events resend --filter --status failed --aggregate-type Missing`/,
    );
    expect(formatStatus(r)).toMatch(/\n\nDEGRADED\n {2}- warning: 1 failed event\(s\).*\n {6}fix: /);
    expect(formatStatus(r)).toMatch(/slot\s+outbox_relay: active \(pid 4242\), wal_status reserved/);
    expect(formatStatus(r)).toMatch(/retained WAL\s+2\.0 KiB/);
    expect(formatStatus(r)).toMatch(
      /events\s+pending 0, published 10, failed 1, dead 0, parked 2, discarded 0/,
    );
    expect(formatStatus(r)).toMatch(/oldest failed\s+2m0s/);
    expect(formatStatus(r)).toMatch(/relay\s+active for 1h0m \(4242@relay-0, heartbeat 2s ago\)/);
    expect(formatStatus(r)).toMatch(/last progress\s+1s ago/);
  });

  it.each([
    [
      'lagging events',
      snapshot({ counts: { pending: 5 }, oldestPendingAgeSeconds: 300 }),
      'lag',
      /oldest pending event is 5m0s old/,
    ],
    [
      'a slot over --slot-critical-bytes',
      snapshot({ counts: {} }, { retainedWalBytes: 20 * 1024 ** 3, safeWalSizeBytes: 1024 ** 3 }),
      'slot_at_risk',
      /retains 20\.0 GiB of WAL .*1\.0 GiB more and it is invalidated/,
    ],
  ])('degraded with %s', (_what, s, id, text) => {
    const r = evaluate(s);
    expect(r.verdict).toBe('degraded');
    expect(r.findings.map((f) => f.id)).toEqual([id]);
    expect(r.findings[0]!.text).toMatch(text);
  });

  it('dead events name their topics and reasons, and the fix of each', () => {
    const r = evaluate(
      snapshot({
        dead: 3,
        counts: { dead: 3 },
        failing: [
          { status: 'dead', topic: 'a', aggregateType: 'A', reason: 'UNKNOWN_TOPIC_OR_PARTITION', count: 2 },
          { status: 'dead', topic: 'b', aggregateType: 'B', reason: 'MESSAGE_TOO_LARGE', count: 1 },
        ],
      }),
    );
    expect(r.verdict).toBe('unhealthy');
    expect(r.problems).toEqual([
      '3 dead event(s) (a: UNKNOWN_TOPIC_OR_PARTITION ×2, b: MESSAGE_TOO_LARGE): resend or discard them (outbox-relay events list --status dead)',
    ]);
    expect(r.findings[0]!.topics).toEqual(['a', 'b']);
    expect(r.findings[0]!.fix).toMatch(/a: create the topic.*; b: raise the topic's max\.message\.bytes/);
    expect(r.findings[0]!.fix).toMatch(
      /then `outbox-relay events resend --filter --status dead` \(or discard them\)$/,
    );
  });

  it('with --compat debezium: the dead and failed events of the side table, and commands that reach it', () => {
    const r = evaluate(
      snapshot({
        dead: 1,
        counts: { dead: 1, failed: 2 },
        failing: [
          {
            status: 'dead',
            topic: 'outbox.event.M',
            aggregateType: 'M',
            reason: 'UNKNOWN_TOPIC_OR_PARTITION',
            count: 1,
          },
          {
            status: 'failed',
            topic: 'outbox.event.M',
            aggregateType: 'M',
            reason: 'UNKNOWN_TOPIC_OR_PARTITION',
            count: 2,
          },
        ],
        sideTable: '"public"."outbox_relay_failed"',
      }),
    );
    expect(r.verdict).toBe('unhealthy');
    expect(r.problems).toEqual([
      '1 dead event(s) in the side table "public"."outbox_relay_failed" (outbox.event.M: UNKNOWN_TOPIC_OR_PARTITION): resend or discard them (outbox-relay events list --status dead --compat debezium)',
    ]);
    const [dead, failed] = r.findings;
    expect(dead!.fix).toMatch(
      /then `outbox-relay events resend --filter --status dead --aggregate-type M --compat debezium` \(or discard them\)$/,
    );
    expect(failed!.text).toMatch(
      /^2 failed event\(s\) in the side table .*\(outbox-relay events list --status failed --compat debezium\)$/,
    );
    expect(formatStatus(r)).toMatch(
      /events in "public"\."outbox_relay_failed"\s+published 0, failed 2, dead 1, parked 0, discarded 0\n/,
    );
    expect(formatStatus(r)).not.toMatch(/oldest pending/);
  });

  it.each([
    ['a missing slot', snapshot({}, { exists: false, active: null }), /slot outbox_relay does not exist/],
    ['an inactive slot', snapshot({}, { active: false }), /is not active/],
    [
      'a lost slot (PostgreSQL 14, 15: WAL removal is the only reason)',
      snapshot({}, { walStatus: 'lost' }),
      /invalidated \(wal_status = lost, invalidation_reason = wal_removed\): it fell further behind than max_slot_wal_keep_size/,
    ],
    [
      "a slot lost to PostgreSQL 18's idle_replication_slot_timeout",
      snapshot({}, { walStatus: 'lost', invalidationReason: 'idle_timeout' }),
      /invalidated \(wal_status = lost, invalidation_reason = idle_timeout\): it was inactive for longer than idle_replication_slot_timeout/,
    ],
    ['a slot about to be lost', snapshot({}, { walStatus: 'unreserved' }), /about to be invalidated/],
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
    expect(r.verdict).toBe('unhealthy');
    expect(r.problems.join('\n')).toMatch(problem);
    expect(r.findings.find((f) => f.severity === 'unhealthy')!.fix, 'says what to do').not.toBeNull();
    expect(formatStatus(r)).toMatch(/UNHEALTHY\n {2}- /);
  });
});
