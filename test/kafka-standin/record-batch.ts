// v2 record batches (magic 2, KIP-98). The produce path only reads the fixed-size header; records are
// decoded lazily when a test asks for them, so the hot path stays a header parse, a CRC and a copy.
import zlib from 'node:zlib';
import { ProtocolError, Reader } from './codec.ts';
import { crc32c } from './crc32c.ts';
import { KafkaErrorCode } from './errors.ts';

// Byte offsets inside a batch, counted from its baseOffset field.
export const BATCH = Object.freeze({
  BASE_OFFSET: 0,
  LENGTH: 8,
  PARTITION_LEADER_EPOCH: 12,
  MAGIC: 16,
  CRC: 17,
  ATTRIBUTES: 21,
  LAST_OFFSET_DELTA: 23,
  BASE_TIMESTAMP: 27,
  MAX_TIMESTAMP: 35,
  PRODUCER_ID: 43,
  PRODUCER_EPOCH: 51,
  BASE_SEQUENCE: 53,
  RECORDS_COUNT: 57,
  RECORDS: 61,
});
/** baseOffset + length: the part of a batch that its length field does not count. */
export const LOG_OVERHEAD = 12;

const CODEC_MASK = 0x07;
const TIMESTAMP_TYPE_LOG_APPEND = 0x08;
const TRANSACTIONAL_FLAG = 0x10;
const CONTROL_FLAG = 0x20;

export const Compression = Object.freeze({ NONE: 0, GZIP: 1, SNAPPY: 2, LZ4: 3, ZSTD: 4 });
export const COMPRESSION_NAMES: readonly string[] = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];

export interface BatchHeader {
  /** Total size including the 12-byte log overhead. */
  readonly sizeInBytes: number;
  readonly magic: number;
  readonly crc: number;
  readonly attributes: number;
  readonly compression: number;
  readonly transactional: boolean;
  readonly control: boolean;
  readonly lastOffsetDelta: number;
  readonly baseTimestamp: number;
  readonly maxTimestamp: number;
  readonly producerId: number;
  readonly producerEpoch: number;
  readonly baseSequence: number;
  readonly recordCount: number;
}

function int64(buf: Buffer, at: number): number {
  return buf.readInt32BE(at) * 2 ** 32 + buf.readUInt32BE(at + 4);
}

export function readBatchHeader(buf: Buffer, at = 0): BatchHeader {
  if (buf.length - at < BATCH.RECORDS) {
    throw new ProtocolError(`record batch shorter than its ${BATCH.RECORDS}-byte header`);
  }
  const attributes = buf.readInt16BE(at + BATCH.ATTRIBUTES);
  return {
    sizeInBytes: buf.readInt32BE(at + BATCH.LENGTH) + LOG_OVERHEAD,
    magic: buf.readInt8(at + BATCH.MAGIC),
    crc: buf.readUInt32BE(at + BATCH.CRC),
    attributes,
    compression: attributes & CODEC_MASK,
    transactional: (attributes & TRANSACTIONAL_FLAG) !== 0,
    control: (attributes & CONTROL_FLAG) !== 0,
    lastOffsetDelta: buf.readInt32BE(at + BATCH.LAST_OFFSET_DELTA),
    baseTimestamp: int64(buf, at + BATCH.BASE_TIMESTAMP),
    maxTimestamp: int64(buf, at + BATCH.MAX_TIMESTAMP),
    producerId: int64(buf, at + BATCH.PRODUCER_ID),
    producerEpoch: buf.readInt16BE(at + BATCH.PRODUCER_EPOCH),
    baseSequence: buf.readInt32BE(at + BATCH.BASE_SEQUENCE),
    recordCount: buf.readInt32BE(at + BATCH.RECORDS_COUNT),
  };
}

export type BatchValidation = { ok: true; header: BatchHeader } | { ok: false; code: number; reason: string };

/**
 * The checks a broker makes on a client batch before appending it, minus the ones that need the
 * records decompressed. `records` is the RECORDS field of one produce partition.
 */
