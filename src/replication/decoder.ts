import { PgoutputPlugin } from 'pg-logical-replication';
import { type OutboxRow, rowToEvent } from '../lifecycle/outbox-row.ts';
import type { OutboxEvent } from '../route/event.ts';
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
 * Turns pgoutput messages into outbox events, using pg-logical-replication's parser
 * (text-format tuples, parsed with pg's type parsers: bytea → Buffer, jsonb → object).
 * INSERTs into the outbox table, the bulk of the stream, are read by readOutboxInsert below.
 */
export class OutboxDecoder {
  // Only the plugin's parser is used; the stream is driven by ReplicationConnection.
  readonly #parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  readonly #schema: string;
  readonly #table: string;
  /** The outbox table's relation (from the last RELATION message that named it), by relation OID. */
  readonly #outbox = new Map<number, OutboxColumn[]>();
  #commitLsn: Lsn = 0n;
  #commitTimeMs = 0;
  #xid = 0;

  constructor(schema: string, table: string) {
    this.#schema = schema;
    this.#table = table;
  }

  decode(data: Buffer): Decoded {
    if (data[0] === INSERT) {
      const columns = this.#outbox.get(data.readInt32BE(1));
      if (columns) {
        const row = readOutboxInsert(data, columns);
        // rowToEvent never throws: a row's values are judged later, per event (route/row-check.ts).
        if (row)
          return { kind: 'event', event: rowToEvent(row, this.#commitLsn, this.#commitTimeMs, this.#xid) };
      }
    }
    // biome-ignore lint/suspicious/noExplicitAny: the parser's message union is loosely typed.
    const msg: any = this.#parser.parse(data);
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
        if (msg.schema === this.#schema && msg.name === this.#table)
          this.#outbox.set(msg.relationOid, msg.columns);
        else this.#outbox.delete(msg.relationOid);
        return { kind: 'ignored' };
      case 'insert': {
        if (msg.relation.schema !== this.#schema || msg.relation.name !== this.#table) {
          return { kind: 'other-table', table: `${msg.relation.schema}.${msg.relation.name}` };
        }
        // rowToEvent never throws: a row's values are judged later, per event (route/row-check.ts).
        return {
          kind: 'event',
          event: rowToEvent(msg.new as OutboxRow, this.#commitLsn, this.#commitTimeMs, this.#xid),
        };
      }
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
}

const INSERT = 0x49; // 'I'
const NEW_TUPLE = 0x4e; // 'N'
const TEXT = 0x74; // 't'
const NULL = 0x6e; // 'n'
const BYTEA = 17;
const BACKSLASH = 0x5c;
const LOWER_X = 0x78;

/** A column of a RELATION message, as pg-logical-replication reads it (with pg's text parser for its type). */
interface OutboxColumn {
  name: string;
  typeOid: number;
  parser: (text: string) => unknown;
}

/**
 * An INSERT (protocol 1: 'I', relation OID, 'N', tuple) into the outbox table, read straight from
 * the message: each text value is parsed by the same pg type parser pg-logical-replication would
 * use, without a TextDecoder pass and a Buffer view per column, and a bytea in hex format (the
 * 500-byte payload arrives as 1,000 hex characters) is hex-decoded without going through a
 * UTF-8 string. null for anything else (binary or unchanged-TOAST values, a column count that
 * does not match the relation, a short message): pg-logical-replication's parser then reads it.
 */
export function readOutboxInsert(data: Buffer, columns: readonly OutboxColumn[]): OutboxRow | null {
  if (data.length < 8 || data[5] !== NEW_TUPLE) return null;
  const n = data.readInt16BE(6);
  if (n !== columns.length) return null;
  const row: Record<string, unknown> = Object.create(null);
  let p = 8;
  for (let i = 0; i < n; i++) {
    const kind = data[p];
    const column = columns[i]!;
    if (kind === NULL) {
      row[column.name] = null;
      p += 1;
      continue;
    }
    if (kind !== TEXT || p + 5 > data.length) return null;
    const len = data.readInt32BE(p + 1);
    const start = p + 5;
    const end = start + len;
    if (len < 0 || end > data.length) return null;
    if (column.typeOid === BYTEA && len >= 2 && data[start] === BACKSLASH && data[start + 1] === LOWER_X) {
      // pg's bytea parser: Buffer.from(text.slice(2), 'hex'); hex digits are ASCII, so latin1 is the same text.
      row[column.name] = Buffer.from(data.toString('latin1', start + 2, end), 'hex');
    } else {
      // A leading BOM: TextDecoder (the library's path) drops it, Buffer's UTF-8 keeps it.
      if (len >= 3 && data[start] === 0xef && data[start + 1] === 0xbb && data[start + 2] === 0xbf)
        return null;
      row[column.name] = column.parser(data.toString('utf8', start, end));
    }
    p = end;
  }
  return p === data.length ? (row as unknown as OutboxRow) : null;
}
