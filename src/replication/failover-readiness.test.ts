import { describe, expect, it } from 'vitest';
import {
  judgeFailover,
  type PrimaryFailoverReading,
  parseSlotList,
  type StandbyFailoverReading,
} from './failover-readiness.ts';

const primary = (over: Partial<PrimaryFailoverReading> = {}): PrimaryFailoverReading => ({
  version: 170_010,
  slotFailover: true,
  synchronizedStandbySlots: ['standby_slot'],
  standbySlots: [{ name: 'standby_slot', exists: true, active: true, lost: false }],
  physicalStandbys: 1,
  walsenderWaitEvent: 'WalSenderWaitForWal',
  ...over,
});

const copy = (over: Partial<NonNullable<StandbyFailoverReading['slot']>> = {}): StandbyFailoverReading => ({
  error: null,
  inRecovery: true,
  syncReplicationSlots: true,
  slot: {
    synced: true,
    temporary: false,
    failover: true,
    invalidationReason: null,
    confirmedFlushLsn: '0/1',
    ...over,
  },
});

const ids = (r: ReturnType<typeof judgeFailover>) => r.findings.map((f) => f.id);

describe('judgeFailover', () => {
  it('before PostgreSQL 17: unsupported; with a physical standby, phantom_risk (nothing can hold decoding back)', () => {
    expect(judgeFailover('s', primary({ version: 160_014, physicalStandbys: 0 }), null)).toEqual({
      state: 'unsupported',
      ready: null,
      stalled: false,
      findings: [],
    });
    const r = judgeFailover('s', primary({ version: 140_019, physicalStandbys: 1 }), null);
    expect(r).toMatchObject({ state: 'unsupported', ready: null, stalled: false });
    expect(ids(r)).toEqual(['phantom_risk']);
    expect(r.findings[0]!.text).toMatch(
      /PostgreSQL 14 cannot hold logical decoding back.*synchronous replication does not/,
    );
    expect(r.findings[0]!.fix).toMatch(/upgrade to PostgreSQL 17\+/);
  });

  it('ready only when the standby copy is synced and not temporary (trap 1)', () => {
    expect(judgeFailover('s', primary(), copy())).toMatchObject({
      state: 'ready',
      ready: true,
      findings: [],
    });
    const temporary = judgeFailover('s', primary(), copy({ temporary: true }));
    expect(temporary).toMatchObject({ state: 'not-ready', ready: false });
    expect(temporary.findings[0]!.text).toMatch(/still temporary: a promotion now drops it/);
    expect(judgeFailover('s', primary(), copy({ invalidationReason: 'wal_removed' })).state).toBe(
      'not-ready',
    );
    expect(judgeFailover('s', primary(), copy({ synced: false })).state).toBe('not-ready');
  });

  it('a standby without a copy says how to set up slot sync', () => {
    const r = judgeFailover('s', primary(), { ...copy(), slot: null, syncReplicationSlots: false });
    expect(r.state).toBe('not-ready');
    expect(r.findings[0]!.fix).toMatch(/sync_replication_slots = on, hot_standby_feedback = on/);
    const unreachable = judgeFailover('s', primary(), { ...copy(), error: 'connect ECONNREFUSED' });
    expect(unreachable.findings[0]!.text).toMatch(/cannot read the standby/);
  });

  it('a named standby slot inactive holds a failover slot (trap 2), with the fix that leaves it out', () => {
    const r = judgeFailover(
      's',
      primary({
        synchronizedStandbySlots: ['a', 'b'],
        standbySlots: [
          { name: 'a', exists: true, active: false, lost: false },
          { name: 'b', exists: true, active: true, lost: false },
        ],
        walsenderWaitEvent: 'WaitForStandbyConfirmation',
      }),
      null,
    );
    expect(r.stalled).toBe(true);
    expect(r.ready).toBe(false);
    const stall = r.findings.find((f) => f.id === 'failover_stalled')!;
    expect(stall.severity).toBe('unhealthy');
    expect(stall.text).toMatch(/names a \(inactive\).*WaitForStandbyConfirmation/);
    expect(stall.fix).toMatch(/synchronized_standby_slots = 'b'/);
  });

  it('a plain slot is never held (only failover slots wait), but is not ready', () => {
    const r = judgeFailover(
      's',
      primary({
        slotFailover: false,
        standbySlots: [{ name: 'standby_slot', exists: true, active: false, lost: false }],
      }),
      null,
    );
    expect(r.stalled).toBe(false);
    expect(r.state).toBe('off');
    expect(ids(r)).toEqual(['phantom_risk', 'failover_not_ready']);
  });

  it('the wait event alone is a stall only when it persists', () => {
    const p = primary({ walsenderWaitEvent: 'WaitForStandbyConfirmation' });
    expect(judgeFailover('s', p, null).stalled).toBe(false);
    expect(judgeFailover('s', p, null, { waitingPersisted: true }).stalled).toBe(true);
  });

  it('phantom risk when synchronized_standby_slots is not set and a standby exists; none without a standby', () => {
    const unset = judgeFailover('s', primary({ synchronizedStandbySlots: [], standbySlots: [] }), null);
    expect(ids(unset)).toEqual(['phantom_risk']);
    expect(unset.findings[0]!.text).toMatch(/phantom risk: synchronized_standby_slots is not set/);
    // From the primary alone, without synchronized_standby_slots: which standby is unknown.
    expect(unset).toMatchObject({ state: 'unverified', ready: null });
    const alone = judgeFailover(
      's',
      primary({ synchronizedStandbySlots: [], standbySlots: [], physicalStandbys: 0 }),
      null,
    );
    expect(alone).toEqual({ state: 'no-standby', ready: null, stalled: false, findings: [] });
  });

  it('from the primary alone: ready when a failover slot waits for active standby slots', () => {
    expect(judgeFailover('s', primary(), null)).toMatchObject({
      state: 'unverified',
      ready: true,
      findings: [],
    });
  });
});

describe('parseSlotList', () => {
  it('reads the setting as PostgreSQL lists it', () => {
    expect(parseSlotList('')).toEqual([]);
    expect(parseSlotList(null)).toEqual([]);
    expect(parseSlotList('a, "B c",d')).toEqual(['a', 'B c', 'd']);
  });
});
