/**
 * CRC-32C (Castagnoli), the checksum of a Kafka record batch, slice-by-8: eight bytes per step
 * through eight 256-entry tables instead of kafkajs' one byte per step (its crc32C was 6.4 % of
 * the relay's busy time on the bulk Kafka path). node:zlib's crc32 is CRC-32 (IEEE), another
 * polynomial: it cannot serve here.
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

/** CRC-32C of buf[start, end), as an unsigned 32-bit number. */
export function crc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  let crc = -1;
  let i = start;
  for (const last = end - 8; i <= last; i += 8) {
    const a = crc ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    crc =
      T[1792 + (a & 0xff)]! ^
      T[1536 + ((a >>> 8) & 0xff)]! ^
      T[1280 + ((a >>> 16) & 0xff)]! ^
      T[1024 + (a >>> 24)]! ^
      T[768 + buf[i + 4]!]! ^
      T[512 + buf[i + 5]!]! ^
      T[256 + buf[i + 6]!]! ^
      T[buf[i + 7]!]!;
  }
  for (; i < end; i++) crc = T[(crc ^ buf[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ -1) >>> 0;
}
