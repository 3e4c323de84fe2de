import { describe, expect, it } from 'vitest';
import { growthPer10Min, minuteP99s, p99Drift, secondStats, slope, slopeWindow } from './soak-stats.ts';

describe('slope', () => {
  it('is the least-squares slope', () => {
    expect(slope([0, 1, 2, 3].map((t) => ({ t, y: 5 + 2 * t })))).toBeCloseTo(2);
    expect(
      slope([
        { t: 0, y: 1 },
        { t: 1, y: 3 },
        { t: 2, y: 2 },
      ]),
    ).toBeCloseTo(0.5);
  });
  it('is NaN without two distinct times', () => {
    expect(slope([{ t: 1, y: 1 }])).toBeNaN();
    expect(
      slope([
        { t: 1, y: 1 },
        { t: 1, y: 2 },
      ]),
    ).toBeNaN();
  });
});

describe('slopeWindow', () => {
  const points = Array.from({ length: 181 }, (_, i) => ({ t: i / 6, y: i })); // 30 min, every 10 s
  it('keeps the last 20 minutes of a 30-minute run', () => {
    const w = slopeWindow(points, 30, null);
    expect(w[0]!.t).toBeCloseTo(10);
    expect(w.at(-1)!.t).toBeCloseTo(30);
  });
  it('keeps the last 2/3 of a shorter run', () => {
    const w = slopeWindow(
      points.filter((p) => p.t <= 3),
      3,
      null,
    );
    expect(w[0]!.t).toBeCloseTo(1);
  });
  it('keeps only the process running at the end, from a minute after its start', () => {
    const w = slopeWindow(points, 30, 15);
    expect(w[0]!.t).toBeCloseTo(16);
  });
  it('drops samples without a value (the relay was down)', () => {
    expect(
      slopeWindow(
        [
          { t: 20, y: Number.NaN },
          { t: 21, y: 1 },
        ],
        30,
        null,
      ),
    ).toEqual([{ t: 21, y: 1 }]);
  });
});

describe('growthPer10Min', () => {
  it('is MB per 10 minutes over the window', () => {
    const flatThenRestart = Array.from({ length: 181 }, (_, i) => {
      const t = i / 6;
      return { t, y: t < 15 ? 100 + t : 80 + 0.05 * t };
    });
    expect(growthPer10Min(flatThenRestart, 30, 15)).toBeCloseTo(0.5);
  });
});

describe('minuteP99s', () => {
  it('buckets latencies by the minute of their commit and skips what was not relayed', () => {
    const start = 1_000_000;
    const commit = new Float64Array([start + 1000, start + 2000, start + 61_000, start + 62_000, Number.NaN]);
    const ack = new Float64Array([start + 1005, start + 2010, start + 61_100, Number.NaN, start]);
    expect(minuteP99s(commit, ack, 5, start)).toEqual([
      { minute: 0, n: 2, p99: 10 },
      { minute: 1, n: 1, p99: 100 },
    ]);
  });
});

describe('secondStats', () => {
  it('gives p50, p99 and max per second of commit time and skips what was not relayed', () => {
    const start = 1_000_000;
    const commit = new Float64Array([
      start + 100,
      start + 200,
      start + 300,
      start + 2500,
      start + 2600,
      Number.NaN,
    ]);
    const ack = new Float64Array([start + 101, start + 203, start + 310, start + 2502, Number.NaN, start]);
    expect(secondStats(commit, ack, 6, start)).toEqual([
      { second: 0, n: 3, p50: 3, p99: 10, max: 10 },
      { second: 2, n: 1, p50: 2, p99: 2, max: 2 },
    ]);
  });
});

describe('p99Drift', () => {
  const minutes = [4, 5, 6, 5, 4, 6, 7, 50, 6].map((p99, minute) => ({ minute, p99 }));
  it('is the worst minute over the first five minutes’ median', () => {
    expect(p99Drift(minutes, 9)).toMatchObject({ baseline: 5, worst: 50, drift: 10, worstMinute: 7 });
  });
  it('leaves excluded minutes out', () => {
    expect(p99Drift(minutes, 9, [7])).toMatchObject({ worst: 7, drift: 1.4 });
  });
  it('takes the first third of a short run as the baseline', () => {
    expect(p99Drift(minutes.slice(0, 3), 3).baseline).toBe(4);
  });
});
