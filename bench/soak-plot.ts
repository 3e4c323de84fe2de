/** The soak's plot (docs/soak.svg): its samples as panels of bench/svg-plot.ts. Pure. */
import type { Point } from './soak-stats.ts';
import { renderSvg } from './svg-plot.ts';

/** One 10 s sample of bench/soak.ts (t in minutes from the writer's start). */
export type SoakSample = {
  t: number;
  rss_mb: number;
  heap_mb: number;
  /** p99 of the events committed 20 – 10 s before the sample (ms). */
  p99_ms: number;
  lag_events: number;
  slot_lag_bytes: number;
  progress_ranges: number;
  progress_bytes: number;
  /** Mean time of the progress UPDATE since the previous sample (pg_stat_statements, ms). */
  progress_statement_ms: number;
  outbox_rows: number;
  outbox_mb: number;
  /** PostgreSQL's CPU (the writer's backends left out) per event committed since the previous sample. */
  pg_cpu_us_per_event: number;
  committed: number;
};

/** "1 %" for one in 100, "none" for 0. */
const share = (every: number) => (every > 0 ? `${Number((100 / every).toPrecision(2))} %` : 'none');

export function renderSoak(
  samples: SoakSample[],
  perMinute: { minute: number; p99: number }[],
  o: {
    minutes: number;
    rate: number;
    restartMinute: number;
    rollbackEvery: number;
    refuseEvery: number;
    note: string;
  },
): string {
  const line = (key: keyof SoakSample, scale = 1): Point[] =>
    samples.map((s) => ({ t: s.t, y: s[key] * scale }));
  return renderSvg({
    title: `Soak: ${o.rate.toLocaleString('en')} commits/s for ${o.minutes} min (${share(o.rollbackEvery)} rolled back, ${share(o.refuseEvery)} refused and dead-lettered, retention 60 s, one restart)`,
    subtitle: o.note,
    // The writer may run late on a busy machine: the axis covers every sample.
    minutes: Math.max(o.minutes, Math.ceil(samples.at(-1)?.t ?? 0)),
    marks: [{ t: o.restartMinute, label: 'relay restart' }],
    panels: [
      {
        title: 'relay memory, MB',
        series: [
          { name: 'RSS', color: '#1f77b4', points: line('rss_mb') },
          { name: 'heap used', color: '#ff7f0e', points: line('heap_mb') },
        ],
      },
      {
        title: 'latency p99, ms',
        series: [
          { name: 'per 10 s', color: '#aaaaaa', points: line('p99_ms') },
          {
            name: 'per minute',
            color: '#d62728',
            points: perMinute.map((m) => ({ t: m.minute + 0.5, y: m.p99 })),
          },
        ],
      },
      {
        title: 'lag, events',
        series: [{ name: 'committed − stored', color: '#2ca02c', points: line('lag_events') }],
      },
      {
        title: 'progress record',
        series: [
          { name: 'ranges', color: '#9467bd', points: line('progress_ranges') },
          { name: 'bytes ÷ 10', color: '#8c564b', points: line('progress_bytes', 0.1) },
        ],
      },
      {
        title: 'progress statement, ms (mean)',
        series: [{ name: 'UPDATE … published +', color: '#e377c2', points: line('progress_statement_ms') }],
      },
      {
        title: 'outbox table',
        series: [
          { name: 'rows ÷ 1000', color: '#17becf', points: line('outbox_rows', 0.001) },
          { name: 'MB', color: '#bcbd22', points: line('outbox_mb') },
        ],
      },
      {
        title: 'PostgreSQL CPU per event, µs',
        series: [{ name: 'writer excluded', color: '#7f7f7f', points: line('pg_cpu_us_per_event') }],
      },
    ],
  });
}
