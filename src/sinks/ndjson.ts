import { formatLsn, type Lsn } from '../replication/lsn.ts';
import type { OutboundMessage } from '../route/event.ts';

const TEXTUAL = /^(text\/|application\/(json|xml|yaml|x-ndjson|[a-z.+-]*\+(json|xml)))/i;

export function isTextual(contentType: string): boolean {
  return TEXTUAL.test(contentType);
}

/** isTextual per content type: a handful of distinct values, asked once per event. */
const textualCache = new Map<string, boolean>();

function textualCached(contentType: string): boolean {
  let t = textualCache.get(contentType);
  if (t === undefined) {
    t = isTextual(contentType);
    if (textualCache.size < 1000) textualCache.set(contentType, t);
  }
  return t;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Strings this long or shorter are checked and copied by a JavaScript loop, longer ones natively. */
const SHORT = 64;

/**
 * Writes NDJSON lines into one growing buffer: no string per line, no string for the batch, no
 * UTF-8 pass over either. The line's fixed parts are bytes encoded once; a string that JSON
 * would not escape (printable ASCII without `"` and `\`: ids, topics, header names, most keys
 * and values) is copied as it is, checked in the same pass; any other goes through
 * JSON.stringify. The output is byte for byte JSON.stringify's (a test compares).
 *
 * Why not JSON.stringify per line: the stdout sink writes every event, and is the relay's
 * baseline in the benchmarks (the relay without a broker). Measured by bench/hot-path.ts: this
 * writer's one-pass check and copy took a line from 2.07 to 1.63 µs (commit ef25ff5); the change
 * that wrote a batch into one buffer (20397b5, with other per-event changes) took a 100,000-row
 * bulk drain to stdout from 10.7 to 8.2 µs per event.
 */
class LineWriter {
  buf: Buffer;
  off = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(n: number): void {
    if (this.off + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.off + n));
    this.buf.copy(grown, 0, 0, this.off);
    this.buf = grown;
  }

  /** Bytes encoded once (the line's fixed parts). */
  bytes(b: Uint8Array): void {
    const n = b.length;
    this.ensure(n);
    const out = this.buf;
    let o = this.off;
    for (let i = 0; i < n; i++) out[o++] = b[i]!;
    this.off = o;
  }

  /** ASCII text that needs no escaping, as is. */
  ascii(s: string): void {
    const n = s.length;
    this.ensure(n);
    if (n <= SHORT) {
      const b = this.buf;
      let o = this.off;
      for (let i = 0; i < n; i++) b[o++] = s.charCodeAt(i);
      this.off = o;
    } else this.off += this.buf.write(s, this.off, n, 'latin1');
  }

  /** A JSON string literal: copied while it needs no escaping, else JSON.stringify's. */
  string(s: string): void {
    const n = s.length;
    if (n > SHORT) {
      this.utf8(JSON.stringify(s));
      return;
    }
    this.ensure(n + 2);
    const b = this.buf;
    let o = this.off;
    b[o++] = QUOTE;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === QUOTE || c === BACKSLASH) {
        this.utf8(JSON.stringify(s)); // from this.off again: what the loop wrote is overwritten
        return;
      }
      b[o++] = c;
    }
    b[o++] = QUOTE;
    this.off = o;
  }

  utf8(s: string): void {
    this.ensure(s.length * 3);
    this.off += this.buf.write(s, this.off, 'utf8');
  }

  /**
   * A JSON string literal of bytes as UTF-8 text (as Buffer#toString('utf8') reads them). Through
   * JSON.stringify, which is faster than a JavaScript scan for bytes that need escaping (0.35 vs
   * 0.6 µs for 500 bytes).
   */
  utf8Bytes(v: Buffer): void {
    this.utf8(JSON.stringify(v.toString('utf8')));
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.off++] = b;
  }
}

/** The line's fixed parts, encoded once. */
const fixed = (s: string) => Buffer.from(s, 'latin1');
const OPEN_TOPIC = fixed('{"topic":');
const KEY = fixed(',"key":');
const HEADERS = fixed(',"headers":{');
const VALUE = fixed('},"value":');
const NULL_VALUE = fixed('null,"value_encoding":null');
const UTF8_ENCODING = fixed(',"value_encoding":"utf8"');
const BASE64_ENCODING = fixed('","value_encoding":"base64"');
const TIMESTAMP = fixed(',"timestamp":"');
const EVENT_ID = fixed('","event_id":');
const ID = fixed(',"id":');
const LSN = fixed(',"lsn":"');
const CLOSE = fixed('"}\n');

/** The last second's ISO text up to the seconds (`YYYY-MM-DDTHH:MM:SS`): events of a batch share it. */
let isoSecond = Number.NaN;
let isoPrefix = '';

/** new Date(ms).toISOString(), from the cached second when it is the same. */
function isoTimestamp(ms: number): string {
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    const full = new Date(second * 1000).toISOString();
    isoPrefix = full.slice(0, full.length - 5); // without ".000Z"
    isoSecond = second;
  }
  const frac = ms - second * 1000;
  return `${isoPrefix}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
}

/** formatLsn of the last LSN asked for: the events of a transaction share it. */
let lastLsn: Lsn = -1n;
let lastLsnText = '';

function lsnText(lsn: Lsn): string {
  if (lsn !== lastLsn) {
    lastLsnText = formatLsn(lsn);
    lastLsn = lsn;
  }
  return lastLsnText;
}

/**
 * The batch as NDJSON, one line per message: value as UTF-8 text when the message's content type
 * is textual, else base64. The same keys in the same order, and the same bytes, as
 * JSON.stringify of `{topic, key, headers, value, value_encoding, timestamp, event_id, id, lsn}`.
 */
export function encodeLines(batch: readonly OutboundMessage[]): Buffer {
  let estimate = 0;
  for (let i = 0; i < batch.length; i++) estimate += 2 * (batch[i]!.value?.length ?? 0) + 400;
  const w = new LineWriter(estimate);
  for (let i = 0; i < batch.length; i++) {
    const m = batch[i]!;
    w.bytes(OPEN_TOPIC);
    w.string(m.topic);
    w.bytes(KEY);
    w.string(m.key);
    w.bytes(HEADERS);
    let first = true;
    for (const k in m.headers) {
      if (!Object.hasOwn(m.headers, k)) continue;
      if (!first) w.byte(0x2c);
      first = false;
      w.string(k);
      w.byte(0x3a);
      const value = m.headers[k];
      if (typeof value === 'string') w.string(value);
      else w.utf8(JSON.stringify(value)); // not the relay's own (its header values are strings)
    }
    w.bytes(VALUE);
    const v = m.value;
    if (v === null) w.bytes(NULL_VALUE);
    // The message's content type, not the row's: an envelope-protobuf value is binary whatever the payload.
    else if (textualCached(m.headers['content-type'] ?? m.event.contentType)) {
      w.utf8Bytes(v);
      w.bytes(UTF8_ENCODING);
    } else {
      w.byte(QUOTE);
      w.ascii(v.toString('base64'));
      w.bytes(BASE64_ENCODING);
    }
    w.bytes(TIMESTAMP);
    w.ascii(isoTimestamp(m.timestamp));
    w.bytes(EVENT_ID);
    w.string(m.event.eventId);
    w.bytes(ID);
    w.string(m.event.id);
    w.bytes(LSN);
    w.ascii(lsnText(m.event.lsn));
    w.bytes(CLOSE);
  }
  return w.buf.subarray(0, w.off);
}
