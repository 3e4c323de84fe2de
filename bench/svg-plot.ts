/**
 * A hand-rolled SVG of time series (no plotting dependency): panels stacked one above the other,
 * one shared time axis in minutes, up to a few series per panel, vertical marks (the relay's
 * restart). Pure: strings in, a string out.
 */
import type { Point } from './soak-stats.ts';

export type Series = { name: string; color: string; points: Point[] };
export type Panel = { title: string; series: Series[] };
export type Mark = { t: number; label: string };

const WIDTH = 960;
const LEFT = 70;
const RIGHT = 20;
const PANEL = 130;
const GAP = 42;
const TOP = 40;

/** A linear map of [d0, d1] onto [r0, r1]. */
export function scale(d0: number, d1: number, r0: number, r1: number): (v: number) => number {
  const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
  return (v) => r0 + (v - d0) * k;
}

/** 1, 2 or 5 × a power of ten, at least `v` (an axis's top); 1 for 0 or less. */
export function niceCeil(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}

/** An SVG path's d: M/L through the points; a non-finite y breaks the line (a gap). */
export function pathData(points: Point[], x: (t: number) => number, y: (v: number) => number): string {
  let d = '';
  let pen = false;
  for (const p of points) {
    if (!Number.isFinite(p.y) || !Number.isFinite(p.t)) {
      pen = false;
      continue;
    }
    d += `${pen ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.y).toFixed(1)}`;
    pen = true;
  }
  return d;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const num = (v: number) =>
  Number.isInteger(v) || v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : String(Number(v.toPrecision(2)));

export function renderSvg(o: {
  title: string;
  subtitle: string;
  minutes: number;
  panels: Panel[];
  marks: Mark[];
}): string {
  const height = TOP + o.panels.length * (PANEL + GAP) + 10;
  const x = scale(0, o.minutes, LEFT, WIDTH - RIGHT);
  const step = niceCeil(o.minutes / 10);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="16" font-size="14" font-weight="bold">${esc(o.title)}</text>`,
    `<text x="${LEFT}" y="31" fill="#555">${esc(o.subtitle)}</text>`,
  ];
  o.panels.forEach((panel, i) => {
    const top = TOP + GAP + i * (PANEL + GAP) - 20;
    const bottom = top + PANEL;
    const max = niceCeil(
      Math.max(0, ...panel.series.flatMap((s) => s.points.map((p) => p.y)).filter(Number.isFinite)),
    );
    const y = scale(0, max, bottom, top);
    out.push(`<text x="${LEFT}" y="${top - 6}" font-weight="bold">${esc(panel.title)}</text>`);
    let lx = LEFT + 12 + panel.title.length * 7;
    for (const s of panel.series) {
      out.push(
        `<line x1="${lx}" y1="${top - 9}" x2="${lx + 16}" y2="${top - 9}" stroke="${s.color}" stroke-width="2"/>`,
      );
      out.push(`<text x="${lx + 20}" y="${top - 6}">${esc(s.name)}</text>`);
      lx += 30 + s.name.length * 6.2;
    }
    for (const v of [0, max / 2, max]) {
      out.push(
        `<line x1="${LEFT}" y1="${y(v).toFixed(1)}" x2="${WIDTH - RIGHT}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`,
      );
      out.push(`<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${num(v)}</text>`);
    }
    for (let t = 0; t <= o.minutes + 1e-9; t += step)
      out.push(
        `<text x="${x(t).toFixed(1)}" y="${bottom + 14}" text-anchor="middle" fill="#555">${num(t)}</text>`,
      );
    for (const m of o.marks)
      out.push(
        `<line x1="${x(m.t).toFixed(1)}" y1="${top}" x2="${x(m.t).toFixed(1)}" y2="${bottom}" stroke="#999" stroke-dasharray="4 3"/>`,
        ...(i === 0
          ? [`<text x="${(x(m.t) + 4).toFixed(1)}" y="${top + 12}" fill="#777">${esc(m.label)}</text>`]
          : []),
      );
    for (const s of panel.series)
      out.push(`<path d="${pathData(s.points, x, y)}" fill="none" stroke="${s.color}" stroke-width="1.5"/>`);
  });
  out.push(
    `<text x="${WIDTH - RIGHT}" y="${height - 4}" text-anchor="end" fill="#555">minutes</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
