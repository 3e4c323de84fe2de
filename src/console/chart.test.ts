import { describe, expect, it } from 'vitest';
import { lineChart, niceMax } from './chart.ts';

describe('line chart', () => {
  it('picks a readable axis top', () => {
    expect(niceMax(0)).toBe(1);
    expect(niceMax(0.3)).toBeCloseTo(0.5);
    expect(niceMax(7)).toBe(10);
    expect(niceMax(1200)).toBe(2000);
    expect(niceMax(100)).toBe(100);
  });

  it('draws the window, breaks the line at missing values, and has no inline style', () => {
    const svg = lineChart(
      [
        { at: 0, value: 1 },
        { at: 10, value: 2 },
        { at: 20, value: null },
        { at: 30, value: 4 },
        { at: 40, value: 3 },
        { at: -10, value: 1000 },
      ],
      { title: 'WAL <b>', from: 0, to: 40, format: (v) => `${v} B`, width: 170, height: 62 },
    ).text;
    expect(svg.match(/<polyline /g)?.length).toBe(2);
    // Out of the window: ignored (the axis top is 5, not 1000).
    expect(svg).toContain('>5 B</text>');
    expect(svg).toContain('<title>WAL &lt;b&gt;</title>');
    expect(svg).not.toContain('style=');
    expect(lineChart([], { title: 't', from: 0, to: 1, format: String }).text).toContain('no data yet');
  });
});
