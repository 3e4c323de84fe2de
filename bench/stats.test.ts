import { describe, expect, it } from 'vitest';
import { pgFloorOf } from './floors.ts';
import { boundedStep, warmedUp } from './live.ts';
import { distribution, median, medianAndWorst, overFloor, percentile } from './stats.ts';

describe('percentile', () => {
  it('is the nearest-rank percentile of sorted values', () => {
    const s = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(s, 50)).toBe(50);
    expect(percentile(s, 99)).toBe(99);
    expect(percentile(s, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
  it('distribution sorts numerically', () => {
    expect(distribution([10, 9, 100, 1])).toMatchObject({ n: 4, p50: 9, max: 100 });
  });
});

describe('medianAndWorst', () => {
  it('is the median and the largest of the runs', () => {
    expect(medianAndWorst([1.2, 3, 0.9, 1.5, 1.1])).toEqual({ median: 1.2, worst: 3 });
    expect(median([2, 1])).toBe(1);
  });
});

describe('overFloor', () => {
  it('divides by the sum of the floors', () => {
    expect(overFloor(6, 1, 3)).toBe(1.5);
  });
});

describe('boundedStep', () => {
  const lags = (first: number, second: number) => [
    { t: 1000, lag: first },
    { t: 5000, lag: second },
  ];
  it('is bounded when the writer kept up, lag did not grow and all is through after 1 s', () => {
    expect(boundedStep(2000, 8, 1990, lags(100, 400), 0)).toMatchObject({ bounded: true, maxLag: 400 });
  });
  it('is not bounded when the lag grew by more than 0.25 s of events', () => {
    expect(boundedStep(2000, 8, 1990, lags(100, 601), 0).bounded).toBe(false);
  });
  it('is not bounded when the writer fell behind or events were still out 1 s after', () => {
    expect(boundedStep(2000, 8, 1700, lags(0, 0), 0).bounded).toBe(false);
    expect(boundedStep(2000, 8, 2000, lags(0, 0), 3).bounded).toBe(false);
  });
});

describe('warmedUp', () => {
  it('asks settled at every call, and is over after minSeconds once settled or at maxSeconds', () => {
    let asked = 0;
    const warm = (settled: boolean) => ({
      minSeconds: 5,
      maxSeconds: 45,
      settled: () => {
        asked++;
        return settled;
      },
    });
    expect(warmedUp(warm(true), 4)).toBe(false);
    expect(asked).toBe(1);
    expect(warmedUp(warm(true), 5)).toBe(true);
    expect(warmedUp(warm(false), 44)).toBe(false);
    expect(warmedUp(warm(false), 45)).toBe(true);
  });
});

describe('pgFloorOf', () => {
  it('times the measured events, counts the ones never received, the ones received after the relay, and every receipt (warm-up too)', () => {
    const events = {
      commitAt: Float64Array.from([0, 10, 20, 30, 40]),
      ackAt: Float64Array.from([5, 15, 25, 35, 45]),
      warmed: 1,
      written: 5,
    };
    const received = Float64Array.from([1, 12, Number.NaN, 36, 41]);
    const f = pgFloorOf(received, events);
    expect(f).toMatchObject({ pgMissing: 1, pgLate: 1, pgEvents: 4 });
    expect(f.pg).toMatchObject({ n: 3, max: 6 });
    // append − receipt: 15 − 12, 35 − 36, 45 − 41
    expect(f.afterPg).toMatchObject({ n: 3, p50: 3, max: 4 });
  });
});
