// CRC-32C (Castagnoli), the checksum of v2 record batches. node:zlib only offers plain CRC-32, so this
// is a slice-by-8 table implementation: the produce path runs it over every batch, like a real broker.

const POLY = 0x82f63b78;
const TABLES = new Uint32Array(8 * 256);

for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
  TABLES[n] = c >>> 0;
}
for (let t = 1; t < 8; t++) {
  for (let n = 0; n < 256; n++) {
    const prev = TABLES[(t - 1) * 256 + n]!;
    TABLES[t * 256 + n] = (prev >>> 8) ^ TABLES[prev & 0xff]!;
  }
}

export function crc32c(buf: Uint8Array, start = 0, end = buf.length): number {
  const T = TABLES;
  let crc = 0xffffffff;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const a = crc ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    crc =
      T[7 * 256 + (a & 0xff)]! ^
      T[6 * 256 + ((a >>> 8) & 0xff)]! ^
      T[5 * 256 + ((a >>> 16) & 0xff)]! ^
      T[4 * 256 + (a >>> 24)]! ^
      T[3 * 256 + buf[i + 4]!]! ^
      T[2 * 256 + buf[i + 5]!]! ^
      T[256 + buf[i + 6]!]! ^
      T[buf[i + 7]!]!;
  }
  for (; i < end; i++) crc = (crc >>> 8) ^ T[(crc ^ buf[i]!) & 0xff]!;
  return (crc ^ 0xffffffff) >>> 0;
}
