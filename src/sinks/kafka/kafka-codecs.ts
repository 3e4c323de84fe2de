import { gunzipSync, gzipSync, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import kafkajs from 'kafkajs';

// Not named imports: Node's ESM view of kafkajs (a CommonJS module) lacks CompressionCodecs.
const { CompressionCodecs, CompressionTypes } = kafkajs;

/**
 * Kafka's compression codecs, as its record batches (magic 2) frame them. The codec's id goes in
 * the low three bits of the batch attributes; what is compressed is the records section alone
 * (the record count before it stays plain). The framing each codec needs, as Kafka's Java
 * client (org.apache.kafka.common.compress) and librdkafka write and read it:
 *
 * - gzip: a gzip stream (node:zlib).
 * - snappy: xerial snappy-java's framed stream, which Kafka's Java producer writes
 *   (SnappyOutputStream): the header "\x82SNAPPY\0", version 1, compatible version 1 (int32s),
 *   then blocks of at most 32 KiB of input, each an int32 length and a raw snappy block
 *   (npm `snappy`'s one-shot compressSync; its "frame format" is Google's, which neither Kafka
 *   nor librdkafka read). Reading takes the xerial stream or a raw block (both accept either).
 * - lz4: the standard LZ4 frame (KIP-57: magic-2 batches carry a correct header checksum),
 *   from lz4-napi (lz4_flex): independent 64 KiB blocks, no content size, which Kafka's
 *   Lz4BlockInputStream reads.
 * - zstd: one zstd frame (node:zlib, Node ≥ 23.8).
 *
 * snappy and lz4 are native modules, loaded when a codec is chosen (loadCodec): with them a relay
 * that compresses nothing (the default) held ~8 MB more RSS from its start (issue 39, item 4;
 * docs/benchmarks.md). The Kafka sink loads its codec when it starts.
 *
 * Sync, not async: the relay encodes a Produce request in one pass on the event loop, and a
 * record batch is at most --batch-bytes (≈ 1 MiB), which each codec compresses in ~1 ms or less;
 * a thread-pool round trip per batch would cost more than it hides.
 */

export const KAFKA_COMPRESSION = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
export type KafkaCompression = (typeof KAFKA_COMPRESSION)[number];
export type CodecName = Exclude<KafkaCompression, 'none'>;
export const CODEC_NAMES: readonly CodecName[] = ['gzip', 'snappy', 'lz4', 'zstd'];

/** Kafka's codec ids (the batch attributes' low three bits), known without loading a codec. */
export const CODEC_IDS: Readonly<Record<CodecName, number>> = {
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

export interface Codec {
  /** Kafka's codec id (the batch attributes' low three bits); kafkajs' CompressionTypes. */
  readonly id: number;
  compress(records: Buffer): Buffer;
  decompress(data: Buffer): Buffer;
}

const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER = 16;
/** snappy-java's default block size, which Kafka's producer uses. */
const XERIAL_BLOCK = 32 * 1024;

type Snappy = typeof import('snappy');

function xerialCompress(snappy: Snappy, data: Buffer): Buffer {
  const parts: Buffer[] = [];
  const header = Buffer.alloc(XERIAL_HEADER);
  XERIAL_MAGIC.copy(header);
  header.writeInt32BE(1, 8);
  header.writeInt32BE(1, 12);
  parts.push(header);
  for (let off = 0; off < data.length; off += XERIAL_BLOCK) {
    const block = snappy.compressSync(data.subarray(off, Math.min(data.length, off + XERIAL_BLOCK)));
    const len = Buffer.allocUnsafe(4);
    len.writeInt32BE(block.length);
    parts.push(len, block);
  }
  return Buffer.concat(parts);
}

function xerialDecompress(snappy: Snappy, data: Buffer): Buffer {
  if (data.length < XERIAL_HEADER || !data.subarray(0, 8).equals(XERIAL_MAGIC))
    return snappy.uncompressSync(data) as Buffer;
  const parts: Buffer[] = [];
  for (let off = XERIAL_HEADER; off < data.length; ) {
    const len = data.readInt32BE(off);
    if (len < 0 || off + 4 + len > data.length)
      throw new Error('snappy: a block runs past the end of the data');
    parts.push(snappy.uncompressSync(data.subarray(off + 4, off + 4 + len)) as Buffer);
    off += 4 + len;
  }
  return Buffer.concat(parts);
}

const LOADERS: Readonly<Record<CodecName, () => Promise<Omit<Codec, 'id'>>>> = {
  gzip: async () => ({ compress: (b) => gzipSync(b), decompress: (b) => gunzipSync(b) }),
  snappy: async () => {
    const snappy = await import('snappy');
    return { compress: (b) => xerialCompress(snappy, b), decompress: (b) => xerialDecompress(snappy, b) };
  },
  lz4: async () => {
    const { compressFrameSync, decompressFrameSync } = await import('lz4-napi');
    return { compress: (b) => compressFrameSync(b), decompress: (b) => decompressFrameSync(b) };
  },
  zstd: async () => ({ compress: (b) => zstdCompressSync(b), decompress: (b) => zstdDecompressSync(b) }),
};

/** The codecs loaded so far, by id. */
const loaded = new Map<number, Codec>();

/** The codec `name`, its module loaded on first use. */
export async function loadCodec(name: CodecName): Promise<Codec> {
  const id = CODEC_IDS[name];
  let codec = loaded.get(id);
  if (!codec) {
    codec = { id, ...(await LOADERS[name]()) };
    loaded.set(id, codec);
  }
  return codec;
}

/**
 * The loaded codec of kafkajs' compression type (undefined: none, one the relay does not have, or
 * one not loaded yet: kafkajs' encoder, with the codecs registerKafkajsCodecs gave it, then
 * writes the same bytes).
 */
export function codecById(id: number): Codec | undefined {
  return loaded.get(id);
}

let registered = false;

/**
 * Gives kafkajs snappy, lz4 and zstd (it has gzip only), so that its own encoder (the fallback
 * of src/sinks/kafka/produce-encoder.ts) and its consumers (the tests' readers) handle every codec the
 * relay writes. kafkajs' gzip is left as it is.
 */
export function registerKafkajsCodecs(): void {
  if (registered) return;
  for (const name of ['snappy', 'lz4', 'zstd'] as const) {
    const codec = {
      compress: async (encoder: { buffer: Buffer }) => (await loadCodec(name)).compress(encoder.buffer),
      decompress: async (data: Buffer) => (await loadCodec(name)).decompress(data),
    };
    (CompressionCodecs as Record<number, () => typeof codec>)[CODEC_IDS[name]] = () => codec;
  }
  registered = true;
}
