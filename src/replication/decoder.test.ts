import { describe, expect, it } from 'vitest';
import { OutboxDecoder } from './decoder.ts';

/** pgoutput BEGIN (protocol 1): final LSN, commit time, xid. */
function begin(xid: number): Buffer {
  const b = Buffer.alloc(21);
  b.writeUInt8(0x42, 0);
  b.writeBigUInt64BE(0x1900n, 1);
  b.writeBigInt64BE(0n, 9);
  b.writeUInt32BE(xid, 17);
  return b;
}

describe('OutboxDecoder', () => {
  it("carries BEGIN's xid as an unsigned 32-bit number (the parser reads it signed)", () => {
    const d = new OutboxDecoder('public', 'outbox');
    expect(d.decode(begin(1234))).toMatchObject({ kind: 'begin', xid: 1234 });
    expect(d.decode(begin(0xfffffff0))).toMatchObject({ kind: 'begin', xid: 0xfffffff0 });
  });
});
