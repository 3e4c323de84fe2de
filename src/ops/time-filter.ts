import { OpsInputError } from './input-error.ts';

const UNIT_MS: Record<string, number> = {
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

const ISO =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * A point in time for --since / --until:
 *  - a relative duration back from now: `90s`, `30m`, `2h`, `7d`, `1w`;
 *  - an ISO-8601 date (`2026-11-20`, midnight UTC) or date-time (`2026-11-20T14:05:00Z`,
 *    `2026-11-20 14:05+02:00`); a date-time without an offset is UTC.
 */
export function parseTime(text: string, now: Date = new Date()): Date {
  const t = text.trim();
  const rel = /^(\d+)\s*([smhdw])$/i.exec(t);
  if (rel) return new Date(now.getTime() - Number(rel[1]) * UNIT_MS[rel[2]!.toLowerCase()]!);
  const m = ISO.exec(t);
  if (!m) throw malformed(text);
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  let offset = zone.toUpperCase();
  if (offset !== 'Z') {
    const digits = offset.slice(1).replace(':', '');
    offset = `${offset[0]}${digits.slice(0, 2)}:${digits.slice(2, 4) || '00'}`;
  }
  const ms = frac ? `.${frac.padEnd(3, '0').slice(0, 3)}` : '';
  const date = new Date(`${y}-${mo}-${d}T${h}:${mi}:${s}${ms}${offset}`);
  // Date() rolls 2026-02-31 over to March; a field out of range is a typo, not a wish.
  const fieldsOk =
    Number(mo) >= 1 &&
    Number(mo) <= 12 &&
    Number(d) >= 1 &&
    Number(d) <= new Date(Date.UTC(Number(y), Number(mo), 0)).getUTCDate() &&
    Number(h) <= 23 &&
    Number(mi) <= 59 &&
    Number(s) <= 59;
  if (Number.isNaN(date.getTime()) || !fieldsOk) throw malformed(text);
  return date;
}

function malformed(text: string): OpsInputError {
  return new OpsInputError(
    `${JSON.stringify(text)} is not a time: use ISO-8601 (2026-11-20, 2026-11-20T14:05:00Z, 2026-11-20T14:05+02:00) or a duration back from now (30m, 2h, 7d)`,
  );
}
