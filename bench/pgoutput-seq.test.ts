import { describe, expect, it } from 'vitest';
import { insertRelid, insertSeq, relationColumn } from './pgoutput-seq.ts';

/** A pgoutput RELATION message with the given column names (protocol-logicalrep-message-formats). */
function relation(relid: number, columns: string[]): Buffer {
  const parts: Buffer[] = [
    Buffer.from('R'),
    u32(relid),
    Buffer.from('public\0bench_floor\0'),
    Buffer.from([0x64]),
  ];
  parts.push(u16(columns.length));
  for (const c of columns) parts.push(Buffer.from([0]), Buffer.from(`${c}\0`), u32(17), u32(0xffffffff));
  return Buffer.concat(parts);
}

/** An INSERT with text ('t'), binary ('b') or null ('n') columns. */
function insert(relid: number, values: ([kind: 't' | 'b', value: Buffer] | null)[]): Buffer {
  const parts: Buffer[] = [Buffer.from('I'), u32(relid), Buffer.from('N'), u16(values.length)];
  for (const v of values)
    if (v === null) parts.push(Buffer.from('n'));
    else parts.push(Buffer.from(v[0]), u32(v[1].length), v[1]);
  return Buffer.concat(parts);
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};

describe('relationColumn', () => {
  it('finds the column', () => {
    const m = relation(16400, ['id', 'event_id', 'payload', 'created_at']);
    expect(relationColumn(m, 0, m.length, 'payload')).toEqual({ relid: 16400, index: 2 });
    expect(relationColumn(m, 0, m.length, 'nope')).toEqual({ relid: 16400, index: -1 });
  });
  it('reads a message in the middle of a buffer', () => {
    const m = Buffer.concat([Buffer.from('xyz'), relation(7, ['payload'])]);
    expect(relationColumn(m, 3, m.length, 'payload')).toEqual({ relid: 7, index: 0 });
  });
  it('answers null for other messages', () => {
    const m = insert(7, []);
    expect(relationColumn(m, 0, m.length, 'payload')).toBeNull();
  });
});

describe('insertSeq', () => {
  const payload = Buffer.from('1234'.padEnd(500, 'x'));
  it('reads the leading number of a binary bytea', () => {
    const m = insert(7, [['b', Buffer.from('00000001', 'hex')], null, ['b', payload]]);
    expect(insertRelid(m, 0)).toBe(7);
    expect(insertSeq(m, 0, m.length, 2)).toBe(1234);
  });
  it('reads the leading number of a text bytea (hex)', () => {
    const m = insert(7, [
      ['t', Buffer.from('42')],
      ['t', Buffer.from(`\\x${payload.toString('hex')}`)],
    ]);
    expect(insertSeq(m, 0, m.length, 1)).toBe(1234);
  });
  it('is -1 for a null, a value without digits or a column past the end', () => {
    const m = insert(7, [null, ['b', Buffer.from('xx')]]);
    expect(insertSeq(m, 0, m.length, 0)).toBe(-1);
    expect(insertSeq(m, 0, m.length, 1)).toBe(-1);
    expect(insertSeq(m, 0, m.length, 5)).toBe(-1);
  });
  it('is not an INSERT: relid -1', () => {
    expect(insertRelid(Buffer.from('B'), 0)).toBe(-1);
  });
});
