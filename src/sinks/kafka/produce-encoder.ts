import { crc32c } from './crc32c.ts';
import type { Codec } from './kafka-codecs.ts';

/**
 * The body of a Kafka Produce request (versions 3–7: one record batch, magic 2, per partition),
 * encoded in two passes into one buffer of the exact size: the same bytes kafkajs' own encoder
 * writes (produce/v3/request.js, recordBatch/v0, record/v0, header/v0), without its
 * per-record and per-header zero-filled 512-byte buffers, its per-varint arrays, its buffers
 * grown by doubling and its byte-at-a-time CRC-32C. A test compares both byte for byte.
 *
 * Only the value types the relay sends (key and value: string, Buffer or null; header values:
 * string or Buffer; timestamps within ±2^31 ms of the batch's first) are encoded here:
 * encodeProduceBody returns null for anything else, and the caller falls back to kafkajs'
 * encoder. Compressed batches (a `codec`, src/sinks/kafka/kafka-codecs.ts): each partition's records
 * are written into a buffer of their exact size, compressed, and the compressed bytes copied
 * into the batch (codec id in the attributes, the CRC over the compressed batch) — kafkajs'
 * recordBatch/v0 layout, whose bytes a test compares for each codec. Measured (2026-11-25, a
 * 1,800-event bulk batch of ~560-byte records, one partition, same codecs, two runs on the
 * shared 2-core machine at load 16–25): 5.6–11.7 µs per event here against 37–52 µs for
 * kafkajs' compressed path, which builds every record with its slow encoder before compressing.
 */

/** A message as kafkajs hands it to the Produce request (`Message` of kafkajs' types). */
export interface ProduceMessage {
  key?: unknown;
  value?: unknown;
  headers?: unknown;
  timestamp?: unknown;
}

export interface ProduceTopicData {
  topic: string;
  partitions: { partition: number; firstSequence?: number; messages: ProduceMessage[] }[];
}

/** 64-bit values as kafkajs passes them: its Long (a BigInt inside), a number or a numeric string. */
type Int64 = { value: bigint } | number | string | bigint;

export interface ProduceArgs {
  acks: number;
  timeout: number;
  transactionalId?: string | null;
  producerId: Int64;
  producerEpoch: number;
  topicData: ProduceTopicData[];
}

const TRANSACTIONAL = 16;
const MAGIC = 2;
/** Batch header after the length field: leader epoch, magic, crc, attributes … first sequence, record count. */
const BATCH_HEADER = 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;

/**
 * The last numeric string toBigInt converted, and its value: kafkajs passes the producer id as a
 * string, the same one on every request of a producer (a regular expression and a BigInt per
 * request otherwise: live mode sends a request per commit).
 */
let lastString = '';
let lastValue: bigint | null = null;

function toBigInt(v: Int64): bigint | null {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return Number.isSafeInteger(v) ? BigInt(v) : null;
  if (typeof v === 'string') {
    if (v !== lastString) {
      lastValue = /^-?\d{1,19}$/.test(v) ? BigInt(v) : null;
      lastString = v;
    }
    return lastValue;
  }
  if (v !== null && typeof v === 'object' && typeof v.value === 'bigint') return v.value;
  return null;
}

/** Bytes of a zig-zag varint of an int32. */
function sizeOfVarInt(v: number): number {
  let u = ((v << 1) ^ (v >> 31)) >>> 0;
  let n = 1;
  while (u >= 0x80) {
    u >>>= 7;
    n++;
  }
  return n;
}

/** Strings up to this long are measured and copied by JavaScript loops (cheaper than a native call). */
const SHORT = 64;

/** UTF-8 bytes of a string: its length when it is short and ASCII, else Buffer.byteLength. */
function utf8Length(s: string): number {
  const n = s.length;
  if (n > SHORT) return Buffer.byteLength(s);
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s);
  return n;
}

/**
 * The UTF-8 lengths of a partition's strings (keys, values, header names and values), in the
 * order writeRecords writes them: planPartition measures each string once and writeRecords reads
 * the length back instead of measuring it again (issue 39: one scan per string less).
 */
class Lengths {
  a: Int32Array;
  n = 0;
  /** writeRecords' cursor. */
  at = 0;

