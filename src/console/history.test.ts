import { describe, expect, it } from 'vitest';
import { History, type Reading } from './history.ts';

const r = (at: number, o: Partial<Reading> = {}): Reading => ({
  at,
  retainedBytes: 1000,
  safeWalSizeBytes: null,
  publishedTotal: 0,
  lagSum: 0,
  lagCount: 0,
  ...o,
});

describe('console history', () => {
  it('derives mean lag and publish rate per interval from counter deltas', () => {
    const h = new History(60_000, 10_000);
    h.add(r(0));
    h.add(r(10_000, { publishedTotal: 100, lagSum: 5, lagCount: 100 }));
    h.add(r(20_000, { publishedTotal: 100, lagSum: 5, lagCount: 100 }));
    const [first, second, third] = h.points();
    expect(first).toMatchObject({ lagSeconds: null, publishedPerSecond: null });
    expect(second).toMatchObject({ lagSeconds: 0.05, publishedPerSecond: 10 });
    // Nothing published: no lag point (a gap, not zero), rate 0.
    expect(third).toMatchObject({ lagSeconds: null, publishedPerSecond: 0 });
    expect(h.publishRate()).toBe(5);
  });

  it('keeps only the span (memory bounded) and restarts a series when counters go down', () => {
    const h = new History(30_000, 10_000);
    for (let i = 0; i < 10; i++) h.add(r(i * 10_000, { publishedTotal: i * 10 }));
    expect(h.points().length).toBe(4);
    expect(h.points()[0]!.at).toBe(60_000);
    h.add(r(100_000, { publishedTotal: 0 }));
    expect(h.latest()).toMatchObject({ publishedPerSecond: null });
  });

  it('time to exhaustion from the growth over the window (wal-budget.ts)', () => {
    const h = new History(3600_000, 10_000);
    expect(h.secondsToExhaustion()).toBeNull();
    h.add(r(0, { retainedBytes: 1000, safeWalSizeBytes: 10_000 }));
    h.add(r(10_000, { retainedBytes: null }));
    h.add(r(20_000, { retainedBytes: 3000, safeWalSizeBytes: 8000 }));
    // 2000 bytes in 20 s = 100 B/s; 8000 B left → 80 s.
    expect(h.secondsToExhaustion()).toBe(80);
    h.add(r(30_000, { retainedBytes: 3000, safeWalSizeBytes: null }));
    expect(h.secondsToExhaustion()).toBeNull();
  });
});
