import { PgoutputPlugin } from 'pg-logical-replication';
import type { OutboxEvent } from '../route/event.ts';
import type { OutboxRow } from '../route/outbox-row.ts';
import { notUtf8, readBinaryValue, type TextParser, utf8Text } from './binary-values.ts';
import { type ColumnsMode, columnsEvent, readColumnsTuple } from './columns-tuple.ts';
import { type Lsn, parseLsn } from './lsn.ts';

/** What the pipeline needs from one pgoutput message. */
export type Decoded =
  | { kind: 'begin'; commitLsn: Lsn; commitTimeMs: number; xid: number }
  | { kind: 'commit'; endLsn: Lsn }
  | { kind: 'event'; event: OutboxEvent }
  | { kind: 'message'; prefix: string; content: Buffer; transactional: boolean; lsn: Lsn }
  | { kind: 'other-table'; table: string }
  | { kind: 'ignored' };

/**
 * Turns pgoutput messages into outbox events. Row changes are read here (readOutboxInsert), in
 * text or binary format; pg-logical-replication's parser reads the rest (BEGIN, COMMIT, RELATION
 * with pg's text parser per column type, logical messages). It never sees a row: it would hand a
 * binary value on as a view of the reused message buffer.
 */
export class OutboxDecoder {
  // Only the plugin's parser is used; the stream is driven by ReplicationConnection.
  readonly #parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  readonly #schema: string;
  readonly #table: string;
  /** The outbox table's relation (from the last RELATION message that named it), by relation OID. */
  readonly #outbox = new Map<number, OutboxRelation>();
  /** Every other relation's qualified name, by relation OID. */
  readonly #others = new Map<number, string>();
  #commitLsn: Lsn = 0n;
  #commitTimeMs = 0;
  #xid = 0;
  /**
   * Whether a message's bytes stay as they are after decode() returns (the stream is read by a
   * CopyReader): a bytea value is then a view of its message, not a copy.
   */
  keepViews = false;
  /**
   * Whether text values arrive unconverted from a SQL_ASCII database (onStart's `unconverted`):
   * each text value the relay reads is then checked to be UTF-8 (binary-values.ts notUtf8).
   */
  checkUtf8 = false;
  /** What decode() returns for an event: one object, reused (no wrapper to allocate per row). */
  readonly #event: { kind: 'event'; event: OutboxEvent } = { kind: 'event', event: undefined as never };
  /** readOutboxValues' output, reused for every row (each event takes the values it needs). */
  readonly #values: unknown[] = new Array(READ_COLUMNS.length);

  /** The Debezium preset: rows are read as every column's text (columns-tuple.ts). */
  readonly #columnsMode: ColumnsMode | null;
  /** The outbox table's column names in tuple order, by relation OID (columns mode). */
  readonly #names = new Map<number, string[]>();

  constructor(schema: string, table: string, columnsMode: ColumnsMode | null = null) {
    this.#schema = schema;
    this.#table = table;
    this.#columnsMode = columnsMode;
  }

