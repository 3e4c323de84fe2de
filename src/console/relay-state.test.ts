import { describe, expect, it } from 'vitest';
import type { Sample } from '../observability/health.ts';
import { describeState } from './relay-state.ts';

const s = (o: Partial<Sample>): Sample =>
  ({
    at: 0,
    state: 'streaming',
    waitingReason: null,
    confirmedLsn: null,
    lastProgressAt: null,
    inflightEvents: 0,
    brokerOutage: false,
    poisonPosition: false,
    transientErrors: 0,
    ...o,
  }) as Sample;

describe('relay state in an operator’s words', () => {
  it.each([
    [{}, 'active', 'ok'],
    [{ brokerOutage: true }, 'broker outage', 'bad'],
    [{ state: 'standby' as const, waitingReason: 'slot led by another relay' }, 'standby', 'warn'],
    [
      { state: 'waiting' as const, waitingReason: 'cannot connect to the kafka sink: x' },
      'broker outage',
      'bad',
    ],
    [
      { state: 'waiting' as const, waitingReason: 'database unavailable: ECONNREFUSED' },
      'database outage',
      'bad',
    ],
    [{ state: 'waiting' as const, waitingReason: 'x', poisonPosition: true }, 'poison position', 'bad'],
    [
      { state: 'waiting' as const, waitingReason: 'poison position at 0/1: invalid byte' },
      'poison position',
      'bad',
    ],
    [{ state: 'starting' as const }, 'starting', 'warn'],
    [{ state: 'stopping' as const }, 'stopping', 'warn'],
    [{ state: 'stopped' as const }, 'stopped', 'bad'],
  ])('%o → %s', (o, state, tone) => {
    const v = describeState(s(o));
    expect(v.state).toBe(state);
    expect(v.tone).toBe(tone);
    expect(v.explanation.length).toBeGreaterThan(10);
  });
});
