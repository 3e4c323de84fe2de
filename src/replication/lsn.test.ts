import { describe, expect, it } from 'vitest';
import { formatLsn, parseLsn, readLsn } from './lsn.ts';

describe('lsn', () => {
  it('parses and formats round trip', () => {
    for (const t of ['0/0', '0/16B3748', '1/0', 'FFFFFFFF/FFFFFFFF', 'A/BC']) {
      expect(formatLsn(parseLsn(t))).toBe(t.toUpperCase());
    }
  });

  it('orders by 64-bit value, not by text', () => {
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
    expect(parseLsn('0/10') > parseLsn('0/F')).toBe(true);
    expect(parseLsn('10/0') > parseLsn('9/FFFFFFFF')).toBe(true);
  });

  it('rejects malformed text with a message naming the input', () => {
    expect(() => parseLsn('16B3748')).toThrow(/not an LSN: "16B3748"/);
    expect(() => parseLsn('0/123456789')).toThrow(/not an LSN/);
  });

  it('reads the wire form', () => {
    const b = Buffer.alloc(9);
    b.writeUInt32BE(1, 1);
    b.writeUInt32BE(0x20, 5);
    expect(formatLsn(readLsn(b, 1))).toBe('1/20');
  });
});