export function validateProducedBatch(records: Buffer, maxMessageBytes: number): BatchValidation {
  if (records.length < BATCH.RECORDS) {
    return {
      ok: false,
      code: KafkaErrorCode.INVALID_RECORD,
      reason: 'record set shorter than a batch header',
    };
  }
  const header = readBatchHeader(records);
  if (header.magic !== 2) {
    return {
      ok: false,
      code: KafkaErrorCode.INVALID_RECORD,
      reason: `magic ${header.magic}, only v2 batches`,
    };
  }
  if (header.sizeInBytes !== records.length) {
    // Produce v3+ must carry exactly one batch per partition.
    return {
      ok: false,
      code: KafkaErrorCode.INVALID_RECORD,
      reason: `batch length ${header.sizeInBytes} != record set size ${records.length}`,
    };
  }
  if (records.length > maxMessageBytes) {
    return {
      ok: false,
      code: KafkaErrorCode.MESSAGE_TOO_LARGE,
      reason: `batch of ${records.length} bytes exceeds max.message.bytes ${maxMessageBytes}`,
    };
  }
  if (crc32c(records, BATCH.ATTRIBUTES) !== header.crc) {
    return { ok: false, code: KafkaErrorCode.CORRUPT_MESSAGE, reason: 'CRC-32C mismatch' };
  }
  if (header.compression > Compression.ZSTD) {
    return { ok: false, code: KafkaErrorCode.CORRUPT_MESSAGE, reason: `unknown codec ${header.compression}` };
  }
  if (header.recordCount <= 0 || header.recordCount !== header.lastOffsetDelta + 1) {
    return {
      ok: false,
      code: KafkaErrorCode.INVALID_RECORD,
      reason: `record count ${header.recordCount} inconsistent with lastOffsetDelta ${header.lastOffsetDelta}`,
    };
  }
  if (header.control) {
    return {
      ok: false,
      code: KafkaErrorCode.INVALID_RECORD,
      reason: 'clients may not produce control batches',
    };
  }
  if (header.transactional) {
    return { ok: false, code: KafkaErrorCode.INVALID_TXN_STATE, reason: 'transactions are not supported' };
  }
  return { ok: true, header };
}

export interface RecordHeader {
  readonly key: string;
  readonly value: Buffer | null;
}

export interface DecodedRecord {
  readonly offset: number;
  readonly timestamp: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: readonly RecordHeader[];
}

function decompress(codec: number, data: Buffer): Buffer {
  switch (codec) {
    case Compression.NONE:
      return data;
    case Compression.GZIP:
      return zlib.gunzipSync(data);
    case Compression.ZSTD:
      if (typeof zlib.zstdDecompressSync === 'function') return zlib.zstdDecompressSync(data);
      throw new Error('zstd batches need a Node.js with zlib.zstdDecompressSync');
    default:
      throw new Error(`decoding codec ${codec} (snappy/lz4) is not implemented by the stand-in`);
  }
}

function copy(b: Buffer | null): Buffer | null {
  return b === null ? null : Buffer.from(b);
}

/** Decodes every record of a stored batch whose baseOffset field already holds its log offset. */
export function decodeBatch(batch: Buffer): DecodedRecord[] {
  const header = readBatchHeader(batch);
  const baseOffset = int64(batch, BATCH.BASE_OFFSET);
  const body = decompress(header.compression, batch.subarray(BATCH.RECORDS, header.sizeInBytes));
  const r = new Reader(body);
  const logAppendTime = (header.attributes & TIMESTAMP_TYPE_LOG_APPEND) !== 0;
  const out: DecodedRecord[] = [];
  for (let i = 0; i < header.recordCount; i++) {
    const length = r.varint();
    const end = r.pos + length;
    if (length < 0 || end > r.end) throw new ProtocolError(`record ${i} overruns its batch`);
    const rec = new Reader(body, r.pos, end);
    rec.int8(); // record attributes: unused by the protocol so far
    const timestampDelta = rec.varint();
    const offsetDelta = rec.varint();
    const key = copy(rec.varBytes());
    const value = copy(rec.varBytes());
    const headerCount = rec.varint();
    const headers: RecordHeader[] = [];
    for (let h = 0; h < headerCount; h++) {
      const hk = rec.varString();
      if (hk === null) throw new ProtocolError('null record header key');
      headers.push({ key: hk, value: copy(rec.varBytes()) });
    }
    r.pos = end;
    out.push({
      offset: baseOffset + offsetDelta,
      timestamp: logAppendTime ? header.maxTimestamp : header.baseTimestamp + timestampDelta,
      key,
      value,
      headers,
    });
  }
  return out;
}
