/**
 * A message's NATS header block ("NATS/1.0\r\nname: value\r\n…\r\n\r\n"), built in one pass from
 * the row's headers and the Nats-Msg-Id, instead of nats.js' headers() (MsgHdrsImpl) with one
 * set() per header.
 *
 * Measured reason (bench/sinks.ts bulk drain, --cpu-prof): MsgHdrsImpl.set() deletes then appends,
 * each listing and filtering every key so far (quadratic in the headers), builds the canonical
 * form of the name through an array and String.fromCharCode(...), compiles a fresh /[\r\n]/ per
 * value; encode() then joins the text and runs TextEncoder — 6.6 % of the relay's busy time
 * (≈ 3.8 µs per event) for six headers per event.
 *
 * The bytes are MsgHdrsImpl's for the same headers set in the same order (exact-match names, as
 * set() without a match mode keeps them; values trimmed; the test compares the two), and the same
 * names and values are refused: a name with ':' or a byte outside '!'..'~', a value with CR or LF.
 * nats.js' publish() only calls encode() on the headers it is given (ProtocolHandler.publish), so
 * the block travels as an object with that one method (made only when the library's path is
 * taken); the sink's own frames (src/sinks/nats/outbound-frames.ts) write its text.
 */
import type { MsgHdrs } from '@nats-io/transport-node';

const LEAD = 'NATS/1.0';

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

/** A header block: its text, and the encode() nats.js' publish() calls. */
export class HeaderBlock {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  encode(): Uint8Array {
    return Buffer.from(this.text);
  }
}

/** The header block of one message: the row's headers in their order, then Nats-Msg-Id. */
export function headerBlock(headers: Record<string, string>, msgId: string): HeaderBlock & MsgHdrs {
  let s = LEAD;
  for (const k in headers) {
    if (!checkedNames.has(k)) {
      if (RESERVED.test(k)) throw new Error(`header ${JSON.stringify(k)} is reserved by NATS JetStream`);
      checkName(k);
      if (checkedNames.size < MAX_CHECKED_NAMES) checkedNames.add(k);
    }
    s += `\r\n${k}: ${value(headers[k]!)}`;
  }
  s += `\r\nNats-Msg-Id: ${value(msgId)}\r\n\r\n`;
  return new HeaderBlock(s) as HeaderBlock & MsgHdrs;
}

function checkName(k: string): void {
  for (let i = 0; i < k.length; i++) {
    const c = k.charCodeAt(i);
    if (c === 58 || c < 33 || c > 126)
      throw new Error(`'${k[i]}' is not a valid character in a header name (${JSON.stringify(k)})`);
  }
}

/** The value as MsgHdrsImpl keeps it (trimmed); trim() only when an end is not plain ASCII. */
function value(v: string): string {
  // indexOf, not /[\r\n]/.test: a regular expression run per header value was 0.5 – 0.7 % of the
  // relay's busy time in a bulk drain (--cpu-prof).
  if (v.indexOf('\r') !== -1 || v.indexOf('\n') !== -1)
    throw new Error('header values cannot contain \\r or \\n');
  const n = v.length;
  if (n === 0) return v;
  const a = v.charCodeAt(0);
  const z = v.charCodeAt(n - 1);
  return a > 32 && a < 127 && z > 32 && z < 127 ? v : v.trim();
}
