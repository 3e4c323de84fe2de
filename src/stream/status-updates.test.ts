import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AckTracker } from '../replication/ack-tracker.ts';
import type { Lsn } from '../replication/lsn.ts';
import { CONFIRM_INTERVAL_MS, StatusUpdates } from './status-updates.ts';

function updates() {
  const tracker = { confirmable: 0x100n as Lsn };
  const sent: Lsn[] = [];
  const s = new StatusUpdates(tracker as AckTracker, { confirmedLsn: { set() {} } } as never, 0x100n);
  s.attach({ sendStatus: (_received: Lsn, flushed: Lsn) => void sent.push(flushed) });
  return { tracker, sent, s };
}

describe('StatusUpdates: a moved confirmed position goes out at most every 50 ms', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends the first move at once, holds the next ones back for the interval, then sends the latest', async () => {
    expect(CONFIRM_INTERVAL_MS).toBe(50);
    const { tracker, sent, s } = updates();
    tracker.confirmable = 0x200n;
    s.maybeConfirm();
    expect(sent).toEqual([0x200n]);
    await vi.advanceTimersByTimeAsync(20);
    tracker.confirmable = 0x300n;
    s.maybeConfirm();
    await vi.advanceTimersByTimeAsync(20);
    tracker.confirmable = 0x400n;
    s.maybeConfirm();
    expect(sent).toEqual([0x200n]);
    await vi.advanceTimersByTimeAsync(15);
    expect(sent).toEqual([0x200n, 0x400n]);
    s.stop();
  });

  it('an explicit update (a keepalive asking for a reply, a stop) is not held back', () => {
    const { tracker, sent, s } = updates();
    tracker.confirmable = 0x200n;
    s.maybeConfirm();
    tracker.confirmable = 0x300n;
    s.send(false);
    expect(sent).toEqual([0x200n, 0x300n]);
    s.stop();
  });
});
