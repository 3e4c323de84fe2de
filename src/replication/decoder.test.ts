import pg from 'pg';
import { PgoutputPlugin } from 'pg-logical-replication';
import { describe, expect, it } from 'vitest';
import {
  Binary,
  begin,
  commit,
  insert,
  OUTBOX_COLUMNS,
  relation,
  type Value,
} from '../../test/support/pgoutput.ts';
import { rowToEvent } from '../route/outbox-row.ts';
import { OutboxDecoder, outboxRelation, READ_COLUMNS, readOutboxInsert, unixMs } from './decoder.ts';
import { parseLsn } from './lsn.ts';

describe('OutboxDecoder', () => {
  it("carries BEGIN's xid as an unsigned 32-bit number (the parser reads it signed)", () => {
    const d = new OutboxDecoder('public', 'outbox');
    expect(d.decode(begin(0x1900n, 0n, 1234))).toMatchObject({ kind: 'begin', xid: 1234 });
    expect(d.decode(begin(0x1900n, 0n, 0xfffffff0))).toMatchObject({ kind: 'begin', xid: 0xfffffff0 });
  });
});

function row(over: Partial<Record<string, Value>> = {}): Value[] {
  const base: Record<string, Value> = {
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

const columns = outboxRelation(
  OUTBOX_COLUMNS.map(([n, t]) => ({ name: n, typeOid: t, parser: pg.types.getTypeParser(t) })),
);

/** A commit time (µs since 2000-01-01) for BEGIN. */
const COMMIT_US = 849_000_000_123_456;

describe('OutboxDecoder: INSERTs into the outbox table', () => {
  /** The library's reading of the same text message (the columns the relay reads), as the decoder did before its own INSERT path. */
  function viaLibrary(rel: Buffer, ins: Buffer): unknown {
    const parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
    parser.parse(rel);
    // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
    const all = (parser.parse(ins) as any).new;
    return Object.fromEntries(READ_COLUMNS.map((c) => [c, all[c]]));
  }

  const cases: [string, Partial<Record<string, Value>>][] = [
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
      expect(d.decode(begin(0x1900n, BigInt(COMMIT_US), 77))).toMatchObject({ kind: 'begin' });
      const fast = readOutboxInsert(ins, columns);
      expect(fast).not.toBeNull();
      expect(fast).toEqual(viaLibrary(rel, ins));
      const decoded = d.decode(ins);
      expect(decoded.kind).toBe('event');
      // The decoder builds the event in place: the same as rowToEvent of the row, field by field.
      expect(decoded.kind === 'event' && decoded.event).toEqual(
        rowToEvent(fast!, 0x1900n, unixMs(Math.floor(COMMIT_US / 2 ** 32), COMMIT_US % 2 ** 32), 77),
      );
    });
  }

  it('reads text values that repeat, change at one byte, keep or change their length, row after row (TextMemo)', () => {
    const rel = relation(16390, 'public', 'outbox', OUTBOX_COLUMNS);
    const d = new OutboxDecoder('public', 'outbox');
    d.decode(rel);
    const types = [
      'Order',
      'Order',
      'Ordes',
      'Order',
      'Orders',
      'Ordé',
      'Ordé',
      '',
      'Order',
      'x'.repeat(70),
      'Order',
    ];
    for (const [i, t] of types.entries()) {
      const ins = insert(16390, row({ aggregate_type: t, aggregate_id: `order-${i % 3}` }));
      const decoded = d.decode(ins);
      expect(decoded.kind === 'event' && decoded.event).toMatchObject({
        aggregateType: t,
        aggregateId: `order-${i % 3}`,
      });
      expect(readOutboxInsert(ins, columns)).toEqual(viaLibrary(rel, ins));
    }
  });

  it('drops a leading BOM as the library does; refuses malformed messages', () => {
    const rel = relation(16390, 'public', 'outbox', OUTBOX_COLUMNS);
    const bom = insert(16390, row({ aggregate_id: '\uFEFForder-1' }));
    expect(readOutboxInsert(bom, columns)).toEqual(viaLibrary(rel, bom));
    expect(readOutboxInsert(bom, columns)?.aggregate_id).toBe('order-1'); // TextDecoder drops the BOM
    expect(readOutboxInsert(insert(16390, row()).subarray(0, 40), columns)).toBeNull();
    expect(readOutboxInsert(insert(16390, row().slice(1)), columns)).toBeNull();
    const unknownKind = insert(16390, row());
    unknownKind[8] = 0x75; // 'u': an unchanged TOAST value, never in an INSERT
    expect(readOutboxInsert(unknownKind, columns)).toBeNull();
    const d = new OutboxDecoder('public', 'outbox');
    d.decode(rel);
    expect(() => d.decode(unknownKind)).toThrow(/malformed pgoutput INSERT into public.outbox/);
  });

  it('reads binary values ("b") into what the text path gives; other columns are not read', () => {
    const id = Buffer.alloc(8);
    id.writeBigInt64BE(9007199254740993n);
    const created = Buffer.alloc(8);
    created.writeBigInt64BE(
      BigInt(Date.UTC(2026, 10, 23, 1, 37, 3) - Date.UTC(2000, 0, 1)) * 1000n + 123456n,
    );
    const binary = row({
      id: new Binary(id),
      event_id: new Binary(Buffer.from('0190f0a41c2b7d3e8f405a6b7c8d9e0f', 'hex')),
      aggregate_id: new Binary(Buffer.from('zé€😀', 'utf8')),
      payload: new Binary(Buffer.from('{"total":12.5} é', 'utf8')),
      headers: new Binary(Buffer.concat([Buffer.from([1]), Buffer.from('{"source": "shop", "n": 1}')])),
      created_at: new Binary(created),
      status: new Binary(Buffer.from([0xff])), // not read: never decoded
    });
    const text = row({ aggregate_id: 'zé€😀' });
    const message = insert(16390, binary);
    const fast = readOutboxInsert(message, columns);
    expect(fast).toEqual(readOutboxInsert(insert(16390, text), columns));
    // A copy: the stream's buffer is reused for the next message.
    message.fill(0);
    expect(fast?.payload?.toString('utf8')).toBe('{"total":12.5} é');
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

describe('BEGIN and COMMIT, read straight from the message', () => {
  const lib = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  const cases: [bigint, bigint, number][] = [
    [0n, 0n, 0],
    [0x16b3748n, 849_000_000_123_456n, 1234],
    [0x1_0000_0000n, 849_000_000_999_999n, 0x8000_0001], // xid above 2^31, LSN past 4 GiB
    [0xffff_ffff_ffff_ff00n, 7_000_000_000_000_999n, 0xffff_ffff], // the year 2221
  ];
  for (const [lsn, t, xid] of cases)
    it(`matches pg-logical-replication's values: LSN ${lsn.toString(16)}, time ${t}, xid ${xid}`, () => {
      const d = new OutboxDecoder('public', 'outbox').decode(begin(lsn, t, xid));
      // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
      const m: any = lib.parse(begin(lsn, t, xid));
      expect(d).toEqual({
        kind: 'begin',
        commitLsn: m.commitLsn ? parseLsn(m.commitLsn) : 0n,
        commitTimeMs: Number(m.commitTime / 1000n),
        xid: m.xid >>> 0,
      });
      // biome-ignore lint/suspicious/noExplicitAny: as above.
      const c: any = lib.parse(commit(lsn, lsn + 40n, t));
      expect(new OutboxDecoder('public', 'outbox').decode(commit(lsn, lsn + 40n, t))).toEqual({
        kind: 'commit',
        endLsn: parseLsn(c.commitEndLsn),
      });
    });
});
