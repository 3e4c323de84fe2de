import { describe, expect, it } from 'vitest';
import { waitFor } from './postgres.ts';
import { ProgressDeadline } from './progress.ts';

describe('ProgressDeadline', () => {
  it('expires idleMs after the last change, and at the cap however much still changes', () => {
    let now = 0;
    const d = new ProgressDeadline({ idleMs: 100, capMs: 1000, now: () => now });
    d.note(0);
    now = 99;
    expect(d.expired()).toBe(false);
    d.note(1); // progress at 99: the idle clock restarts
    now = 198;
    expect(d.expired()).toBe(false);
    expect(d.remaining()).toBe(1);
    d.note(1); // the same value is no progress
    now = 199;
    expect(d.expired()).toBe(true);
    expect(d.why()).toMatch(/no progress for 100 ms/);

    const capped = new ProgressDeadline({ idleMs: 100, capMs: 300, now: () => now });
    for (let i = 0; i < 10; i++) {
      now += 50;
      capped.note(i);
    }
    expect(capped.expired()).toBe(true);
    expect(capped.why()).toMatch(/cap of 300 ms/);
  });
});

describe('waitFor with progress', () => {
  it('waits past timeoutMs while the progress value moves, and fails soon after it stops', async () => {
    let n = 0;
    const started = Date.now();
    // Done at n = 12 (about 240 ms), well past the 100 ms timeout: moving progress keeps it alive.
    await waitFor(() => n >= 12, { timeoutMs: 100, intervalMs: 20, progress: () => ++n });
    expect(Date.now() - started).toBeGreaterThan(100);

    const stuck = Date.now();
    await expect(
      waitFor(() => false, { timeoutMs: 100, intervalMs: 10, progress: () => 'same', message: 'never' }),
    ).rejects.toThrow(/no progress for \d+ ms.*never/);
    expect(Date.now() - stuck).toBeLessThan(2000);
  });
});
