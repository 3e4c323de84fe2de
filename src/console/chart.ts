import { html, raw, type SafeHtml } from './html.ts';

export interface Series {
  at: number;
  value: number | null;
}

export interface ChartOptions {
  title: string;
  from: number;
  to: number;
  format: (v: number) => string;
  width?: number;
  height?: number;
}

const PAD = { left: 70, right: 10, top: 10, bottom: 22 };

/** The smallest 1/2/5 × 10^n at or above v (a readable axis top); 1 for nothing. */
export function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/**
 * A line chart as SVG markup, drawn on the server (no script needed, no inline style: colours
 * come from console.css classes). Missing values (null) break the line instead of drawing zero.
 */
export function lineChart(points: readonly Series[], o: ChartOptions): SafeHtml {
  const w = o.width ?? 560;
  const h = o.height ?? 160;
  const iw = w - PAD.left - PAD.right;
  const ih = h - PAD.top - PAD.bottom;
  const inWindow = points.filter((p) => p.at >= o.from && p.at <= o.to);
  const values = inWindow.map((p) => p.value).filter((v): v is number => v !== null);
  const top = niceMax(Math.max(0, ...values));
  const x = (at: number) => PAD.left + ((at - o.from) / Math.max(1, o.to - o.from)) * iw;
  const y = (v: number) => PAD.top + ih - (Math.max(0, v) / top) * ih;
  const runs: string[][] = [];
  let run: string[] | null = null;
  for (const p of inWindow) {
    if (p.value === null) {
      run = null;
      continue;
    }
    if (!run) runs.push((run = []));
    run.push(`${x(p.at).toFixed(1)},${y(p.value).toFixed(1)}`);
  }
  const lines = runs.map((r) =>
    r.length === 1
      ? `<circle class="chart-dot" cx="${r[0]!.split(',')[0]}" cy="${r[0]!.split(',')[1]}" r="2"/>`
      : `<polyline class="chart-line" points="${r.join(' ')}"/>`,
  );
  const minutes = Math.round((o.to - o.from) / 60_000);
  return html`<svg class="chart" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" aria-label="${o.title}">
<title>${o.title}</title>
<line class="chart-axis" x1="${PAD.left}" y1="${PAD.top + ih}" x2="${PAD.left + iw}" y2="${PAD.top + ih}"/>
<line class="chart-grid" x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left + iw}" y2="${PAD.top}"/>
<text class="chart-label" x="${PAD.left - 6}" y="${PAD.top + 4}" text-anchor="end">${o.format(top)}</text>
<text class="chart-label" x="${PAD.left - 6}" y="${PAD.top + ih + 4}" text-anchor="end">${o.format(0)}</text>
<text class="chart-label" x="${PAD.left}" y="${h - 6}">-${minutes} min</text>
<text class="chart-label" x="${PAD.left + iw}" y="${h - 6}" text-anchor="end">now</text>
${raw(lines.join('\n'))}${values.length === 0 ? html`<text class="chart-empty" x="${PAD.left + iw / 2}" y="${PAD.top + ih / 2}" text-anchor="middle">no data yet</text>` : ''}
</svg>`;
}
