import { describe, expect, it } from 'vitest';
import { niceCeil, pathData, renderSvg, scale } from './svg-plot.ts';

describe('scale', () => {
  it('maps a domain linearly, flipped ranges included', () => {
    const y = scale(0, 10, 100, 0);
    expect(y(0)).toBe(100);
    expect(y(10)).toBe(0);
    expect(y(2.5)).toBe(75);
  });
  it('maps an empty domain onto its start', () => {
    expect(scale(3, 3, 10, 20)(3)).toBe(10);
  });
});

describe('niceCeil', () => {
  it('rounds up to 1, 2 or 5 times a power of ten', () => {
    expect([0, 0.7, 1, 1.2, 3, 7, 40, 180, 1000].map(niceCeil)).toEqual([1, 1, 1, 2, 5, 10, 50, 200, 1000]);
  });
});

describe('pathData', () => {
  const id = (v: number) => v;
  it('draws M then L through the points', () => {
    expect(
      pathData(
        [
          { t: 0, y: 1 },
          { t: 1, y: 2 },
          { t: 2, y: 0 },
        ],
        id,
        id,
      ),
    ).toBe('M0.0,1.0L1.0,2.0L2.0,0.0');
  });
  it('breaks the line at a missing value', () => {
    expect(
      pathData(
        [
          { t: 0, y: 1 },
          { t: 1, y: Number.NaN },
          { t: 2, y: 3 },
        ],
        id,
        id,
      ),
    ).toBe('M0.0,1.0M2.0,3.0');
  });
  it('is empty without points', () => {
    expect(pathData([], id, id)).toBe('');
  });
});

describe('renderSvg', () => {
  it('draws a panel per entry, a path per series, the marks and escaped text', () => {
    const svg = renderSvg({
      title: 'RSS <flat> & heap',
      subtitle: 'load 1.0',
      minutes: 3,
      marks: [{ t: 1.5, label: 'restart' }],
      panels: [
        {
          title: 'a',
          series: [
            {
              name: 's1',
              color: 'red',
              points: [
                { t: 0, y: 1 },
                { t: 3, y: 2 },
              ],
            },
          ],
        },
        {
          title: 'b',
          series: [
            { name: 's2', color: 'blue', points: [] },
            { name: 's3', color: 'green', points: [] },
          ],
        },
      ],
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<path /g)).toHaveLength(3);
    expect(svg).toContain('RSS &lt;flat&gt; &amp; heap');
    expect(svg.match(/stroke-dasharray/g)).toHaveLength(2);
    expect(svg).toContain('>restart<');
  });
});
