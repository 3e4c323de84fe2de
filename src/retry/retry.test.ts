import { describe, expect, it } from 'vitest';
import { Again, outagePolicy, retryUntilAborted } from './retry.ts';

const fast = { initialMs: 1, maxMs: 2, factor: 2 };

describe('retryUntilAborted', () => {
  it('returns the first value, after errors and Again, numbering the attempts', async () => {
    const seen: number[] = [];
    const errors: number[] = [];
    const r = await retryUntilAborted(
      async (n) => {
        seen.push(n);
        if (n === 1) throw new Error('down');
        if (n === 2) return new Again({ initialMs: 1, maxMs: 1, factor: 1 });
        return 'done';
      },
      { signal: new AbortController().signal, policy: fast, onError: (_, n) => errors.push(n) },
    );
    expect(r).toBe('done');
    expect(seen).toEqual([1, 2, 3]);
    expect(errors).toEqual([1]);
  });

  it("an Again with a delay (a receiver's Retry-After) waits exactly that, not by the policy", async () => {
    const t0 = performance.now();
    let n = 0;
    const r = await retryUntilAborted(async () => (++n < 3 ? new Again(undefined, 40) : n), {
      signal: new AbortController().signal,
      policy: { initialMs: 600_000, maxMs: 600_000, factor: 1 },
    });
    expect(r).toBe(3);
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(75);
    expect(took).toBeLessThan(10_000);
  });

  it('returns null once aborted, during a wait or before the first attempt', async () => {
    const ac = new AbortController();
    let calls = 0;
    const r = retryUntilAborted(
      async () => {
        calls++;
        throw new Error('down');
      },
      { signal: ac.signal, policy: { initialMs: 60_000, maxMs: 60_000, factor: 1 } },
    );
    await new Promise((res) => setTimeout(res, 10));
    ac.abort();
    expect(await r).toBeNull();
    expect(calls).toBe(1);
    expect(await retryUntilAborted(async () => 1, { signal: ac.signal, policy: fast })).toBeNull();
  });

  it('ends with the error onError throws', async () => {
    const r = retryUntilAborted(
      async () => {
        throw new Error('fatal');
      },
      {
        signal: new AbortController().signal,
        policy: fast,
        onError: (e) => {
          throw e;
        },
      },
    );
    await expect(r).rejects.toThrow('fatal');
  });

  it('outagePolicy: the configured bounds, doubling', () => {
    expect(outagePolicy({ retryInitialMs: 100, retryMaxMs: 30_000 })).toEqual({
      initialMs: 100,
      maxMs: 30_000,
      factor: 2,
    });
  });
});
