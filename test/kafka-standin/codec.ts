// Big-endian primitives of the Kafka wire protocol (non-flexible versions only: every API version
// the stand-in advertises predates KIP-482 tagged fields, so there are no compact types here).

/** Malformed input from a client. A real broker closes the connection on these; so does the server. */
export class ProtocolError extends Error {
  override name = 'ProtocolError';
}

const TWO_32 = 2 ** 32;

export class Reader {
  readonly buf: Buffer;
  pos: number;
  readonly end: number;

  constructor(buf: Buffer, pos = 0, end = buf.length) {
    this.buf = buf;
    this.pos = pos;
    this.end = end;
  }

  remaining(): number {
    return this.end - this.pos;
  }

  // Buffer's own bounds checks stop at the end of the whole buffer, not at `end` of a sub-range.
  private need(n: number): void {
    if (n < 0 || this.pos + n > this.end) {
      throw new ProtocolError(`truncated input: need ${n} bytes at ${this.pos}, have ${this.end - this.pos}`);
    }
  }

  int8(): number {
    this.need(1);
    return this.buf.readInt8(this.pos++);
  }

  bool(): boolean {
    return this.int8() !== 0;
  }

  int16(): number {
    this.need(2);
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  int32(): number {
    this.need(4);
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  uint32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  /** Offsets, ids and timestamps all fit in 2^53 in practice; two int32 reads avoid BigInt churn. */
  int64(): number {
    this.need(8);
    const hi = this.buf.readInt32BE(this.pos);
    const lo = this.buf.readUInt32BE(this.pos + 4);
    this.pos += 8;
    return hi * TWO_32 + lo;
  }

  string(): string {
    const s = this.nullableString();
    if (s === null) throw new ProtocolError('null where a non-nullable string is required');
    return s;
  }

  nullableString(): string | null {
    const len = this.int16();
    if (len < 0) return null;
    this.need(len);
    const s = this.buf.toString('utf8', this.pos, this.pos + len);
    this.pos += len;
    return s;
  }

  bytes(): Buffer {
    return this.nullableBytes() ?? Buffer.alloc(0);
  }

  nullableBytes(): Buffer | null {
    const len = this.int32();
    if (len < 0) return null;
    return this.raw(len);
  }

  /** A view, not a copy: callers that keep it beyond the request must copy it themselves. */
  raw(len: number): Buffer {
    this.need(len);
    const b = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return b;
  }

  array<T>(item: (r: Reader) => T): T[] {
    return this.nullableArray(item) ?? [];
  }

  nullableArray<T>(item: (r: Reader) => T): T[] | null {
    const n = this.int32();
    if (n < 0) return null;
    // Every element takes at least one byte; reject absurd counts before allocating.
    if (n > this.remaining()) throw new ProtocolError(`array length ${n} exceeds remaining input`);
    const out = new Array<T>(n);
    for (let i = 0; i < n; i++) out[i] = item(this);
    return out;
  }

  /** Unsigned LEB128 up to 64 bits, as a double (exact up to 2^53, which covers every real field). */
  private uvarlong(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      this.need(1);
      const b = this.buf[this.pos++]!;
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw new ProtocolError('varint longer than 10 bytes');
  }

  /** Zig-zag signed varint/varlong (record fields use both; the encoding is the same). */
  varint(): number {
    const u = this.uvarlong();
    return u % 2 === 0 ? u / 2 : -(u + 1) / 2;
  }

  varBytes(): Buffer | null {
    const len = this.varint();
    if (len < 0) return null;
    return this.raw(len);
  }

  varString(): string | null {
    const b = this.varBytes();
    return b === null ? null : b.toString('utf8');
  }
}

/**
 * Response builder. Big payloads (stored record batches in Fetch responses) are kept as references
 * instead of copied, so a response is a list of buffers handed to the socket as-is.
 */
export class Writer {
  private readonly chunks: Buffer[] = [];
  private flushed = 0;
  private buf: Buffer;
  private pos = 0;

  constructor(initialSize = 256) {
    this.buf = Buffer.allocUnsafe(initialSize);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    this.flushScratch();
    this.buf = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
  }

  private flushScratch(): void {
    if (this.pos === 0) return;
    this.chunks.push(this.buf.subarray(0, this.pos));
    this.flushed += this.pos;
    this.buf = this.buf.subarray(this.pos);
    this.pos = 0;
  }

  get length(): number {
    return this.flushed + this.pos;
  }

  int8(v: number): this {
    this.ensure(1);
    this.buf.writeInt8(v, this.pos);
    this.pos += 1;
    return this;
  }

  bool(v: boolean): this {
    return this.int8(v ? 1 : 0);
  }

  int16(v: number): this {
    this.ensure(2);
    this.buf.writeInt16BE(v, this.pos);
    this.pos += 2;
    return this;
  }

  int32(v: number): this {
    this.ensure(4);
    this.buf.writeInt32BE(v, this.pos);
    this.pos += 4;
    return this;
  }

  int64(v: number): this {
    if (!Number.isSafeInteger(v)) throw new RangeError(`int64 value ${v} is not a safe integer`);
    this.ensure(8);
    const hi = Math.floor(v / TWO_32);
    this.buf.writeInt32BE(hi, this.pos);
    this.buf.writeUInt32BE(v - hi * TWO_32, this.pos + 4);
    this.pos += 8;
    return this;
  }

  string(s: string): this {
    return this.nullableString(s);
  }

  nullableString(s: string | null): this {
    if (s === null) return this.int16(-1);
    const len = Buffer.byteLength(s);
    this.int16(len);
    this.ensure(len);
    this.pos += this.buf.write(s, this.pos, 'utf8');
    return this;
  }

  bytes(b: Buffer | null): this {
    if (b === null) return this.int32(-1);
    this.int32(b.length);
    return this.raw(b);
  }

  /** Appends bytes; large ones by reference (they must not be mutated until the response is sent). */
  raw(b: Buffer): this {
    if (b.length >= 1024) {
      this.flushScratch();
      this.chunks.push(b);
      this.flushed += b.length;
      return this;
    }
    this.ensure(b.length);
    b.copy(this.buf, this.pos);
    this.pos += b.length;
    return this;
  }

  array<T>(items: readonly T[], item: (w: Writer, v: T) => void): this {
    this.int32(items.length);
    for (const v of items) item(this, v);
    return this;
  }

  toBuffers(): Buffer[] {
    this.flushScratch();
    return this.chunks.slice();
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.toBuffers());
  }
}
