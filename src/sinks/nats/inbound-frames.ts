/**
 * The connection's inbound bytes cut into protocol frames here, in front of nats.js' parser, so
 * that the sink's PubAcks (a `MSG` on its reply subscription) are read without it. Every other
 * frame — INFO, PING, PONG, +OK, -ERR, an HMSG (a 503 "no responders" status), a MSG of another
 * subscription, a PubAck the sink does not take (an API error, an unusual form) — is handed to the
 * library's parser whole, in the order it came, so the library sees the same frames as before and
 * answers them as before. Bytes this splitter does not recognise go to the library from then on
 * (it raises its own protocol error, as it would have).
 *
 * Measured reason (relay → NATS bulk drain, --cpu-prof, docs/sinks.md): nats.js' Parser walks
 * every byte of a MSG line through a state machine, then splits the line again into four
 * subarrays (processMsgArgs) and builds a MsgImpl per message; the subscription decodes the
 * subject with TextDecoder, and the PubAck is decoded and JSON.parsed — per event, on the path
 * every event's confirmation takes (main's profile: Parser.parse 3.2 %, processMsg and
 * processMsgArgs 2.1 %, the sink's JSON.parse path 3.0 % of the relay's busy time). Here: a loop
 * to the line's end, one pass over its tokens, the payload read in place
 * (src/sinks/nats/puback-json.ts). Relay A/B with the frames written in place
 * (outbound-frames.ts): 14 – 33 % less CPU per event (docs/benchmarks.md, "NATS relay CPU").
 *
 * A frame split across socket reads is kept (as views; the reads' Buffers are not reused) until
 * the rest arrives, then cut from the joined bytes. The test (inbound-frames.test.ts) feeds the
 * same bytes to this splitter and to nats.js' Parser, split at every position.
 *
 * Installed once per connection (inboundFrames): the protocol handler's `parser` becomes a
 * property whose value is this splitter's front; the library's own Parser behind it is replaced
 * on every reconnect (ProtocolHandler.resetOutbound), which resets the splitter too.
 */
import type { NatsConnection, NatsConnectionImpl } from '@nats-io/transport-node';

/** A subscription that reads its own MSG frames (those without a reply subject). */
export interface FrameTaker {
  /**
   * The frame's subject is `buf[subject..subjectEnd)`, its payload `buf[data..dataEnd)`. True when
   * taken; false leaves the frame to the library, which hands it to the subscription's callback.
   */
  take(buf: Buffer, subject: number, subjectEnd: number, data: number, dataEnd: number): boolean;
}

const LF = 10;
const CR = 13;
const SPACE = 32;
const TAB = 9;
/** The library's limit for a message's size (Parser's MAX_64MB). */
const MAX_SIZE = 64 * 1024 * 1024;
/** #frame's answers besides a frame's end. */
const INCOMPLETE = -1;
const NOT_UNDERSTOOD = -2;

/** A byte's upper case, for the protocol's case-insensitive operation names. */
const upper = (c: number): number => (c >= 97 && c <= 122 ? c - 32 : c);
const isSpace = (c: number): boolean => c === SPACE || c === TAB || c === CR;

