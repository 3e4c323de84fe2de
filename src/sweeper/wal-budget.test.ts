import { describe, expect, it } from 'vitest';
import { crossing, levelOf, walBudget } from './wal-budget.ts';

const T = { warnBytes: 1000, criticalBytes: 5000 };

describe('levelOf', () => {
  it('rises at each threshold', () => {
    expect(levelOf(0, T)).toBe('ok');
    expect(levelOf(999, T)).toBe('ok');
    expect(levelOf(1000, T)).toBe('warn');
    expect(levelOf(4999, T)).toBe('warn');
    expect(levelOf(5000, T)).toBe('critical');
    expect(levelOf(5000, T, 'ok')).toBe('critical');
  });

  it('falls only below 90% of the threshold (a value hovering at it logs once)', () => {
    expect(levelOf(950, T, 'warn')).toBe('warn');
    expect(levelOf(899, T, 'warn')).toBe('ok');
    expect(levelOf(4600, T, 'critical')).toBe('critical');
    expect(levelOf(4400, T, 'critical')).toBe('warn');
    expect(levelOf(100, T, 'critical')).toBe('ok');
    // From ok, 950 is below the warn threshold.
    expect(levelOf(950, T, 'ok')).toBe('ok');
  });

  it('0 disables a threshold', () => {
    expect(levelOf(10 ** 12, { warnBytes: 0, criticalBytes: 0 })).toBe('ok');
    expect(levelOf(10 ** 12, { warnBytes: 0, criticalBytes: 5000 })).toBe('critical');
    expect(levelOf(2000, { warnBytes: 1000, criticalBytes: 0 })).toBe('warn');
  });
});

describe('crossing', () => {
  it('reports each change once, in its direction', () => {
    expect(crossing('ok', 'ok')).toBeNull();
    expect(crossing('ok', 'warn')).toBe('raised');
    expect(crossing('warn', 'critical')).toBe('raised');
    expect(crossing('ok', 'critical')).toBe('raised');
    expect(crossing('critical', 'warn')).toBe('cleared');
    expect(crossing('warn', 'ok')).toBe('cleared');
    expect(crossing('critical', 'critical')).toBeNull();
  });
});

describe('walBudget', () => {
  it('has no rate from one sample', () => {
    expect(walBudget(null, { atMs: 0, retainedBytes: 100, safeWalSizeBytes: 1000 })).toEqual({
      growthBytesPerSecond: null,
      secondsToExhaustion: null,
    });
  });

  it('divides what is left by the growth rate', () => {
    const b = walBudget(
      { atMs: 0, retainedBytes: 1_000, safeWalSizeBytes: 10_000 },
      { atMs: 2_000, retainedBytes: 3_000, safeWalSizeBytes: 8_000 },
    );
    expect(b.growthBytesPerSecond).toBe(1_000);
    expect(b.secondsToExhaustion).toBe(8);
  });

  it('is unbounded while the slot keeps up or catches up, or when there is no limit', () => {
    const catching = walBudget(
      { atMs: 0, retainedBytes: 3_000, safeWalSizeBytes: 8_000 },
      { atMs: 1_000, retainedBytes: 1_000, safeWalSizeBytes: 10_000 },
    );
    expect(catching.growthBytesPerSecond).toBe(-2_000);
    expect(catching.secondsToExhaustion).toBeNull();
    const flat = walBudget(
      { atMs: 0, retainedBytes: 1_000, safeWalSizeBytes: 8_000 },
      { atMs: 1_000, retainedBytes: 1_000, safeWalSizeBytes: 8_000 },
    );
    expect(flat.secondsToExhaustion).toBeNull();
    const unlimited = walBudget(
      { atMs: 0, retainedBytes: 0, safeWalSizeBytes: null },
      { atMs: 1_000, retainedBytes: 10 ** 9, safeWalSizeBytes: null },
    );
    expect(unlimited.growthBytesPerSecond).toBe(10 ** 9);
    expect(unlimited.secondsToExhaustion).toBeNull();
  });

  it('is exhausted when nothing is left (safe_wal_size can go negative)', () => {
    expect(walBudget(null, { atMs: 0, retainedBytes: 5, safeWalSizeBytes: -10 }).secondsToExhaustion).toBe(0);
    expect(walBudget(null, { atMs: 0, retainedBytes: 5, safeWalSizeBytes: 0 }).secondsToExhaustion).toBe(0);
  });

  it('ignores samples taken at the same instant', () => {
    const s = { atMs: 5, retainedBytes: 5, safeWalSizeBytes: 100 };
    expect(walBudget(s, { ...s, retainedBytes: 50 }).growthBytesPerSecond).toBeNull();
  });
});