  constructor(capacity: number) {
    this.a = new Int32Array(Math.max(16, capacity));
  }

  push(len: number): number {
    if (this.n === this.a.length) {
      const a = new Int32Array(this.a.length * 2);
      a.set(this.a);
      this.a = a;
    }
    this.a[this.n++] = len;
    return len;
  }
}

/** Bytes of a varint-length-prefixed value (null: the length -1 alone); a string's length is logged. */
function sizeOfVarBytes(v: unknown, lengths: Lengths): number {
  if (v === null || v === undefined) return 1;
  const len = typeof v === 'string' ? lengths.push(utf8Length(v)) : (v as Buffer).length;
  return sizeOfVarInt(len) + len;
}

const isBytes = (v: unknown) => typeof v === 'string' || Buffer.isBuffer(v);
const isNullableBytes = (v: unknown) => v === null || v === undefined || isBytes(v);

/** Absent, or an object of headers (its values are checked as they are measured: planPartition). */
function headersObject(h: unknown): boolean {
  return h === undefined || (h !== null && typeof h === 'object' && !Array.isArray(h));
}

class Writer {
  readonly buf: Buffer;
  off = 0;

  /** `size` bytes to write, after `headroom` bytes left for the caller (buf is a view past them). */
  constructor(size: number, headroom = 0) {
    this.buf =
      headroom > 0 ? Buffer.allocUnsafe(headroom + size).subarray(headroom) : Buffer.allocUnsafe(size);
  }

  int8(v: number): void {
    this.buf[this.off++] = v;
  }

  int16(v: number): void {
    this.off = this.buf.writeInt16BE(v, this.off);
  }

  int32(v: number): void {
    this.off = this.buf.writeInt32BE(v, this.off);
  }

  int64(v: bigint): void {
    this.off = this.buf.writeBigInt64BE(BigInt.asIntN(64, v), this.off);
  }

  varInt(v: number): void {
    let u = ((v << 1) ^ (v >> 31)) >>> 0;
    const b = this.buf;
    while (u >= 0x80) {
      b[this.off++] = (u & 0x7f) | 0x80;
      u >>>= 7;
    }
    b[this.off++] = u;
  }

  /** Int16-length string (null: -1). */
  string(v: string | null | undefined): void {
    if (v === null || v === undefined) {
      this.int16(-1);
      return;
    }
    const len = utf8Length(v);
    this.int16(len);
    this.utf8(v, len);
  }

  /** `len` UTF-8 bytes of `v` (utf8Length's): a short ASCII string by a loop, anything else natively. */
  utf8(v: string, len: number): void {
    if (len === v.length && len <= SHORT) {
      const b = this.buf;
      let o = this.off;
      for (let i = 0; i < len; i++) b[o++] = v.charCodeAt(i);
      this.off = o;
    } else this.off += this.buf.write(v, this.off, len, 'utf8');
  }

  /** Varint-length bytes (null: -1); a string as UTF-8, its length the next one `lengths` logged. */
  varBytes(v: unknown, lengths: Lengths): void {
    if (v === null || v === undefined) {
      this.varInt(-1);
      return;
    }
    if (typeof v === 'string') {
      const len = lengths.a[lengths.at++]!;
      this.varInt(len);
      this.utf8(v, len);
    } else {
      const b = v as Buffer;
      this.varInt(b.length);
      // TypedArray#set, not Buffer#copy: the same bytes without copy's argument checks in
      // JavaScript (_copyActual: 14 % of this encoder's time with 500-byte values, issue 39).
      this.buf.set(b, this.off);
      this.off += b.length;
    }
  }
}

/**
 * The first and last timestamp as kafkajs picks them: Array.prototype.sort's order, i.e. compared
 * as strings. Numbers of 13 digits (ms from 2001-09 to 2286) compare as strings do, without a
 * string per message.
 */
