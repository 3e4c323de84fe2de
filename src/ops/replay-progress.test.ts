import { describe, expect, it } from 'vitest';
import { formatProgress, rateAndEta } from './replay-progress.ts';

describe('replay progress', () => {
  it('shows done of total, the rate and the time left', () => {
    expect(formatProgress('copied', { done: 1500, total: 5001, elapsedMs: 625 })).toBe(
      'copied 1,500/5,001 (29%)  2,400/s  ETA 1s',
    );
    expect(formatProgress('published', { done: 10, total: 7210, elapsedMs: 1000 })).toBe(
      'published 10/7,210 (0%)  10/s  ETA 12m00s',
    );
    expect(formatProgress('published', { done: 1, total: 100_000, elapsedMs: 10_000 })).toBe(
      'published 1/100,000 (0%)  0/s  ETA 277h46m',
    );
  });

  it('has no ETA before anything is done, and none left once done', () => {
    expect(rateAndEta({ done: 0, total: 10, elapsedMs: 5000 }).etaSeconds).toBe(Number.POSITIVE_INFINITY);
    expect(formatProgress('published', { done: 0, total: 10, elapsedMs: 0 })).toBe(
      'published 0/10 (0%)  0/s  ETA ?',
    );
    expect(rateAndEta({ done: 10, total: 10, elapsedMs: 5000 })).toEqual({ rate: 2, etaSeconds: 0 });
    expect(formatProgress('copied', { done: 0, total: 0, elapsedMs: 0 })).toBe(
      'copied 0/0 (100%)  0/s  ETA 0s',
    );
  });
});
