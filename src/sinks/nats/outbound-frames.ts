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
 * Measured reason: see docs/sinks.md (NATS relay CPU): per message, nc.publish() encoded its line
 * with TextEncoder (an ArrayBuffer per call), and the earlier hpubFrame still made a Buffer per
 * message, which the outbound buffer kept in an array and copied once more into one block before
 * the socket write (DataBuffer.pack). The test (pub-acks.test.ts) compares the bytes with what
 * nc.publish() hands to sendCommand.
 */
import type { NatsConnectionImpl } from '@nats-io/transport-node';

type Protocol = NatsConnectionImpl['protocol'];

const SLAB = 64 * 1024;

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
   * One HPUB frame, its reply subject `replyPrefix` + `token` (one string fewer per message);
   * `headers` is the header block (`hlen` bytes in UTF-8, or its bytes).
   */
  hpub(
    subject: string,
    replyPrefix: string,
    token: number | string,
    headers: string | Uint8Array,
    hlen: number,
    data: Uint8Array,
  ): void {
    const len = hlen + data.length;
    const line = `HPUB ${subject} ${replyPrefix}${token} ${hlen} ${len}\r\n`;
    const most = line.length * 3 + len + 2;
    if (this.#end + most > this.#slab.length) this.#renew(most);
    const slab = this.#slab;
    let at = this.#end;
    if (at === this.#start) queueMicrotask(this.#handOver);
    at += slab.write(line, at);
    if (typeof headers === 'string') at += slab.write(headers, at);
    else {
      slab.set(headers, at);
      at += hlen;
    }
    slab.set(data, at);
    at += data.length;
    slab[at++] = 13;
    slab[at++] = 10;
    this.#end = at;
    const p = this.#p;
    p.outMsgs++;
    p.outBytes += len;
    if (at - this.#start >= p.pendingLimit) this.flush();
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
