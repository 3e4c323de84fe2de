import { isUtf8 } from 'node:buffer';
import pg from 'pg';
import { NotUtf8Value, UnreadableValue } from '../route/row-check.ts';
import { isMicrosecondParser, timestamptzFromBinary } from '../route/timestamptz.ts';

/** pg's parser for a type's text (pg.types.getTypeParser), as pgoutput's RELATION message gives the type. */
export type TextParser = (text: string) => unknown;

/** pg's own parsers of int8 (the digits as they are) and jsonb (JSON.parse), when no one replaced them. */
const INT8_PARSER = pg.types.getTypeParser(20, 'text');
const JSONB_PARSER = pg.types.getTypeParser(3802, 'text');
/** The value of every '{}' jsonb read with pg's parser: frozen, since every such row shares it. */
const EMPTY_OBJECT: Readonly<Record<string, never>> = Object.freeze({});

// Type OIDs (pg_type.dat).
const BOOL = 16;
const BYTEA = 17;
const NAME = 19;
const INT8 = 20;
const INT2 = 21;
const INT4 = 23;
const TEXT = 25;
const OID = 26;
const JSON_ = 114;
const BPCHAR = 1042;
const VARCHAR = 1043;
const DATE = 1082;
const TIMESTAMP = 1114;
const TIMESTAMPTZ = 1184;
const NUMERIC = 1700;
const UUID = 2950;
const JSONB = 3802;

/** Types whose binary send format is their text (jsonb: a version byte, then its text). */
const TEXT_IN_BINARY: ReadonlySet<number> = new Set([TEXT, VARCHAR, BPCHAR, NAME, JSON_, JSONB]);

/**
 * When the stream carries a SQL_ASCII database's bytes unconverted (replication/connection.ts):
 * a text value the relay reads whose bytes are not UTF-8, as a NotUtf8Value (its row fails its
 * check: route/row-check.ts); null for a good value, or a value that is not text.
 */
export function notUtf8(
  data: Buffer,
  start: number,
  end: number,
  binary: boolean,
  typeOid: number,
): NotUtf8Value | null {
  if (binary && !TEXT_IN_BINARY.has(typeOid)) return null;
  const bytes = data.subarray(start, end);
  if (isUtf8(bytes)) return null;
  let k = 0;
  while (k < bytes.length && bytes[k]! < 0x80) k++;
  return new NotUtf8Value(k, bytes[k] ?? 0);
}

/**
 * The types whose binary send format readBinaryValue reads. The relay asks pgoutput for binary
 * values only when every outbox column it reads has one of them (replication/connection.ts).
 */
export const BINARY_READABLE_TYPES: ReadonlySet<number> = new Set([
  BOOL,
  BYTEA,
  NAME,
  INT8,
  INT2,
  INT4,
  TEXT,
  OID,
  JSON_,
  BPCHAR,
  VARCHAR,
  DATE,
  TIMESTAMP,
  TIMESTAMPTZ,
  NUMERIC,
  UUID,
  JSONB,
]);

/**
 * A value in its type's binary send format (pgoutput's binary mode, PostgreSQL 14+), read into
 * exactly what the text path gives for the same value: `parser` applied to the text PostgreSQL
 * would have sent, with shortcuts where the text would only be parsed again —
 * - text, varchar, bpchar, name, json: the same bytes as the text (both in the client encoding);
 *   jsonb: a version byte (1), then its text;
 * - bytea: the raw bytes, as the hex text path decodes them: copied, unless `view` (the message's
 *   bytes are never reused: replication/copy-reader.ts), then a view of the message;
 * - timestamptz with the microsecond parser installed: a Date with microseconds straight from
 *   the int64 (route/timestamptz.ts); with any other parser, the ISO text in UTC;
 * - int2/int4/int8/oid, bool, uuid, numeric, date, timestamp: their canonical text.
 * Any other type, or a value of the wrong length: an UnreadableValue, which fails the row's
 * check naming the column (route/row-check.ts) — never a misread value.
 */
