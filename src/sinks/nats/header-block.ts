/**
 * A message's NATS header block ("NATS/1.0\r\nname: value\r\n…\r\n\r\n") from the row's headers
 * and the Nats-Msg-Id, instead of nats.js' headers() (MsgHdrsImpl) with one set() per header.
 *
 * Measured reason (bench/sinks.ts bulk drain, --cpu-prof): MsgHdrsImpl.set() deletes then appends,
 * each listing and filtering every key so far (quadratic in the headers), builds the canonical
 * form of the name through an array and String.fromCharCode(...), compiles a fresh /[\r\n]/ per
 * value; encode() then joins the text and runs TextEncoder — 6.6 % of the relay's busy time
 * (≈ 3.8 µs per event) for six headers per event.
 *
 * The sink's path writes the block's bytes straight into its outgoing frame (write(), called by
 * src/sinks/nats/outbound-frames.ts), checking each name and value as it copies them: building
 * the block as a string first (one string per piece, then a flat copy, then its UTF-8 bytes) was
 * 40 % of the bytes the NATS sink allocated per event (a sampling heap profile of the sink's
 * publish loop, garbage included), work for the garbage collector on every event. encode() —
 * what nats.js' publish() calls, when the sink takes the library's path — builds the same bytes
 * from a string.
 *
 * The bytes are MsgHdrsImpl's for the same headers set in the same order (exact-match names, as
 * set() without a match mode keeps them; values trimmed; the test compares the three), and the
 * same names and values are refused (HeaderError, from write() or encode()): a name with ':' or a
 * byte outside '!'..'~', a value with CR or LF.
 */
import type { MsgHdrs } from '@nats-io/transport-node';

const LEAD = 'NATS/1.0';
const MSG_ID = '\r\nNats-Msg-Id: ';

/** A header the block cannot carry (the sink makes it the event's permanent INVALID_MESSAGE). */
export class HeaderError extends Error {
  override name = 'HeaderError';
}

/**
 * Rows are hostile input: a row header named like a JetStream control header (Nats-Rollup purges
 * a subject, Nats-Expected-* makes every publish fail, Nats-Msg-Id defeats deduplication) is
 * refused (the sink makes it the event's permanent INVALID_MESSAGE), never passed on.
 */
const RESERVED = /^nats-/i;

/**
 * Header names already found valid and not reserved: the same few names come with every event.
 * Bounded: past the cap, further names are checked each time.
 */
const checkedNames = new Set<string>();
const MAX_CHECKED_NAMES = 1024;

/** The header block of one message: the row's headers in their order, then Nats-Msg-Id. */
export class HeaderBlock {
  readonly headers: Record<string, string>;
  readonly msgId: string;

  constructor(headers: Record<string, string>, msgId: string) {
    this.headers = headers;
    this.msgId = msgId;
  }

  /** The block's bytes, from its text (nats.js' publish() calls this on the library's path). */
  encode(): Uint8Array {
    let s = LEAD;
    for (const k in this.headers) {
      checkName(k);
      s += `\r\n${k}: ${value(this.headers[k]!)}`;
    }
    s += `${MSG_ID}${value(this.msgId)}\r\n\r\n`;
    return Buffer.from(s);
  }

  /** The most bytes write() can take (every character of a value as 3 bytes of UTF-8). */
  bound(): number {
    let n = LEAD.length + MSG_ID.length + 4 + this.msgId.length * 3;
    for (const k in this.headers) n += 4 + k.length + this.headers[k]!.length * 3;
    return n;
  }

  /** Writes the block into `buf` at `at` (room for bound() bytes); returns its end. */
  write(buf: Buffer, at: number): number {
    at = ascii(buf, at, LEAD);
    for (const k in this.headers) {
      checkName(k);
      buf[at++] = 13;
      buf[at++] = 10;
      at = ascii(buf, at, k);
      buf[at++] = 58;
      buf[at++] = 32;
      at = writeValue(buf, at, this.headers[k]!);
    }
    at = ascii(buf, at, MSG_ID);
    at = writeValue(buf, at, this.msgId);
    buf[at++] = 13;
    buf[at++] = 10;
    buf[at++] = 13;
    buf[at++] = 10;
    return at;
  }
}

/** The block for nats.js' publish() too (it only calls encode(): ProtocolHandler.publish). */
export function headerBlock(headers: Record<string, string>, msgId: string): HeaderBlock & MsgHdrs {
  return new HeaderBlock(headers, msgId) as HeaderBlock & MsgHdrs;
}

function checkName(k: string): void {
  if (checkedNames.has(k)) return;
  if (RESERVED.test(k)) throw new HeaderError(`header ${JSON.stringify(k)} is reserved by NATS JetStream`);
  for (let i = 0; i < k.length; i++) {
    const c = k.charCodeAt(i);
    if (c === 58 || c < 33 || c > 126)
      throw new HeaderError(`'${k[i]}' is not a valid character in a header name (${JSON.stringify(k)})`);
  }
  if (checkedNames.size < MAX_CHECKED_NAMES) checkedNames.add(k);
}

/** Copies a string known to be ASCII (a checked name, a constant, an inbox) into `buf` at `at`. */
export function ascii(buf: Buffer, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) buf[at + i] = s.charCodeAt(i);
  return at + s.length;
}

/**
 * A value as MsgHdrsImpl keeps it, copied character by character while it is printable ASCII
 * (spaces inside); anything else — a space or control character at an end (trimmed), CR or LF
 * (refused), non-ASCII (UTF-8) — is written from the string path's value().
 */
function writeValue(buf: Buffer, at: number, v: string): number {
  const n = v.length;
  for (let i = 0; i < n; i++) {
    const c = v.charCodeAt(i);
    if (c > 32 && c < 127) buf[at + i] = c;
    else if (c === 32 && i > 0 && i < n - 1) buf[at + i] = c;
    else return at + buf.write(value(v), at);
  }
  return at + n;
}

/** The value as MsgHdrsImpl keeps it (trimmed); trim() only when an end is not plain ASCII. */
function value(v: string): string {
  // indexOf, not /[\r\n]/.test: a regular expression run per header value was 0.5 – 0.7 % of the
  // relay's busy time in a bulk drain (--cpu-prof).
  if (v.indexOf('\r') !== -1 || v.indexOf('\n') !== -1)
    throw new HeaderError('header values cannot contain \\r or \\n');
  const n = v.length;
  if (n === 0) return v;
  const a = v.charCodeAt(0);
  const z = v.charCodeAt(n - 1);
  return a > 32 && a < 127 && z > 32 && z < 127 ? v : v.trim();
}