function timestampRange(messages: ProduceMessage[], now: number): [unknown, unknown] {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  let numeric = true;
  for (let i = 0; i < messages.length; i++) {
    const t = messages[i]!.timestamp;
    if (t === null || t === undefined) continue;
    if (typeof t !== 'number' || !(t >= 1e12 && t < 1e13)) {
      numeric = false;
      break;
    }
    if (t < lo) lo = t;
    if (t > hi) hi = t;
  }
  if (numeric) return lo === Number.POSITIVE_INFINITY ? [now, now] : [lo, hi];
  let first: unknown;
  let last: unknown;
  let firstS = '';
  let lastS = '';
  for (let i = 0; i < messages.length; i++) {
    const t = messages[i]!.timestamp;
    if (t === null || t === undefined) continue;
    const s = String(t);
    if (first === undefined || s < firstS) {
      first = t;
      firstS = s;
    }
    if (last === undefined || s >= lastS) {
      last = t;
      lastS = s;
    }
  }
  return first === undefined ? [now, now] : [first, last];
}

/**
 * The last string measured in each header slot (the name and the value of a record's n-th header:
 * slots 2n and 2n + 1) and its UTF-8 length. The relay's records repeat their header names, in
 * the same order, and most values (event type, aggregate type, content type: one string each,
 * replication/decoder.ts TextMemo): a repeated string is one comparison — the same string object,
 * or a different one mostly at its first characters — instead of a scan of its characters
 * (issue 39: 7 – 13 % of this encoder's time per relay record, docs/benchmarks.md).
 */
const SLOTS = 32;
const slotString: (string | undefined)[] = new Array(SLOTS).fill(undefined);
const slotBytes = new Int32Array(SLOTS);

/** utf8Length(s), remembered for header slot j. */
function slotLength(s: string, j: number): number {
  if (j >= SLOTS) return utf8Length(s);
  if (s === slotString[j]) return slotBytes[j]!;
  const n = utf8Length(s);
  slotString[j] = s;
  slotBytes[j] = n;
  return n;
}

interface PartitionPlan {
  firstTimestamp: bigint;
  maxTimestamp: bigint;
  deltas: Int32Array;
  bodySizes: Int32Array;
  headerCounts: Int32Array;
  /** The strings' UTF-8 lengths, for writeRecords. */
  lengths: Lengths;
  /** Bytes of the batch from the leader epoch on (the batch length field's value). */
  batchLength: number;
  /** The records section compressed (a compressed batch only). */
  compressed?: Buffer;
}

function planPartition(messages: ProduceMessage[], now: number): PartitionPlan | null {
  const [first, max] = timestampRange(messages, now);
  const firstTimestamp = toBigInt(first as Int64);
  const maxTimestamp = toBigInt(max as Int64);
  if (firstTimestamp === null || maxTimestamp === null) return null;
  const deltas = new Int32Array(messages.length);
  const bodySizes = new Int32Array(messages.length);
  const headerCounts = new Int32Array(messages.length);
  // The relay's messages: a string key and five or six string headers (route/router.ts).
  const lengths = new Lengths(messages.length * 14);
  let batchLength = BATCH_HEADER;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    if (!isNullableBytes(m.key) || !isNullableBytes(m.value) || !headersObject(m.headers)) return null;
    // kafkajs: (message.timestamp || now) - firstTimestamp, JavaScript's subtraction.
    const delta = ((m.timestamp || now) as number) - (first as number);
    if (!Number.isInteger(delta) || delta < -0x8000_0000 || delta > 0x7fff_ffff) return null;
    deltas[i] = delta;
    let body =
      1 +
      sizeOfVarInt(delta) +
      sizeOfVarInt(i) +
      sizeOfVarBytes(m.key, lengths) +
      sizeOfVarBytes(m.value, lengths);
    let headerCount = 0;
    const headers = m.headers as Record<string, unknown> | undefined;
    for (const k in headers) {
      // kafkajs writes own names (Object.keys) and takes arrays as values: anything but an own
      // string, Buffer or null value is left to it. A null value (the Debezium preset's NULL
      // header column) is Kafka's null header value, length -1, which kafkajs cannot write.
      const hv = headers[k];
      if (!(isBytes(hv) || hv === null) || !Object.hasOwn(headers, k)) return null;
      const klen = lengths.push(slotLength(k, headerCount << 1));
      body += sizeOfVarInt(klen) + klen;
      if (typeof hv === 'string') {
        const vlen = lengths.push(slotLength(hv, (headerCount << 1) + 1));
        body += sizeOfVarInt(vlen) + vlen;
      } else body += sizeOfVarBytes(hv, lengths);
      headerCount++;
    }
    headerCounts[i] = headerCount;
    body += sizeOfVarInt(headerCount);
    bodySizes[i] = body;
    batchLength += sizeOfVarInt(body) + body;
  }
  return { firstTimestamp, maxTimestamp, deltas, bodySizes, headerCounts, lengths, batchLength };
}