  /**
   * The pgoutput message in data[start, end) (all of `data` by default). The object returned for
   * an event is reused by the next call: take its `event` before decoding the next message.
   */
  decode(data: Buffer, start = 0, end = data.length): Decoded {
    const tag = data[start];
    if (tag === INSERT || tag === UPDATE || tag === DELETE) return this.#change(tag, data, start, end);
    // BEGIN and COMMIT (one of each per transaction) straight from the message: the library would
    // format both LSNs as text only for them to be parsed back.
    if (tag === BEGIN && end - start >= 21) {
      this.#commitLsn = data.readBigUInt64BE(start + 1);
      this.#commitTimeMs = unixMs(data.readUInt32BE(start + 9), data.readUInt32BE(start + 13));
      this.#xid = data.readUInt32BE(start + 17);
      return { kind: 'begin', commitLsn: this.#commitLsn, commitTimeMs: this.#commitTimeMs, xid: this.#xid };
    }
    if (tag === COMMIT && end - start >= 26)
      return { kind: 'commit', endLsn: data.readBigUInt64BE(start + 10) };
    const whole = start === 0 && end === data.length ? data : data.subarray(start, end);
    // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
    const msg: any = this.#parser.parse(whole);
    switch (msg.tag) {
      case 'begin':
        this.#commitLsn = msg.commitLsn ? parseLsn(msg.commitLsn) : 0n;
        this.#commitTimeMs = Number(msg.commitTime / 1000n);
        // The parser reads it as a signed int32: xids above 2^31 would come out negative.
        this.#xid = msg.xid >>> 0;
        return {
          kind: 'begin',
          commitLsn: this.#commitLsn,
          commitTimeMs: this.#commitTimeMs,
          xid: this.#xid,
        };
      case 'commit':
        return { kind: 'commit', endLsn: parseLsn(msg.commitEndLsn) };
      case 'relation':
        // A relation's OID can be reused after a DROP; a newer RELATION message always wins.
        if (msg.schema === this.#schema && msg.name === this.#table) {
          this.#outbox.set(msg.relationOid, outboxRelation(msg.columns));
          this.#names.set(
            msg.relationOid,
            msg.columns.map((c: { name: string }) => c.name),
          );
          this.#others.delete(msg.relationOid);
        } else {
          this.#outbox.delete(msg.relationOid);
          this.#others.set(msg.relationOid, `${msg.schema}.${msg.name}`);
        }
        return { kind: 'ignored' };
      case 'message':
        return {
          kind: 'message',
          prefix: msg.prefix,
          content: Buffer.from(msg.content),
          transactional: msg.transactional,
          lsn: msg.messageLsn ? parseLsn(msg.messageLsn) : 0n,
        };
      default:
        return { kind: 'ignored' };
    }
  }

  /** INSERT, UPDATE, DELETE (protocol 1: tag, relation OID, tuples). The publication sends inserts only. */
  #change(tag: number, data: Buffer, start: number, end: number): Decoded {
    if (tag !== INSERT) return { kind: 'ignored' };
    const oid = end - start >= 5 ? data.readInt32BE(start + 1) : 0;
    const outbox = this.#outbox.get(oid);
    if (outbox && this.#columnsMode) {
      const row = readColumnsTuple(data, this.#names.get(oid) ?? [], start, end);
      if (!row) throw new Error(`malformed pgoutput INSERT into ${this.#schema}.${this.#table}`);
      // The insert's own WAL position is in the XLogData header before the message, when there is one.
      const walPosition = start >= 25 ? data.readBigUInt64BE(start - 24) : 0n;
      this.#event.event = columnsEvent(
        row,
        this.#columnsMode,
        walPosition,
        this.#commitLsn,
        this.#commitTimeMs,
        this.#xid,
      );
      return this.#event;
    }
    if (outbox) {
      const v = this.#values;
      if (!readOutboxValues(data, outbox, v, this.keepViews, start, end, this.checkUtf8))
        throw new Error(`malformed pgoutput INSERT into ${this.#schema}.${this.#table}`);
      // A row's values are judged later, per event (route/row-check.ts).
      this.#event.event = eventOf(v, this.#commitLsn, this.#commitTimeMs, this.#xid);
      return this.#event;
    }
    const other = this.#others.get(oid);
    if (other === undefined)
      throw new Error(`pgoutput INSERT into relation ${oid} before its RELATION message`);
    return { kind: 'other-table', table: other };
  }
}

const BEGIN = 0x42; // 'B': final LSN (8), commit time (8, µs since 2000-01-01), xid (4)
const COMMIT = 0x43; // 'C': flags (1), commit LSN (8), end LSN (8), commit time (8)

/** Microseconds between PostgreSQL's epoch (2000-01-01) and Unix's. */
const PG_EPOCH_US = 946_684_800_000_000;