export function readBinaryValue(
  data: Buffer,
  start: number,
  end: number,
  typeOid: number,
  parser: TextParser,
  view = false,
): unknown {
  const len = end - start;
  switch (typeOid) {
    case BYTEA: {
      if (view) return data.subarray(start, end);
      const copy = Buffer.allocUnsafe(len);
      data.copy(copy, 0, start, end);
      return copy;
    }
    case TEXT:
    case VARCHAR:
    case BPCHAR:
    case NAME:
    case JSON_:
      return parser(utf8Text(data, start, end));
    case JSONB:
      // '{}' (the headers column's default) with pg's parser: one shared, frozen empty object.
      if (len === 3 && data[start] === 1 && data[start + 1] === 0x7b && data[start + 2] === 0x7d)
        return parser === JSONB_PARSER ? EMPTY_OBJECT : parser('{}');
      if (len >= 1 && data[start] === 1) return parser(utf8Text(data, start + 1, end));
      break;
    case TIMESTAMPTZ:
      if (len !== 8) break;
      return isMicrosecondParser(parser)
        ? timestamptzFromBinary(data, start)
        : parser(timestampText(data, start, '+00'));
    case TIMESTAMP:
      if (len === 8) return parser(timestampText(data, start, ''));
      break;
    case DATE:
      if (len === 4) return parser(dateText(data.readInt32BE(start)));
      break;
    case INT8:
      // pg's int8 parser returns the digits as they are: not called for them.
      if (len === 8) return parser === INT8_PARSER ? int8Text(data, start) : parser(int8Text(data, start));
      break;
    case INT4:
      if (len === 4) return parser(String(data.readInt32BE(start)));
      break;
    case INT2:
      if (len === 2) return parser(String(data.readInt16BE(start)));
      break;
    case OID:
      if (len === 4) return parser(String(data.readUInt32BE(start)));
      break;
    case BOOL:
      if (len === 1) return parser(data[start] ? 't' : 'f');
      break;
    case UUID:
      if (len === 16) return parser(uuidText(data, start));
      break;
    case NUMERIC: {
      const text = numericText(data, start, end);
      if (text !== null) return parser(text);
      break;
    }
  }
  return new UnreadableValue(typeOid);
}

/**
 * UTF-8 text as pg-logical-replication's reader decodes it: its TextDecoder drops a leading BOM,
 * Buffer's UTF-8 keeps it (invalid sequences become U+FFFD in both).
 */
export function utf8Text(data: Buffer, start: number, end: number): string {
  if (end - start >= 3 && data[start] === 0xef && data[start + 1] === 0xbb && data[start + 2] === 0xbf)
    start += 3;
  if (SLICES && start >= 0 && start <= end && end <= data.length)
    return (data as unknown as Slices).utf8Slice(start, end);
  return data.toString('utf8', start, end);
}

/**
 * Buffer's own decoders, which `toString(encoding, start, end)` calls once it has checked its
 * arguments and looked the encoding up: called directly for the range a caller has checked
 * (issue 39: toString's own JavaScript was 5.5 % of reading a bulk outbox row, besides the
 * decoding itself). Not in Node's documented API: where they are missing, toString.
 */
interface Slices {
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}
const SLICES =
  typeof (Buffer.prototype as unknown as Partial<Slices>).utf8Slice === 'function' &&
  typeof (Buffer.prototype as unknown as Partial<Slices>).latin1Slice === 'function';

function int8Text(data: Buffer, at: number): string {
  const hi = data.readInt32BE(at);
  // Within ±2^53 the double is exact; beyond, BigInt (ids that large are rare).
  return hi >= -0x20_0000 && hi < 0x20_0000
    ? String(hi * 0x1_0000_0000 + data.readUInt32BE(at + 4))
    : data.readBigInt64BE(at).toString();
}

/** The 36 characters of a uuid's text, written into one scratch buffer: one flat string, no slices and joins. */
const uuidScratch = Buffer.alloc(36);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

