/**
 * A JetStream PubAck read from its bytes, for what nats-server writes for a stored message: an
 * object of `stream` (a string), `seq` (a whole number), and optionally `domain` (a string) and
 * `duplicate` (true or false) — nats-server 2.9 writes `{"stream":"S", "seq":N}` and
 * `{"stream":"S", "seq":N,"duplicate": true}` by hand, newer ones through encoding/json, so the
 * reader takes any order and JSON whitespace between tokens. Anything else — an API error, a key
 * it does not know, a key twice, an escape in a string, an empty stream name, a number that is not
 * a plain whole one — gives null, and the caller takes the library's path (TextDecoder,
 * JSON.parse, and for an error parseJsResponse), so every error reaches the classifier as before.
 *
 * Measured reason: see src/sinks/nats/inbound-frames.ts (the PubAck receive path). The test
 * (puback-json.test.ts) compares the result with JSON.parse for each form, and checks that the
 * unusual ones are left to it.
 */

/** What the sink reads of a PubAck (jetstream's PubAck, as jetstream.publish() returns it). */
export interface ParsedPubAck {
  stream: string;
  domain?: string;
  seq: number;
  duplicate: boolean;
}

const bytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0));
const STREAM = bytes('stream');
const DOMAIN = bytes('domain');
const SEQ = bytes('seq');
const DUPLICATE = bytes('duplicate');
const TRUE = bytes('true');
const FALSE = bytes('false');
const QUOTE = 34;
const BACKSLASH = 92;
const OPEN = 123;
const CLOSE = 125;
const COMMA = 44;
const COLON = 58;

/** Whether `buf[at..end)` starts with `word`. */
function has(buf: Uint8Array, at: number, end: number, word: Uint8Array): boolean {
  if (at + word.length > end) return false;
  for (let i = 0; i < word.length; i++) if (buf[at + i] !== word[i]) return false;
  return true;
}

/** Whether `buf[from..to)` is `word`. */
const is = (buf: Uint8Array, from: number, to: number, word: Uint8Array): boolean =>
  to - from === word.length && has(buf, from, to, word);

/** The first index from `at` that is not JSON whitespace. */
function skip(buf: Uint8Array, at: number, end: number): number {
  while (at < end) {
    const c = buf[at]!;
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) break;
    at++;
  }
  return at;
}

/**
 * The index of the closing quote of a JSON string whose contents start at `at`, or -1 when it has
 * an escape or a control character (left to JSON.parse) or no closing quote.
 */
function stringEnd(buf: Uint8Array, at: number, end: number): number {
  for (let i = at; i < end; i++) {
    const c = buf[i]!;
    if (c === QUOTE) return i;
    if (c === BACKSLASH || c < 32) return -1;
  }
  return -1;
}

/**
 * The last stream name read, to give back the same string while the bytes are the same (a drain
 * publishes to one stream). Per module, not per connection: it is only a cache of a decoding.
 */
let lastName: Buffer = Buffer.alloc(0);
let lastNameText = '';

function nameAt(buf: Buffer, from: number, to: number): string {
  if (is(buf, from, to, lastName)) return lastNameText;
  lastName = Buffer.from(buf.subarray(from, to));
  lastNameText = buf.toString('utf8', from, to);
  return lastNameText;
}

/** The PubAck in `buf[start..end)`, or null when it is not one this reader takes (above). */
export function parsePubAck(buf: Buffer, start: number, end: number): ParsedPubAck | null {
  let at = skip(buf, start, end);
  if (buf[at] !== OPEN) return null;
  let stream: string | undefined;
  let domain: string | undefined;
  let seq = -1;
  let duplicate: boolean | undefined;
  at = skip(buf, at + 1, end);
  for (;;) {
    if (at >= end || buf[at] !== QUOTE) return null;
    const key = at + 1;
    const keyEnd = stringEnd(buf, key, end);
    if (keyEnd < 0) return null;
    at = skip(buf, keyEnd + 1, end);
    if (buf[at] !== COLON) return null;
    at = skip(buf, at + 1, end);
    if (at >= end) return null;
    if (is(buf, key, keyEnd, SEQ)) {
      if (seq >= 0) return null;
      // JSON digits (no leading zero but "0" itself); past 15 the sum may round differently
      // from JSON.parse's: left to it.
      const digits = at;
      let n = 0;
      for (; at < end; at++) {
        const d = buf[at]! - 48;
        if (d < 0 || d > 9) break;
        n = n * 10 + d;
      }
      const count = at - digits;
      if (count === 0 || count > 15 || (buf[digits] === 48 && count > 1)) return null;
      seq = n;
    } else if (is(buf, key, keyEnd, DUPLICATE)) {
      if (duplicate !== undefined) return null;
      if (has(buf, at, end, TRUE)) {
        duplicate = true;
        at += TRUE.length;
      } else if (has(buf, at, end, FALSE)) {
        duplicate = false;
        at += FALSE.length;
      } else return null;
    } else {
      const name = is(buf, key, keyEnd, STREAM);
      if (!name && !is(buf, key, keyEnd, DOMAIN)) return null;
      if (buf[at] !== QUOTE) return null;
      const valueEnd = stringEnd(buf, at + 1, end);
      if (valueEnd < 0) return null;
      if (name) {
        if (stream !== undefined || valueEnd === at + 1) return null;
        stream = nameAt(buf, at + 1, valueEnd);
      } else {
        if (domain !== undefined) return null;
        domain = buf.toString('utf8', at + 1, valueEnd);
      }
      at = valueEnd + 1;
    }
    at = skip(buf, at, end);
    if (buf[at] === COMMA) {
      at = skip(buf, at + 1, end);
      continue;
    }
    if (buf[at] !== CLOSE || skip(buf, at + 1, end) !== end) return null;
    break;
  }
  if (stream === undefined || seq < 0) return null;
  duplicate = duplicate === true;
  return domain === undefined ? { stream, seq, duplicate } : { stream, domain, seq, duplicate };
}
