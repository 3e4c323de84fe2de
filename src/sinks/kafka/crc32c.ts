import { endianness } from 'node:os';

/**
 * CRC-32C (Castagnoli), the checksum of a Kafka record batch, slice-by-8: eight bytes per step
 * (two 32-bit words read from an aligned view) through eight 256-entry tables, instead of
 * kafkajs' one byte per step (its crc32C was 6.4 % of the relay's busy time on the bulk Kafka
 * path; measured here on a 900 kB batch: 0.53 ns/byte against kafkajs' 1.6). node:zlib's crc32
 * is CRC-32 (IEEE), another polynomial: it cannot serve here.
 */
const POLY = 0x82f63b78; // reflected Castagnoli polynomial

const T = new Int32Array(8 * 256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
  T[n] = c;
}
for (let n = 0; n < 256; n++) {
  let c = T[n]!;
  for (let t = 1; t < 8; t++) {
    c = T[c & 0xff]! ^ (c >>> 8);
    T[t * 256 + n] = c;
  }
}
const T0 = T.subarray(0, 256);
const T1 = T.subarray(256, 512);
const T2 = T.subarray(512, 768);
const T3 = T.subarray(768, 1024);
const T4 = T.subarray(1024, 1280);
const T5 = T.subarray(1280, 1536);
const T6 = T.subarray(1536, 1792);
const T7 = T.subarray(1792, 2048);

/** Words are read in the machine's byte order; the table steps assume little-endian. */
const LITTLE_ENDIAN = endianness() === 'LE';

/** CRC-32C of buf[start, end), as an unsigned 32-bit number. */
export function crc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  let crc = -1;
  let i = start;
  if (LITTLE_ENDIAN) {
    while (i < end && ((buf.byteOffset + i) & 3) !== 0) crc = T0[(crc ^ buf[i++]!) & 0xff]! ^ (crc >>> 8);
    const words = ((end - i) >> 3) << 1;
    const w = new Int32Array(buf.buffer, buf.byteOffset + i, words);
    for (let j = 0; j < words; j += 2) {
      const a = crc ^ w[j]!;
      const b = w[j + 1]!;
      crc =
        T7[a & 0xff]! ^
        T6[(a >>> 8) & 0xff]! ^
        T5[(a >>> 16) & 0xff]! ^
        T4[a >>> 24]! ^
        T3[b & 0xff]! ^
        T2[(b >>> 8) & 0xff]! ^
        T1[(b >>> 16) & 0xff]! ^
        T0[b >>> 24]!;
    }
    i += words * 4;
  }
  for (; i < end; i++) crc = T0[(crc ^ buf[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}
