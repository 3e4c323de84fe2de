/**
 * The sink's HPUB frames written back to back into one slab of memory and handed to the
 * connection's outbound buffer (ProtocolHandler.sendCommand: the library's buffering and
 * flushing) as one Uint8Array per run of frames, instead of a Buffer per message.
 *
 * A frame is the bytes nc.publish(subject, data, { reply, headers }) writes
 * (ProtocolHandler.publish): `HPUB <subject> <reply> <header bytes> <total bytes>\r\n<headers><data>\r\n`.
 * A run is handed over at the end of the current microtask checkpoint (queueMicrotask, as the
 * library schedules its own flush), or at once when it reaches the library's inline-flush size
 * (pendingLimit, 32 KiB), so the library writes to the socket when it would have. Bytes once
 * handed over are never written again (a full slab is replaced, not reused): the socket may still
 * hold them.
 *
 * Measured reason (docs/sinks.md, "NATS: PubAcks read from the connection's bytes"): nc.publish()
 * encoded each line with TextEncoder (an ArrayBuffer per call), and the earlier hpubFrame still
 * made a Buffer and two strings per message, which the outbound buffer kept in an array and
 * copied once more into a new zeroed block before the socket write (DataBuffer.pack: 2.5 % of
 * the relay's busy time; hpubFrame 2.4 %, the header block's string 1.8 % and 40 % of the sink's
 * allocations). Relay A/B: 14 – 33 % less CPU per event with the PubAck reader
 * (inbound-frames.ts). The test (pub-acks.test.ts) compares the bytes with what nc.publish()
 * hands to sendCommand.
 */
import type { NatsConnectionImpl } from '@nats-io/transport-node';
import { ascii, type HeaderBlock } from './header-block.ts';

type Protocol = NatsConnectionImpl['protocol'];

const SLAB = 64 * 1024;
/** A line's bytes besides its subject and reply prefix: "HPUB", 4 separators, CR LF, 3 numbers. */
const LINE_MOST = 4 + 4 + 2 + 3 * 16;

/** Copies a string as UTF-8: by character while it is ASCII, else Buffer.write. */
function text(buf: Buffer, at: number, s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 127) return at + buf.write(s, at);
    buf[at + i] = c;
  }
  return at + s.length;
}

/** A whole number ≥ 0 in decimal digits. */
function writeDecimal(buf: Buffer, at: number, n: number): number {
  let digits = 1;
  for (let x = n; x >= 10; x = Math.floor(x / 10)) digits++;
  for (let i = at + digits - 1, x = n; i >= at; i--, x = Math.floor(x / 10)) buf[i] = 48 + (x % 10);
  return at + digits;
}

export class OutboundFrames {
  readonly #p: Protocol;
  #slab = Buffer.allocUnsafeSlow(SLAB);
  /** The first byte not handed over yet, and the next byte to write. */
  #start = 0;
  #end = 0;
  readonly #handOver = () => this.flush();

  constructor(p: Protocol) {
    this.#p = p;
  }

  /**
   * One HPUB frame, its reply subject `replyPrefix` + `token`, its header block written in place
   * (a HeaderBlock) or copied (bytes). False, with nothing written, when the frame is over the
   * server's max_payload (the caller then takes nc.publish(), which raises the library's error);
   * a HeaderError from the block leaves nothing written either.
   *
   * The block goes first, after room for the longest line, and the line then before it (its
   * lengths known), moved up to the frame's start: no string per message.
   */
  hpub(
    subject: string,
    replyPrefix: string,
    token: number,
    headers: HeaderBlock | Uint8Array,
    data: Uint8Array,
  ): boolean {
    const room = LINE_MOST + subject.length * 3 + replyPrefix.length;
    const most = room + (headers instanceof Uint8Array ? headers.length : headers.bound()) + data.length + 2;
    if (this.#end + most > this.#slab.length) this.#renew(most);
    const slab = this.#slab;
    const start = this.#end;
    const blockAt = start + room;
    let blockEnd: number;
    if (headers instanceof Uint8Array) {
      slab.set(headers, blockAt);
      blockEnd = blockAt + headers.length;
    } else blockEnd = headers.write(slab, blockAt);
    const hlen = blockEnd - blockAt;
    const len = hlen + data.length;
    if (len > (this.#p.info?.max_payload ?? 0)) return false;
    // HPUB <subject> <reply> <header bytes> <total bytes>\r\n
    let at = ascii(slab, start, 'HPUB ');
    at = text(slab, at, subject);
    slab[at++] = 32;
    at = ascii(slab, at, replyPrefix);
    at = writeDecimal(slab, at, token);
    slab[at++] = 32;
    at = writeDecimal(slab, at, hlen);
    slab[at++] = 32;
    at = writeDecimal(slab, at, len);
    slab[at++] = 13;
    slab[at++] = 10;
    slab.copyWithin(at, blockAt, blockEnd);
    at += hlen;
    slab.set(data, at);
    at += data.length;
    slab[at++] = 13;
    slab[at++] = 10;
    if (start === this.#start) queueMicrotask(this.#handOver);
    this.#end = at;
    const p = this.#p;
    p.outMsgs++;
    p.outBytes += len;
    if (at - this.#start >= p.pendingLimit) this.flush();
    return true;
  }

  /**
   * Hands what was written to the connection's outbound buffer, and has the library write it out
   * now (flushPending: what its own microtask or inline flush calls; it writes nothing while
   * disconnected). At once rather than beside the next run: with two buffers or more the library
   * copies them into a new, zeroed one first (DataBuffer.pack), 3 % of the relay's busy time.
   */
  flush(): void {
    if (this.#end === this.#start) return;
    const run = this.#slab.subarray(this.#start, this.#end);
    this.#start = this.#end;
    this.#p.sendCommand(run);
    (this.#p as unknown as { flushPending(): void }).flushPending();
  }

  #renew(most: number): void {
    this.flush();
    this.#slab = Buffer.allocUnsafeSlow(Math.max(SLAB, most));
    this.#start = 0;
    this.#end = 0;
  }
}
