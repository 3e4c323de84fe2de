/**
 * Progress of a long operator command (replay's copying, --follow's publishing): done of total,
 * rate and time left. Pure; the command decides where it goes (a rewritten line on a terminal,
 * a log line otherwise).
 */
export interface Progress {
  done: number;
  total: number;
  /** Since the phase started. */
  elapsedMs: number;
}

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Events per second so far, and the seconds left at that rate (Infinity while nothing is done). */
export function rateAndEta(p: Progress): { rate: number; etaSeconds: number } {
  const rate = p.elapsedMs > 0 ? (p.done * 1000) / p.elapsedMs : 0;
  const left = Math.max(0, p.total - p.done);
  return { rate, etaSeconds: left === 0 ? 0 : rate > 0 ? left / rate : Number.POSITIVE_INFINITY };
}

/** e.g. `copied 1,500/5,001 (30%)  2,400/s  ETA 1s` */
export function formatProgress(verb: string, p: Progress): string {
  const { rate, etaSeconds } = rateAndEta(p);
  const pct = p.total > 0 ? Math.floor((p.done * 100) / p.total) : 100;
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  return `${verb} ${n(p.done)}/${n(p.total)} (${pct}%)  ${n(rate)}/s  ETA ${duration(etaSeconds)}`;
}