/**
 * A commit timestamp (µs since 2000-01-01 as two uint32 halves) in ms since the Unix epoch,
 * truncated like the library's BigInt division. Exact: µs values up to the year 2255 stay
 * below 2^53, and the remainder is taken before dividing.
 */
export function unixMs(hi: number, lo: number): number {
  const us = hi * 4294967296 + lo + PG_EPOCH_US;
  return (us - (us % 1000)) / 1000;
}

const INSERT = 0x49; // 'I'
const UPDATE = 0x55; // 'U'
const DELETE = 0x44; // 'D'
const NEW_TUPLE = 0x4e; // 'N'
const TEXT = 0x74; // 't'
const BINARY = 0x62; // 'b'
const NULL = 0x6e; // 'n'
const BYTEA = 17;
const BACKSLASH = 0x5c;
const LOWER_X = 0x78;

/**
 * The outbox columns the relay reads (what rowToEvent uses), each with its slot in readOutboxInsert's
 * values; a tuple's other columns (status, attempts, columns a user added) are skipped unread.
 */
const FIELD: Readonly<Record<keyof OutboxRow, number>> = {
  id: 0,
  event_id: 1,
  aggregate_type: 2,
  aggregate_id: 3,
  event_type: 4,
  payload: 5,
  content_type: 6,
  headers: 7,
  traceparent: 8,
  created_at: 9,
};
export const READ_COLUMNS = Object.keys(FIELD) as readonly (keyof OutboxRow)[];

/** A column of a RELATION message, as pg-logical-replication reads it (with pg's text parser for its type). */
export interface RelationColumn {
  name: string;
  typeOid: number;
  parser: TextParser;
}

/** The outbox table's columns, in tuple order, as readOutboxInsert reads them. */
export interface OutboxRelation {
  /** The column's FIELD slot, or -1: not read. */
  field: readonly number[];
  typeOid: readonly number[];
  parser: readonly TextParser[];
  /** Per column: the last value of a text column the relay reads (TextMemo), or null. */
  memo: readonly (TextMemo | null)[];
}

export function outboxRelation(columns: readonly RelationColumn[]): OutboxRelation {
  const field = columns.map((c) => (Object.hasOwn(FIELD, c.name) ? FIELD[c.name as keyof OutboxRow] : -1));
  return {
    field,
    typeOid: columns.map((c) => c.typeOid),
    parser: columns.map((c) => c.parser),
    memo: columns.map((c, i) => (field[i]! >= 0 && TEXT_TYPES.has(c.typeOid) ? new TextMemo() : null)),
  };
}

/** text, varchar, bpchar, name: the same bytes in text and binary format; pg parses them into strings. */
const TEXT_TYPES: ReadonlySet<number> = new Set([25, 1043, 1042, 19]);

/** Longest value a TextMemo keeps (aggregate types, event types and content types are short). */
const MEMO_BYTES = 64;

/**
 * The last value of one text column and its bytes. Consecutive rows mostly repeat their aggregate
 * type, event type and content type: the repeated value is the same string, read once — no new
 * string to allocate, keep alive while the event is in flight and copy at every young-generation
 * collection, and lookups keyed by it (topic, content type) find its hash already computed.
 */
export class TextMemo {
  readonly #bytes = Buffer.alloc(MEMO_BYTES);
  #len = -1;
  #value: unknown = undefined;

  read(data: Buffer, start: number, end: number, parser: TextParser): unknown {
    const len = end - start;
    if (len === this.#len) {
      const b = this.#bytes;
      let k = 0;
      while (k < len && b[k] === data[start + k]) k++;
      if (k === len) return this.#value;
    }
    const value = parser(utf8Text(data, start, end));
    if (len <= MEMO_BYTES) {
      // A loop, not Buffer#copy: its argument checks cost more than copying a few bytes.
      const b = this.#bytes;
      for (let k = 0; k < len; k++) b[k] = data[start + k]!;
      this.#len = len;
      this.#value = value;
    }
    return value;
  }
}

