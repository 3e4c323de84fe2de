/** Human output of the operator commands: aligned columns, payload rendering, ages. No I/O. */

/** Columns aligned with two spaces, a header row and a dashed rule; cells are single-line. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const clean = (s: string) => s.replace(/[\r\n\t]+/g, ' ');
  const cells = [headers.map(clean), ...rows.map((r) => r.map(clean))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => [...(r[i] ?? '')].length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i]! - [...c].length)))
      .join('  ')
      .trimEnd();
  return [line(cells[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join(
    '\n',
  );
}

/** `key  value` lines, keys aligned. */
export function formatPairs(pairs: readonly (readonly [string, string])[]): string {
  const w = Math.max(0, ...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}

export type RenderedPayload =
  | { encoding: 'null'; text: string }
  | { encoding: 'json'; text: string; value: unknown }
  | { encoding: 'text'; text: string }
  | { encoding: 'hex'; text: string; bytes: number };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** JSON when it parses, text when it is valid UTF-8 without control characters, hex otherwise. */
export function renderPayload(payload: Buffer | null): RenderedPayload {
  if (payload === null) return { encoding: 'null', text: '(null: tombstone)' };
  let text: string;
  try {
    text = utf8.decode(payload);
  } catch {
    return { encoding: 'hex', text: payload.toString('hex'), bytes: payload.length };
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: detecting binary content
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text)) {
    return { encoding: 'hex', text: payload.toString('hex'), bytes: payload.length };
  }
  try {
    const value: unknown = JSON.parse(text);
    return { encoding: 'json', text: JSON.stringify(value, null, 2), value };
  } catch {
    return { encoding: 'text', text };
  }
}

/** 95 → "1m35s", 7200 → "2h0m", 200000 → "2d7h". */
export function formatAge(seconds: number | null): string {
  if (seconds === null) return '-';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

// Sizes are WAL sizes first (the slot watch logs them too): formatted beside the WAL budget.
export { formatBytes } from '../sweeper/wal-budget.ts';

export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
