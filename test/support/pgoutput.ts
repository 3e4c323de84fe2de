/**
 * Byte builders for pgoutput messages (protocol 1, protocol-logicalrep-message-formats.html), for
 * tests and the hot-path bench: RELATION, INSERT (text, binary or NULL values), BEGIN, COMMIT.
 */

/** The migrated outbox table's first columns (sql/000001), with their type OIDs. */
export const OUTBOX_COLUMNS: readonly [string, number][] = [
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

export function int32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v);
  return b;
}

function cstr(s: string): Buffer {
  return Buffer.concat([Buffer.from(s, 'utf8'), Buffer.from([0])]);
}

/** RELATION: the relation's OID, schema, name, replica identity 'd', its columns. */
export function relation(
  oid: number,
  schema: string,
  table: string,
  columns: readonly [string, number][],
): Buffer {
  const parts: Buffer[] = [Buffer.from([0x52]), int32(oid), cstr(schema), cstr(table), Buffer.from([0x64])];
  const n = Buffer.alloc(2);
  n.writeInt16BE(columns.length);
  parts.push(n);
  for (const [name, type] of columns) parts.push(Buffer.from([0]), cstr(name), int32(type), int32(-1));
  return Buffer.concat(parts);
}

/** A value in binary format ('b'). */
export class Binary {
  readonly bytes: Buffer;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }
}

/** A column value: text (a string or its bytes), binary, or NULL. */
export type Value = Buffer | string | Binary | null;

/** INSERT into relation `oid`: 'N' and the new tuple. */
export function insert(oid: number, values: readonly Value[]): Buffer {
  const n = Buffer.alloc(2);
  n.writeInt16BE(values.length);
  const parts: Buffer[] = [Buffer.from([0x49]), int32(oid), Buffer.from([0x4e]), n];
  for (const v of values) {
    if (v === null) parts.push(Buffer.from([0x6e]));
    else if (v instanceof Binary) parts.push(Buffer.from([0x62]), int32(v.bytes.length), v.bytes);
    else {
      const b = Buffer.isBuffer(v) ? v : Buffer.from(v, 'utf8');
      parts.push(Buffer.from([0x74]), int32(b.length), b);
    }
  }
  return Buffer.concat(parts);
}

/** BEGIN: final LSN, commit time (µs since 2000-01-01), xid. */
export function begin(finalLsn: bigint, commitTimeUs: bigint, xid: number): Buffer {
  const b = Buffer.alloc(21);
  b[0] = 0x42;
  b.writeBigUInt64BE(finalLsn, 1);
  b.writeBigUInt64BE(commitTimeUs, 9);
  b.writeUInt32BE(xid, 17);
  return b;
}

/** COMMIT: flags 0, commit LSN, end LSN, commit time. */
export function commit(commitLsn: bigint, endLsn: bigint, commitTimeUs = 0n): Buffer {
  const b = Buffer.alloc(26);
  b[0] = 0x43;
  b.writeBigUInt64BE(commitLsn, 2);
  b.writeBigUInt64BE(endLsn, 10);
  b.writeBigUInt64BE(commitTimeUs, 18);
  return b;
}