/**
 * An INSERT (protocol 1: 'I', relation OID, 'N', tuple) into the outbox table, read straight from
 * data[from, to) into `v` (FIELD's slots; a column the table lacks stays undefined). Only the
 * columns the relay reads are decoded. A text value ('t') is parsed by the same pg type parser
 * pg-logical-replication would use, without a TextDecoder pass and a Buffer view per column; a
 * bytea in hex format is hex-decoded without going through a UTF-8 string. A binary value ('b',
 * pgoutput's binary mode) is read by its type's binary reader into the same value
 * (binary-values.ts); a bytea is copied as is, or kept as a view of `data` with `keepViews`. Text
 * columns go through their TextMemo. false for
 * a malformed message (a column count that does not match the relation, an unknown value kind, a
 * short message).
 */
export function readOutboxValues(
  data: Buffer,
  rel: OutboxRelation,
  v: unknown[],
  keepViews = false,
  from = 0,
  to = data.length,
  checkUtf8 = false,
): boolean {
  if (to - from < 8 || data[from + 5] !== NEW_TUPLE) return false;
  const n = data.readInt16BE(from + 6);
  if (n !== rel.field.length) return false;
  v.fill(undefined);
  let p = from + 8;
  for (let i = 0; i < n; i++) {
    if (p >= to) return false;
    const kind = data[p];
    const f = rel.field[i]!;
    if (kind === NULL) {
      if (f >= 0) v[f] = null;
      p += 1;
      continue;
    }
    if ((kind !== TEXT && kind !== BINARY) || p + 5 > to) return false;
    const len = data.readInt32BE(p + 1);
    const start = p + 5;
    const end = start + len;
    if (len < 0 || end > to) return false;
    p = end;
    if (f < 0) continue;
    const typeOid = rel.typeOid[i]!;
    if (checkUtf8) {
      const bad = notUtf8(data, start, end, kind === BINARY, typeOid);
      if (bad) {
        v[f] = bad;
        continue;
      }
    }
    const memo = rel.memo[i];
    if (memo) v[f] = memo.read(data, start, end, rel.parser[i]!);
    else if (kind === BINARY) v[f] = readBinaryValue(data, start, end, typeOid, rel.parser[i]!, keepViews);
    else if (typeOid === BYTEA && len >= 2 && data[start] === BACKSLASH && data[start + 1] === LOWER_X) {
      // pg's bytea parser: Buffer.from(text.slice(2), 'hex'); hex digits are ASCII, so latin1 is the same text.
      v[f] = Buffer.from(data.toString('latin1', start + 2, end), 'hex');
    } else v[f] = rel.parser[i]!(utf8Text(data, start, end));
  }
  return p === to;
}

/** readOutboxValues as an OutboxRow, or null for a malformed message. */
export function readOutboxInsert(data: Buffer, rel: OutboxRelation): OutboxRow | null {
  const v: unknown[] = new Array(READ_COLUMNS.length);
  if (!readOutboxValues(data, rel, v)) return null;
  // One object shape for every row (the slots are FIELD's).
  return {
    id: v[0],
    event_id: v[1],
    aggregate_type: v[2],
    aggregate_id: v[3],
    event_type: v[4],
    payload: v[5],
    content_type: v[6],
    headers: v[7],
    traceparent: v[8],
    created_at: v[9],
  } as OutboxRow;
}

/**
 * The event of values read by readOutboxValues: rowToEvent's mapping (lifecycle/outbox-row.ts),
 * without an OutboxRow in between. Never throws: route/row-check.ts judges the values.
 */
function eventOf(v: readonly unknown[], lsn: Lsn, commitTimeMs: number, xid: number): OutboxEvent {
  return {
    id: v[0],
    eventId: v[1],
    aggregateType: v[2],
    aggregateId: v[3],
    eventType: v[4],
    payload: v[5],
    contentType: v[6],
    headers: v[7] ?? {},
    traceparent: v[8],
    createdAt: v[9],
    lsn,
    commitTimeMs,
    xid,
  } as OutboxEvent;
}
