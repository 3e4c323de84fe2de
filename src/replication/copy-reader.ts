/**
 * Splits the bytes of a replication connection into the server's messages while the copy
 * stream runs (protocol.html, "Message Formats": a type byte, then an int32 length that counts
 * itself). CopyData ('d') goes to `onCopyData` as the bytes it arrived in and its place in them
 * (`bytes[start, end)`: no view to allocate per message); every other
 * message (CopyBothResponse, ErrorResponse, NoticeResponse, CopyDone, CommandComplete,
 * ReadyForQuery, …) goes, whole and in order, to `forward` — pg's own parser, so the query and
 * its errors end as before.
 *
 * Why: pg's parser makes a message object and a Buffer view per CopyData and emits it through an
 * EventEmitter, and it reuses its buffer across socket reads, so a value read from a message had
 * to be copied before the next one. Here a complete message is a view of the socket's chunk —
 * Node allocates a new one per read — or, when it spans reads, of a buffer allocated for it
 * alone; no byte is ever written twice, so a view stays valid for as long as anyone holds it
 * (`stable`: the decoder keeps a bytea as a view of its message instead of copying it).
 */
export class CopyReader {
  readonly stable = true;
  readonly #onCopyData: (bytes: Buffer, start: number, end: number) => void;
  readonly #forward: (bytes: Buffer) => void;
  /** A message that spans socket reads: its bytes so far (the 5-byte header first, then all of it). */
  #partial: Buffer | null = null;
  #filled = 0;

  constructor(
    onCopyData: (bytes: Buffer, start: number, end: number) => void,
    forward: (bytes: Buffer) => void,
  ) {
    this.#onCopyData = onCopyData;
    this.#forward = forward;
  }

  push(chunk: Buffer): void {
    let off = 0;
    if (this.#partial) {
      off = this.#fill(chunk);
      if (this.#partial) return; // the chunk ended inside the message
    }
    let forwardFrom = -1;
    while (off + HEADER <= chunk.length) {
      const end = off + 1 + messageLength(chunk, off);
      if (end > chunk.length) break;
      if (chunk[off] === COPY_DATA) {
        if (forwardFrom >= 0) {
          this.#forward(chunk.subarray(forwardFrom, off));
          forwardFrom = -1;
        }
        this.#onCopyData(chunk, off + HEADER, end);
      } else if (forwardFrom < 0) forwardFrom = off;
      off = end;
    }
    if (forwardFrom >= 0) this.#forward(chunk.subarray(forwardFrom, off));
    if (off < chunk.length) {
      this.#partial = Buffer.allocUnsafe(HEADER);
      this.#filled = 0;
      this.#fill(chunk.subarray(off));
    }
  }

  /** Adds the chunk's first bytes to the partial message; returns how many it took. Dispatches it once whole. */
  #fill(chunk: Buffer): number {
    let taken = 0;
    let partial = this.#partial!;
    if (this.#filled < HEADER) {
      const n = Math.min(HEADER - this.#filled, chunk.length);
      chunk.copy(partial, this.#filled, 0, n);
      this.#filled += n;
      taken = n;
      if (this.#filled < HEADER) return taken;
      const whole = Buffer.allocUnsafe(1 + messageLength(partial, 0));
      partial.copy(whole, 0, 0, HEADER);
      this.#partial = partial = whole;
    }
    const n = Math.min(partial.length - this.#filled, chunk.length - taken);
    chunk.copy(partial, this.#filled, taken, taken + n);
    this.#filled += n;
    taken += n;
    if (this.#filled === partial.length) {
      this.#partial = null;
      if (partial[0] === COPY_DATA) this.#onCopyData(partial, HEADER, partial.length);
      else this.#forward(partial);
    }
    return taken;
  }
}

/** The length field of the message at `off` (it counts itself: at least 4). */
function messageLength(b: Buffer, off: number): number {
  const len = b.readUInt32BE(off + 1);
  if (len < 4)
    throw new Error(`malformed message from the server: type 0x${b[off]!.toString(16)}, length ${len}`);
  return len;
}

const COPY_DATA = 0x64; // 'd'
/** Type byte and length. */
const HEADER = 5;
