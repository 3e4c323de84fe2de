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

  it('checksums a range of a larger buffer', () => {
    const b = Buffer.from('xx123456789yy');
    expect(crc32c(b, 2, 11)).toBe(0xe3069283);
  });
});