function uuidText(data: Buffer, at: number): string {
  const out = uuidScratch;
  let o = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out[o++] = 0x2d; // '-'
    const b = data[at + i]!;
    out[o++] = HEX_DIGITS[b >> 4]!;
    out[o++] = HEX_DIGITS[b & 15]!;
  }
  return SLICES ? (out as unknown as Slices).latin1Slice(0, 36) : out.toString('latin1', 0, 36);
}

/** numeric_send: ndigits, weight, sign, dscale (int16 each), then ndigits base-10000 digits; as numeric_out prints it. */
function numericText(data: Buffer, start: number, end: number): string | null {
  if (end - start < 8) return null;
  const ndigits = data.readInt16BE(start);
  const weight = data.readInt16BE(start + 2);
  const sign = data.readUInt16BE(start + 4);
  const dscale = data.readInt16BE(start + 6);
  if (ndigits < 0 || dscale < 0 || end - start !== 8 + 2 * ndigits) return null;
  if (sign === 0xc000) return 'NaN';
  if (sign === 0xd000) return 'Infinity';
  if (sign === 0xf000) return '-Infinity';
  if (sign !== 0 && sign !== 0x4000) return null;
  const digit = (i: number) => (i >= 0 && i < ndigits ? data.readInt16BE(start + 8 + 2 * i) : 0);
  let s = sign === 0x4000 ? '-' : '';
  if (weight < 0) s += '0';
  for (let i = 0; i <= weight; i++) s += i === 0 ? String(digit(i)) : String(digit(i)).padStart(4, '0');
  if (dscale > 0) {
    let fraction = '';
    for (let i = weight + 1; fraction.length < dscale; i++) fraction += String(digit(i)).padStart(4, '0');
    s += `.${fraction.slice(0, dscale)}`;
  }
  return s;
}

const DAY_US = 86_400_000_000n;
const INT64_MAX = 0x7fff_ffff_ffff_ffffn;
const INT64_MIN = -0x8000_0000_0000_0000n;

/**
 * timestamp[tz]_send (int64 µs since 2000-01-01) as PostgreSQL's ISO output prints it, `zone`
 * after the time ('+00' for a timestamptz in UTC, '' for a timestamp), ' BC' last.
 */
function timestampText(data: Buffer, at: number, zone: string): string {
  const us = data.readBigInt64BE(at);
  if (us === INT64_MAX) return 'infinity';
  if (us === INT64_MIN) return '-infinity';
  let days = us / DAY_US;
  let time = us % DAY_US;
  if (time < 0n) {
    time += DAY_US;
    days -= 1n;
  }
  const [date, bc] = civilDate(Number(days));
  const t = Number(time);
  const micros = t % 1_000_000;
  const fraction = micros ? `.${String(micros).padStart(6, '0').replace(/0+$/, '')}` : '';
  const seconds = Math.floor(t / 1_000_000);
  return `${date} ${two(Math.floor(seconds / 3600))}:${two(Math.floor(seconds / 60) % 60)}:${two(seconds % 60)}${fraction}${zone}${bc}`;
}

/** date_send (int32 days since 2000-01-01) as PostgreSQL's ISO output prints it. */
function dateText(days: number): string {
  if (days === 0x7fff_ffff) return 'infinity';
  if (days === -0x8000_0000) return '-infinity';
  const [date, bc] = civilDate(days);
  return date + bc;
}

/** Days since 2000-01-01 → ['YYYY-MM-DD', ' BC' or ''] (proleptic Gregorian; H. Hinnant's civil_from_days). */
function civilDate(days: number): [string, string] {
  const z = days + 730_425; // days since 0000-03-01
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  // Year 0 is 1 BC.
  const printed = year > 0 ? year : 1 - year;
  return [`${String(printed).padStart(4, '0')}-${two(month)}-${two(day)}`, year > 0 ? '' : ' BC'];
}

function two(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}
