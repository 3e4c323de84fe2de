import { afterEach, describe, expect, it, vi } from 'vitest';
import { clockStepNote, clockSteps, now } from './clock.ts';

describe('the bench clock', () => {
  afterEach(() => vi.restoreAllMocks());

  it('follows a step of the wall clock, as another process stamping receipts would', () => {
    const t0 = now();
    expect(Math.abs(t0 - Date.now())).toBeLessThanOrEqual(2);
    expect(clockSteps()).toHaveLength(0);
    expect(clockStepNote()).toBe('');
    // The wall clock set 5 s ahead (performance.now() does not move with it).
    const wall = Date.now;
    vi.spyOn(Date, 'now').mockImplementation(() => wall() + 5000);
    const t1 = now();
    expect(Math.abs(t1 - Date.now())).toBeLessThanOrEqual(2);
    expect(clockSteps()).toHaveLength(1);
    expect(clockSteps()[0]!.ms).toBeGreaterThan(4990);
    expect(clockStepNote()).toMatch(/stepped during the run \(\+\d+ ms at /);
    // Once followed, the clock keeps its sub-millisecond steps without re-anchoring.
    const t2 = now();
    expect(t2).toBeGreaterThanOrEqual(t1 - 2);
    expect(clockSteps()).toHaveLength(1);
  });
});