function writeRecords(w: Writer, messages: ProduceMessage[], plan: PartitionPlan): void {
  const lengths = plan.lengths;
  lengths.at = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    w.varInt(plan.bodySizes[i]!);
    w.int8(0); // record attributes
    w.varInt(plan.deltas[i]!);
    w.varInt(i);
    w.varBytes(m.key, lengths);
    w.varBytes(m.value, lengths);
    const headers = m.headers as Record<string, string | Buffer> | undefined;
    w.varInt(plan.headerCounts[i]!);
    for (const k in headers) {
      w.varBytes(k, lengths);
      w.varBytes(headers[k], lengths);
    }
  }
}

/**
 * The Produce request body (v3–v7) for `args`, or null when kafkajs' own encoder must do it.
 * With `headroom`, the body starts that many bytes into a larger buffer (its `.buffer` …
 * `byteOffset` show them): room for the request's framing in front, written without a copy
 * (kafkajs/produce-hook.ts). With `codec`, each record batch's records are compressed by it.
 */
export function encodeProduceBody(
  args: ProduceArgs,
  now = Date.now(),
  headroom = 0,
  codec?: Codec,
): Buffer | null {
  const producerId = toBigInt(args.producerId);
  if (producerId === null) return null;
  const plans: PartitionPlan[][] = [];
  let size = (args.transactionalId == null ? 2 : 2 + Buffer.byteLength(args.transactionalId)) + 2 + 4 + 4;
  for (const t of args.topicData) {
    const topicPlans: PartitionPlan[] = [];
    size += 2 + Buffer.byteLength(t.topic) + 4;
    for (const p of t.partitions) {
      const plan = planPartition(p.messages, now);
      if (!plan) return null;
      if (codec) {
        const records = new Writer(plan.batchLength - BATCH_HEADER);
        writeRecords(records, p.messages, plan);
        plan.compressed = codec.compress(records.buf);
        plan.batchLength = BATCH_HEADER + plan.compressed.length;
      }
      topicPlans.push(plan);
      // partition, record set size, first offset, batch length, batch
      size += 4 + 4 + 8 + 4 + plan.batchLength;
    }
    plans.push(topicPlans);
  }

  const w = new Writer(size, headroom);
  w.string(args.transactionalId);
  w.int16(args.acks);
  w.int32(args.timeout);
  w.int32(args.topicData.length);
  const attributes = (args.transactionalId ? TRANSACTIONAL : 0) | (codec ? codec.id : 0);
  for (let ti = 0; ti < args.topicData.length; ti++) {
    const t = args.topicData[ti]!;
    w.string(t.topic);
    w.int32(t.partitions.length);
    for (let pi = 0; pi < t.partitions.length; pi++) {
      const p = t.partitions[pi]!;
      const plan = plans[ti]![pi]!;
      w.int32(p.partition);
      w.int32(8 + 4 + plan.batchLength);
      w.int64(0n); // first offset
      w.int32(plan.batchLength);
      w.int32(0); // partition leader epoch
      w.int8(MAGIC);
      const crcAt = w.off;
      w.off += 4;
      const bodyStart = w.off;
      w.int16(attributes);
      w.int32(p.messages.length - 1); // last offset delta
      w.int64(plan.firstTimestamp);
      w.int64(plan.maxTimestamp);
      w.int64(producerId);
      w.int16(args.producerEpoch);
      w.int32(p.firstSequence ?? 0);
      w.int32(p.messages.length);
      if (plan.compressed) w.off += plan.compressed.copy(w.buf, w.off);
      else writeRecords(w, p.messages, plan);
      w.buf.writeUInt32BE(crc32c(w.buf, bodyStart, w.off), crcAt);
    }
  }
  if (w.off !== size) throw new Error(`produce encoder: wrote ${w.off} bytes, planned ${size}`);
  return w.buf;
}