/** Decimal digits as the library reads them (Parser.protoParseInt): -1 for none, a non-digit, or over 15. */
export function decimal(buf: Buffer, from: number, to: number): number {
  if (to <= from || to - from > 15) return -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = buf[i]! - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/**
 * The index of the next LF from `at`, or -1. A loop, not Buffer.indexOf: lines are short (a MSG
 * line ~50 bytes), and indexOf's call cost and the number it allocates per call were more than
 * the search (a sampling heap profile: 40 bytes per frame).
 */
function lineEnd(buf: Buffer, at: number): number {
  for (let i = at; i < buf.length; i++) if (buf[i] === LF) return i;
  return -1;
}

export class FrameSplitter {
  readonly #library: (frame: Uint8Array) => void;
  readonly #takers = new Map<number, FrameTaker>();
  /** A frame's first bytes, from earlier reads; #need: the bytes it has at least, once complete. */
  #carry: Buffer[] = [];
  #carried = 0;
  #need = 0;
  /** Set on bytes not understood: the library parses everything from there on. */
  #libraryOnly = false;
  /** Bumped by reset(): a push() in progress stops cutting its (old connection's) bytes. */
  #generation = 0;
  /** The current line's tokens: start and end of each (at most 5 are read, a sixth refuses). */
  readonly #tokens = new Int32Array(12);

  /** `library` parses a frame (or, after bytes not understood, any bytes) with nats.js' Parser. */
  constructor(library: (bytes: Uint8Array) => void) {
    this.#library = library;
  }

  /** `taker` reads the MSG frames of subscription `sid`; null gives them back to the library. */
  setTaker(sid: number, taker: FrameTaker | null): void {
    if (taker) this.#takers.set(sid, taker);
    else this.#takers.delete(sid);
  }

  /** A new connection: what was carried belonged to the old one. */
  reset(): void {
    this.#carry = [];
    this.#carried = 0;
    this.#need = 0;
    this.#libraryOnly = false;
    this.#generation++;
  }

  /** One socket read. */
  push(chunk: Uint8Array): void {
    if (this.#libraryOnly) {
      this.#library(chunk);
      return;
    }
    let buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.#carried > 0) {
      this.#carry.push(buf);
      this.#carried += buf.length;
      if (this.#carried < this.#need) return;
      buf = Buffer.concat(this.#carry, this.#carried);
      this.#carry = [];
      this.#carried = 0;
    }
    const generation = this.#generation;
    const n = buf.length;
    let at = 0;
    while (at < n && generation === this.#generation) {
      const end = this.#frame(buf, at);
      if (end === INCOMPLETE) {
        this.#carry.push(buf.subarray(at));
        this.#carried = n - at;
        return;
      }
      if (end === NOT_UNDERSTOOD) {
        this.#libraryOnly = true;
        this.#library(buf.subarray(at));
        return;
      }
      at = end;
    }
  }

  /**
   * The frame at `at`: taken or handed to the library, and its end returned; or INCOMPLETE (with
   * #need set), or NOT_UNDERSTOOD.
   */
  #frame(buf: Buffer, at: number): number {
    const lf = lineEnd(buf, at);
    if (lf < 0) {
      this.#need = buf.length - at + 1;
      return INCOMPLETE;
    }
    const op = upper(buf[at]!);
    let args: number;
    if (op === 77 /* M */) {
      if (upper(buf[at + 1]!) !== 83 || upper(buf[at + 2]!) !== 71 || !isSpace(buf[at + 3]!))
        return NOT_UNDERSTOOD;
      args = at + 3;
    } else if (op === 72 /* H */) {
      if (
        upper(buf[at + 1]!) !== 77 ||
        upper(buf[at + 2]!) !== 83 ||
        upper(buf[at + 3]!) !== 71 ||
        !isSpace(buf[at + 4]!)
      )
        return NOT_UNDERSTOOD;
      args = at + 4;
    } else if (op === 80 /* P */ || op === 73 /* I */ || op === 43 /* + */ || op === 45 /* - */) {
      // PING, PONG, INFO, +OK, -ERR: one line each.
      this.#library(buf.subarray(at, lf + 1));
      return lf + 1;
    } else return NOT_UNDERSTOOD;

    // The line's tokens: subject, sid, [reply], [header size], size.
    const t = this.#tokens;
    let count = 0;
    for (let i = args; i < lf; ) {
      while (i < lf && isSpace(buf[i]!)) i++;
      if (i === lf) break;
      if (count === 6) return NOT_UNDERSTOOD;
      t[count * 2] = i;
      while (i < lf && !isSpace(buf[i]!)) i++;
      t[count * 2 + 1] = i;
      count++;
    }
    const headers = op === 72;
    if (count < (headers ? 4 : 3) || count > (headers ? 5 : 4)) return NOT_UNDERSTOOD;
    const size = decimal(buf, t[count * 2 - 2]!, t[count * 2 - 1]!);
    if (size < 0 || size > MAX_SIZE) return NOT_UNDERSTOOD;
    const data = lf + 1;
    const dataEnd = data + size;
    // The library skips whatever follows the payload up to the next LF (normally just CR LF).
    let end: number;
    if (buf[dataEnd] === CR && buf[dataEnd + 1] === LF) end = dataEnd + 2;
    else {
      const next = dataEnd < buf.length ? buf.indexOf(LF, dataEnd) : -1;
      if (next < 0) {
        this.#need = Math.max(dataEnd + 2, buf.length + 1) - at;
        return INCOMPLETE;
      }
      end = next + 1;
    }
    if (!headers && count === 3) {
      const taker = this.#takers.get(decimal(buf, t[2]!, t[3]!));
      if (taker?.take(buf, t[0]!, t[1]!, data, dataEnd)) return end;
    }
    this.#library(buf.subarray(at, end));
    return end;
  }
}

const SPLITTERS = new WeakMap<object, FrameSplitter>();

interface HasParser {
  parser: { parse(bytes: Uint8Array): void };
}

/**
 * The splitter in front of `nc`'s parser, installed on first use; null when the connection is not
 * the one this was written for (nats.js 3's ProtocolHandler with a `parser`): then the library
 * reads every frame.
 */
export function inboundFrames(nc: NatsConnection): FrameSplitter | null {
  const p = (nc as NatsConnectionImpl).protocol as unknown as HasParser | undefined;
  if (!p || typeof p.parser?.parse !== 'function') return null;
  const known = SPLITTERS.get(p);
  if (known) return known;
  let parser = p.parser;
  const splitter = new FrameSplitter((bytes) => parser.parse(bytes));
  const front = { parse: (bytes: Uint8Array) => splitter.push(bytes) };
  Object.defineProperty(p, 'parser', {
    configurable: true,
    enumerable: true,
    get: () => front,
    set: (next: HasParser['parser']) => {
      parser = next;
      splitter.reset();
    },
  });
  SPLITTERS.set(p, splitter);
  return splitter;
}
