import { describe, expect, it } from 'vitest';
import { liveness, ProgressWatch, readiness, readSample, type Sample, stuckAfterFor } from './health.ts';
import { RelayMetrics } from './metrics.ts';

const STUCK = 60_000;

function sample(over: Partial<Sample> = {}): Sample {
  return {
    at: 1_000_000,
    state: 'streaming',
    waitingReason: null,
    confirmedLsn: '0/1000',
    lastProgressAt: 900_000,
    inflightEvents: 0,
    brokerOutage: false,
    poisonPosition: false,
    transientErrors: 0,
    ...over,
  };
}

describe('readiness', () => {
  it('is ready only while streaming', () => {
    expect(readiness(sample())).toEqual({ ok: true });
    expect(readiness(sample({ brokerOutage: true }))).toEqual({ ok: true, reason: 'broker-outage' });
    expect(readiness(sample({ state: 'starting' }))).toEqual({ ok: false, reason: 'starting' });
    expect(readiness(sample({ state: 'stopping' }))).toEqual({ ok: false, reason: 'stopping' });
    expect(readiness(sample({ state: 'stopped' }))).toEqual({ ok: false, reason: 'stopped' });
    const standby = 'slot s is active in another process (pid 7)';
    expect(readiness(sample({ state: 'standby', waitingReason: standby }))).toEqual({
      ok: false,
      reason: 'standby',
      detail: standby,
    });
    expect(readiness(sample({ state: 'waiting', waitingReason: 'database unavailable: x' })).reason).toBe(
      'outage',
    );
  });

  it('a poison position is not ready, with its own reason; alive (a restart meets the same error)', () => {
    const poison = 'poison position after 0/16B3748: the stream failed 5 times in a row with [22021] …';
    const s = sample({ state: 'waiting', waitingReason: poison, poisonPosition: true });
    expect(readiness(s)).toEqual({ ok: false, reason: 'poison-position', detail: poison });
    expect(liveness(s, 0, STUCK)).toEqual({ ok: true, reason: 'poison-position', detail: poison });
  });
});

describe('liveness', () => {
  const at = 1_000_000;

  it('fails a streaming relay with events in flight and nothing moving for longer than the limit', () => {
    const v = liveness(sample({ inflightEvents: 5 }), at - STUCK - 1, STUCK);
    expect(v.ok).toBe(false);
    expect(v.reason).toBe('stuck');
    expect(v.detail).toMatch(/5 events in flight .* for 60 s/);
  });

  it('passes when something moved within the limit', () => {
    expect(liveness(sample({ inflightEvents: 5 }), at - STUCK, STUCK).ok).toBe(true);
  });

  it('passes an idle relay (nothing in flight) however long nothing moved', () => {
    expect(liveness(sample({ inflightEvents: 0 }), 0, STUCK)).toEqual({ ok: true });
  });

  it('passes during a broker outage (the loop retries on purpose)', () => {
    expect(liveness(sample({ inflightEvents: 5, brokerOutage: true }), 0, STUCK)).toEqual({
      ok: true,
      reason: 'broker-outage',
    });
  });

  it('passes in standby, while waiting (outage), starting and stopping; fails once stopped', () => {
    const standby = 'slot s is active in another process (pid 7)';
    expect(liveness(sample({ state: 'standby', waitingReason: standby }), 0, STUCK)).toMatchObject({
      ok: true,
      reason: 'standby',
    });
    expect(
      liveness(sample({ state: 'waiting', waitingReason: 'database unavailable' }), 0, STUCK),
    ).toMatchObject({ ok: true, reason: 'outage' });
    expect(liveness(sample({ state: 'starting' }), 0, STUCK).ok).toBe(true);
    expect(liveness(sample({ state: 'stopping' }), 0, STUCK).ok).toBe(true);
    expect(liveness(sample({ state: 'stopped' }), at, STUCK)).toEqual({ ok: false, reason: 'stopped' });
  });
});

describe('ProgressWatch', () => {
  it.each([
    ['a published batch', { lastProgressAt: 950_000 }],
    ['a confirmed position', { confirmedLsn: '0/2000' }],
    ['a retried failure', { transientErrors: 1 }],
    ['a state change', { state: 'waiting' as const }],
  ])('counts %s as movement', (_, change) => {
    const w = new ProgressWatch(0);
    w.observe(sample({ at: 10 }));
    w.observe(sample({ at: 20 }));
    expect(w.movedAt).toBe(0);
    w.observe(sample({ at: 30, ...change }));
    expect(w.movedAt).toBe(30);
  });

  it('does not count a change of the in-flight count alone (events piling up is not progress)', () => {
    const w = new ProgressWatch(0);
    w.observe(sample({ at: 10, inflightEvents: 1 }));
    w.observe(sample({ at: 20, inflightEvents: 9 }));
    expect(w.movedAt).toBe(0);
  });
});

describe('readSample', () => {
  it('reads in-flight events, broker outage and the total of retried failures from the metrics', async () => {
    const metrics = new RelayMetrics();
    metrics.inflightEvents.set(7);
    metrics.brokerOutage.set(1);
    metrics.poisonPosition.set(1);
    metrics.transientErrors.inc({ dependency: 'broker', reason: 'A' }, 2);
    metrics.transientErrors.inc({ dependency: 'database', reason: 'B' });
    const s = await readSample(
      { state: 'streaming', waitingReason: null, confirmedLsn: '0/10', lastProgressAt: 5, metrics },
      42,
    );
    expect(s).toEqual({
      at: 42,
      state: 'streaming',
      waitingReason: null,
      confirmedLsn: '0/10',
      lastProgressAt: 5,
      inflightEvents: 7,
      brokerOutage: true,
      poisonPosition: true,
      transientErrors: 3,
    });
  });
});

describe('stuckAfterFor', () => {
  it('stays above the longest legitimate publish (4 request timeouts)', () => {
    expect(stuckAfterFor(30_000)).toBe(150_000);
    expect(stuckAfterFor(100)).toBe(120_000);
  });
});
