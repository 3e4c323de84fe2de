import { PgoutputPlugin } from 'pg-logical-replication';
import type { OutboxEvent } from '../route/event.ts';
import { type OutboxRow, rowToEvent } from '../store/outbox-row.ts';
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
 */
export class OutboxDecoder {
  // Only the plugin's parser is used; the stream is driven by ReplicationConnection.
  readonly #parser = new PgoutputPlugin({ protoVersion: 1, publicationNames: [] });
  readonly #schema: string;
  readonly #table: string;
  #commitLsn: Lsn = 0n;
  #commitTimeMs = 0;
  #xid = 0;

  constructor(schema: string, table: string) {
    this.#schema = schema;
    this.#table = table;
  }

  decode(data: Buffer): Decoded {
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
