import { describe, expect, it } from 'vitest';
import { backoffDelay, sleep } from './backoff.ts';

const policy = { initialMs: 100, maxMs: 5000, factor: 2 };

describe('backoff', () => {
  it('grows exponentially up to the cap (full jitter upper bound)', () => {
    const top = (a: number) => backoffDelay(policy, a, () => 0.999999);
    expect(top(1)).toBe(99);
    expect(top(2)).toBe(199);
    expect(top(3)).toBe(399);
    expect(top(10)).toBe(4999);
    expect(top(100)).toBe(4999);
  });

  it('full jitter can be zero', () => {
    expect(backoffDelay(policy, 3, () => 0)).toBe(0);
  });

  it('sleep returns early on abort', async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    const p = sleep(10_000, ac.signal);
    ac.abort();
    await p;
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});
