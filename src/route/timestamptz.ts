import pg from 'pg';
import { SUB_MILLISECOND_MICROS } from './value-format.ts';

/**
 * A timestamptz that keeps its microseconds. pg parses timestamptz into a Date (milliseconds);
 * the envelope's occurred_at should keep the microseconds of created_at. The Date stays a Date
 * for everyone else (`instanceof Date`, getTime, JSON); the sub-millisecond part is read through
 * SUB_MILLISECOND_MICROS (src/route/value-format.ts), a getter on the prototype, so it is not an
 * own property of the value (equality checks and inspection see a plain Date).
 */
class MicrosecondDate extends Date {
  readonly #micros: number;

  constructor(ms: number, micros: number) {
    super(ms);
    this.#micros = micros;
  }

  get [SUB_MILLISECOND_MICROS](): number {
    return this.#micros;
  }
}

const ZERO = 48;
const MINUS = 45;
const PLUS = 43;
const COLON = 58;
const DOT = 46;
const SPACE = 32;

/** Two digits at i as a number, or NaN. */
function two(t: string, i: number): number {
  const a = t.charCodeAt(i) - ZERO;
  const b = t.charCodeAt(i + 1) - ZERO;
  return a >= 0 && a <= 9 && b >= 0 && b <= 9 ? a * 10 + b : Number.NaN;
}

/**
 * PostgreSQL's ISO output of a timestamptz, `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM]`, read with
 * character codes (no regular expression, no intermediate strings). null for every other shape
 * (BC, years outside 100–9999, infinity, offsets with seconds, other DateStyles): the caller
 * falls back to pg's parser.
 */
export function parseIsoTimestamptz(t: string): Date | null {
  const n = t.length;
  if (n < 22 || t.charCodeAt(4) !== MINUS || t.charCodeAt(7) !== MINUS || t.charCodeAt(10) !== SPACE)
    return null;
  if (t.charCodeAt(13) !== COLON || t.charCodeAt(16) !== COLON) return null;
  const year = two(t, 0) * 100 + two(t, 2);
  const month = two(t, 5);
  const day = two(t, 8);
  const hour = two(t, 11);
  const minute = two(t, 14);
  const second = two(t, 17);
  let i = 19;
  let micros = 0;
  if (t.charCodeAt(i) === DOT) {
    let digits = 0;
    for (i++; i < n && digits < 6; i++, digits++) {
      const c = t.charCodeAt(i) - ZERO;
      if (c < 0 || c > 9) break;
      micros = micros * 10 + c;
    }
    if (digits === 0) return null;
    for (; digits < 6; digits++) micros *= 10;
  }
  const sign = t.charCodeAt(i);
  if (sign !== PLUS && sign !== MINUS) return null;
  let offsetMinutes = two(t, i + 1) * 60;
  i += 3;
  if (i < n && t.charCodeAt(i) === COLON) {
    offsetMinutes += two(t, i + 1);
    i += 3;
  }
  // Anything left (offset seconds, " BC") or any field that was not two digits: not this shape.
  if (i !== n || !(year >= 100) || Number.isNaN(month + day + hour + minute + second + offsetMinutes))
    return null;
  const local = Date.UTC(year, month - 1, day, hour, minute, second, Math.floor(micros / 1000));
  const ms = local - (sign === MINUS ? -offsetMinutes : offsetMinutes) * 60_000;
  return Number.isFinite(ms) ? new MicrosecondDate(ms, micros % 1000) : null;
}

/** Any other shape: pg's parser, the microseconds taken from the text when it has them. */
function withMicros(parse: (text: string) => unknown): (text: string) => unknown {
  return (text) => {
    const value = parse(text);
    const fraction = /^[^.]*\.(\d{4,6})/.exec(text)?.[1];
    if (value instanceof Date && fraction) {
      Object.defineProperty(value, SUB_MILLISECOND_MICROS, {
        value: Number(fraction.padEnd(6, '0').slice(3)),
      });
    }
    return value;
  };
}

/** The parser keepTimestampMicroseconds installed, if it did. */
let installed: ((text: string) => unknown) | null = null;

/** Installs the parser for timestamptz text values (the CLI does, at start; stream tuples and queries alike). */
export function keepTimestampMicroseconds(): void {
  const TIMESTAMPTZ = pg.types.builtins.TIMESTAMPTZ;
  const fallback = withMicros(pg.types.getTypeParser(TIMESTAMPTZ, 'text') as (text: string) => unknown);
  installed = (text: string) => parseIsoTimestamptz(text) ?? fallback(text);
  pg.types.setTypeParser(TIMESTAMPTZ, 'text', installed);
}

/** Whether `parse` is the parser keepTimestampMicroseconds installed (then timestamptzFromBinary reads as it does). */
export function isMicrosecondParser(parse: unknown): boolean {
  return parse === installed && installed !== null;
}

/** Milliseconds between the Unix epoch and PostgreSQL's (2000-01-01). */
const PG_EPOCH_MS = 946_684_800_000;

/**
 * A timestamptz in its binary send format (pgoutput's binary mode): int64 microseconds since
 * 2000-01-01 UTC at `at`. The same value the installed parser gives for the text of that instant:
 * a Date carrying its microseconds, Infinity/-Infinity for infinity/-infinity, an invalid Date
 * beyond the years a Date can hold. Read as two 32-bit halves: the microseconds do not fit a
 * double's 53 bits beyond ±285 years of 2000, the milliseconds do (for every year a Date holds).
 */
export function timestamptzFromBinary(data: Buffer, at: number): Date | number {
  const hi = data.readInt32BE(at);
  const lo = data.readUInt32BE(at + 4);
  if (hi === 0x7fff_ffff && lo === 0xffff_ffff) return Number.POSITIVE_INFINITY;
  if (hi === -0x8000_0000 && lo === 0) return Number.NEGATIVE_INFINITY;
  // µs = hi·2^32 + lo = 1000·(hi·4294967) + (hi·296 + lo), since 2^32 = 1000·4294967 + 296.
  const rest = hi * 296 + lo;
  const restMs = Math.floor(rest / 1000);
  return new MicrosecondDate(PG_EPOCH_MS + hi * 4_294_967 + restMs, rest - restMs * 1000);
}
