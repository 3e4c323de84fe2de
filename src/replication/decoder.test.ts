import pg from 'pg';
import { PgoutputPlugin } from 'pg-logical-replication';
import { describe, expect, it } from 'vitest';
import { OutboxDecoder, readOutboxInsert } from './decoder.ts';

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

/** pgoutput RELATION (protocol 1). */
function relation(oid: number, schema: string, table: string, columns: [string, number][]): Buffer {
  const parts: Buffer[] = [Buffer.from([0x52]), int32(oid), cstr(schema), cstr(table), Buffer.from([0x64])];
  const n = Buffer.alloc(2);
  n.writeInt16BE(columns.length);
  parts.push(n);
  for (const [name, type] of columns) parts.push(Buffer.from([0]), cstr(name), int32(type), int32(-1));
  return Buffer.concat(parts);
}

/** pgoutput INSERT (protocol 1); a value is text bytes, or null. */
function insert(oid: number, values: (Buffer | string | null)[]): Buffer {
  const n = Buffer.alloc(2);
  n.writeInt16BE(values.length);
  const parts: Buffer[] = [Buffer.from([0x49]), int32(oid), Buffer.from([0x4e]), n];
  for (const v of values) {
    if (v === null) parts.push(Buffer.from([0x6e]));
    else {
      const b = Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');
      parts.push(Buffer.from([0x74]), int32(b.length), b);
    }
  }
  return Buffer.concat(parts);
}

function int32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v);
  return b;
}

function cstr(s: string): Buffer {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
}

const OUTBOX_COLUMNS: [string, number][] = [
  ['id', 20],
  ['event_id', 2950],
  ['aggregate_type', 25],
  ['aggregate_id', 25],
  ['event_type', 25],
  ['payload', 17],
  ['content_type', 25],
  ['headers', 3802],
  ['traceparent', 25],
  ['created_at', 1184],
  ['status', 25],
  ['attempts', 23],
];

function row(over: Partial<Record<string, Buffer | string | null>> = {}): (Buffer | string | null)[] {
  const base: Record<string, Buffer | string | null> = {
    id: '9007199254740993',
    event_id: '0190f0a4-1c2b-7d3e-8f40-5a6b7c8d9e0f',
    aggregate_type: 'Order',
    aggregate_id: 'order-1',
    event_type: 'OrderPlaced',
    payload: `\\x${Buffer.from('{"total":12.5} é', 'utf8').toString('hex')}`,
    content_type: 'application/json',
    headers: '{"source": "shop", "n": 1}',
    traceparent: null,
    created_at: '2026-11-23 01:37:03.123456+00',
    status: 'pending',
    attempts: '0',
  };
  return OUTBOX_COLUMNS.map(([name]) => (name in over ? over[name]! : base[name]!));
}

describe('OutboxDecoder: INSERTs into the outbox table', () => {
  /** The library's reading of the same message, as the decoder did before its own INSERT path. */
  function viaLibrary(rel: Buffer, ins: Buffer): unknown {
    const parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
    parser.parse(rel);
    // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
    return (parser.parse(ins) as any).new;
  }

  const cases: [string, Partial<Record<string, Buffer | string | null>>][] = [
    ['a plain row', {}],
    ['NULLs everywhere', Object.fromEntries(OUTBOX_COLUMNS.map(([n]) => [n, null]))],
    ['an empty bytea and empty strings', { payload: '\\x', aggregate_id: '', event_type: '' }],
    ['a bytea in escape format', { payload: 'abc\\000\\\\def' }],
    ['a bytea with odd hex', { payload: '\\xabc' }],
    [
      'multi-byte text, emoji and a NUL-free control char',
      { aggregate_id: 'zé€😀\u0001', headers: '{"k": "ü"}' },
    ],
    ['invalid UTF-8 in a text column', { aggregate_id: Buffer.from([0x61, 0xff, 0xfe, 0x62, 0xc3]) }],
    [
      'a bigint id above 2^53, other timestamps',
      { id: '18446744073709551615', created_at: '1890-01-01 00:00:00+00:53:28' },
    ],
    ['a long payload', { payload: `\\x${'ab'.repeat(100_000)}` }],
  ];
  for (const [name, over] of cases) {
    it(`reads ${name} as pg-logical-replication does`, () => {
      const rel = relation(16390, 'public', 'outbox', OUTBOX_COLUMNS);
      const ins = insert(16390, row(over));
      const d = new OutboxDecoder('public', 'outbox');
      expect(d.decode(rel)).toEqual({ kind: 'ignored' });
      const columns = OUTBOX_COLUMNS.map(([n, t]) => ({
        name: n,
        typeOid: t,
        parser: pg.types.getTypeParser(t),
      }));
      const fast = readOutboxInsert(ins, columns);
      expect(fast).not.toBeNull();
      expect(fast).toEqual(viaLibrary(rel, ins));
      const decoded = d.decode(ins);
      expect(decoded.kind).toBe('event');
      expect(decoded.kind === 'event' && decoded.event.aggregateId).toEqual(
        (fast as { aggregate_id: unknown }).aggregate_id,
      );
    });
  }

  it('leaves a leading BOM, binary values and malformed messages to the library', () => {
    const rel = relation(16390, 'public', 'outbox', OUTBOX_COLUMNS);
    const columns = OUTBOX_COLUMNS.map(([n, t]) => ({
      name: n,
      typeOid: t,
      parser: pg.types.getTypeParser(t),
    }));
    const bom = insert(16390, row({ aggregate_id: '\uFEFForder-1' }));
    expect(readOutboxInsert(bom, columns)).toBeNull();
    const d = new OutboxDecoder('public', 'outbox');
    d.decode(rel);
    const viaDecoder = d.decode(bom);
    expect(viaDecoder.kind === 'event' && viaDecoder.event.aggregateId).toBe('order-1'); // TextDecoder drops the BOM
    const short = insert(16390, row()).subarray(0, 40);
    expect(readOutboxInsert(short, columns)).toBeNull();
    const binary = insert(16390, row());
    binary[8] = 0x62; // 'b'
    expect(readOutboxInsert(binary, columns)).toBeNull();
    expect(readOutboxInsert(insert(16390, row().slice(1)), columns)).toBeNull();
  });

  it('reads only the outbox table itself; a relation re-sent under another name stops the fast path', () => {
    const d = new OutboxDecoder('public', 'outbox');
    d.decode(relation(16390, 'public', 'orders', [['id', 20]]));
    expect(d.decode(insert(16390, ['1']))).toEqual({ kind: 'other-table', table: 'public.orders' });
    d.decode(relation(16391, 'public', 'outbox', OUTBOX_COLUMNS));
    d.decode(relation(16391, 'public', 'outbox_old', OUTBOX_COLUMNS));
    expect(d.decode(insert(16391, row()))).toEqual({ kind: 'other-table', table: 'public.outbox_old' });
  });
});
