import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { crc32c } from './crc32c.ts';

const kafkajsCrc32c = createRequire(import.meta.url)('kafkajs/src/protocol/recordBatch/crc32C/index.js') as (
  b: Buffer,
) => number;

describe('crc32c', () => {
  it('matches the standard check value and the empty input', () => {
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc32c(Buffer.alloc(0))).toBe(0);
  });

  it('equals kafkajs’ own CRC-32C on random buffers of every length class', () => {
    let seed = 12345;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return seed >>> 16;
    };
    for (let n = 0; n < 300; n++) {
      const len = n < 40 ? n : rnd() % 5000;
      const b = Buffer.alloc(len);
      for (let i = 0; i < len; i++) b[i] = rnd() & 0xff;
      expect(crc32c(b)).toBe(kafkajsCrc32c(b));
    }
  });

  it('checksums a range of a larger buffer, at every alignment', () => {
    const b = Buffer.from('xx123456789yy');
    expect(crc32c(b, 2, 11)).toBe(0xe3069283);
    const big = Buffer.alloc(10_000);
    for (let i = 0; i < big.length; i++) big[i] = (i * 131 + 7) & 0xff;
    for (let s = 0; s < 9; s++)
      for (const e of [big.length, big.length - 1, big.length - 5, s + 7, s + 8, s + 17])
        expect(crc32c(big, s, e)).toBe(kafkajsCrc32c(big.subarray(s, e)));
    // A view that starts at an odd offset of its ArrayBuffer (e.g. a slice of Node's buffer pool).
    const view = Buffer.from(big.buffer, 3, 5000);
    expect(crc32c(view)).toBe(kafkajsCrc32c(Buffer.from(view)));
  });
});
