import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../observability/logger.ts';
import type { RecordedState, RelayStateRow } from '../store/relay-state.ts';
import { StateRecorder } from './state-recorder.ts';

type View = Omit<RelayStateRow, 'since' | 'holder'>;

function setup(o: { canWrite?: () => boolean; fail?: () => boolean } = {}) {
  const writes: unknown[][] = [];
  const db = {
    query: async (_sql: string, values: unknown[]) => {
      if (o.fail?.())
        throw Object.assign(new Error('permission denied for table outbox_relay_state'), { code: '42501' });
      writes.push(values);
      return { rowCount: 1 };
    },
  } as unknown as pg.Pool;
  const view: View = {
    state: 'active',
    detail: null,
    lastProgressAt: null,
    confirmedLsn: '0/10',
    lastError: null,
    lastErrorAt: null,
    poisonLsn: null,
  };
  const warn = vi.fn();
  const log = { ...silentLogger(), warn, info: () => {} } as unknown as ReturnType<typeof silentLogger>;
  const rec = new StateRecorder({
    db,
    stateTable: 'public.outbox_relay_state',
    slot: 's',
    log,
    canWrite: o.canWrite ?? (() => true),
    view: () => view,
    heartbeatMs: 5000,
  });
  const states = () => writes.map((w) => w[1] as RecordedState);
  return { rec, view, writes, states, warn };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('StateRecorder', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes at once on a state change, otherwise only when the heartbeat is due', async () => {
    const { rec, view, states } = setup();
    rec.tick();
    await settle();
    expect(states()).toEqual(['active']);
    // Ticks within the heartbeat, with new progress and errors: no write (never per event).
    for (let i = 0; i < 4; i++) {
      vi.advanceTimersByTime(1000);
      view.confirmedLsn = `0/${20 + i}`;
      view.lastError = `broker: [X] attempt ${i}`;
      rec.tick();
      await settle();
    }
    expect(states()).toEqual(['active']);
    view.state = 'broker-outage';
    rec.tick();
    await settle();
    expect(states()).toEqual(['active', 'broker-outage']);
    vi.advanceTimersByTime(5000);
    rec.tick();
    await settle();
    expect(states()).toEqual(['active', 'broker-outage', 'broker-outage']);
  });

  it('keeps since across heartbeats and resets it on a state change', async () => {
    const { rec, view, writes } = setup();
    rec.tick();
    await settle();
    const since = writes[0]![4] as Date;
    vi.advanceTimersByTime(6000);
    rec.tick();
    await settle();
    expect(writes[1]![4]).toBe(since);
    view.state = 'stopping';
    rec.tick();
    await settle();
    expect((writes[2]![4] as Date).getTime()).toBeGreaterThan(since.getTime());
  });

  it('does not write unless it may (a standby never overwrites the active relay)', async () => {
    const { rec, writes } = setup({ canWrite: () => false });
    rec.tick();
    await rec.flush();
    expect(writes).toEqual([]);
  });

  it('a failing write is logged once per streak and retried at the next tick', async () => {
    let failing = true;
    const { rec, states, warn } = setup({ fail: () => failing });
    for (let i = 0; i < 3; i++) {
      rec.tick();
      await settle();
    }
    expect(warn).toHaveBeenCalledTimes(1);
    failing = false;
    rec.tick();
    await settle();
    expect(states()).toEqual(['active']);
  });
});
