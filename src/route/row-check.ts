import type { OutboxEvent } from './event.ts';

/** W3C traceparent, version 00 layout; version ff is forbidden by the spec (the SDK checks it too). */
export const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * Rows are hostile input (design.md §7): the outbox table may be user-owned or hand-made, with
 * its NOT NULL and CHECK constraints gone or its column types changed. This is the one check of
 * a decoded row's values before anything looks them up, calls string methods on them or hands
 * them to an encoder. A row that fails it is a permanent failure of that event, recorded on the
 * row with the reason returned here: it names the column and the fix.
 *
 * What the contract (docs/outbox-table.md) allows is published as is: a NULL payload is a
 * tombstone, NULL headers are no headers.
 */
/**
 * Longest aggregate_id (the message key) the relay publishes; real aggregate ids are tens of
 * bytes. Beyond it: kafkajs' murmur2 partitioner is super-linear in the key's length, all of it
 * on the event loop (measured: 16 kB 16 ms, 64 kB 170 ms, 200 kB 10 s), and PostgreSQL cannot
 * index the row as failed/dead/parked (a btree entry holds at most ~2.7 kB).
 */
export const MAX_KEY_BYTES = 2048;

/**
 * A value pgoutput sent in its type's binary send format for a type the relay has no binary
 * reader for (replication/binary-values.ts). The relay asks for binary values only when the
 * outbox columns it reads all have readable types; this appears when a column's type changed
 * after the relay started streaming: the row fails here, naming the column.
 */
export class UnreadableValue {
  readonly typeOid: number;

  constructor(typeOid: number) {
    this.typeOid = typeOid;
  }
}

/**
 * A text value whose bytes are not UTF-8. A SQL_ASCII database stores any bytes in a text
 * column; converted for a UTF8 client, such a value fails the walsender itself (22021) at every
 * stream start — the whole stream stops at that row. So in a SQL_ASCII database the relay streams
 * with the database's own encoding (no conversion: replication/connection.ts) and the decoder
 * checks the text values it reads, marking a bad one with this: its row becomes its event's
 * permanent failure (ROW_ENCODING, recorded 'discarded': the sweeper could not read it back
 * through a UTF8 connection either), and the stream goes on.
 */
export class NotUtf8Value {
  /** Where the first byte that is not ASCII sits in the value, and what it is. */
  readonly offset: number;
  readonly byte: number;

  constructor(offset: number, byte: number) {
    this.offset = offset;
    this.byte = byte;
  }
}

/** Whether a column of the row holds bytes that are not UTF-8 (see NotUtf8Value). */
export function hasNotUtf8Value(e: OutboxEvent): boolean {
  // The event's types say string; a hostile row's values may be anything (the check's premise).
  const values: readonly unknown[] = [
    e.eventId,
    e.aggregateType,
    e.aggregateId,
    e.eventType,
    e.contentType,
    e.headers,
    e.traceparent,
  ];
  return values.some((v) => v instanceof NotUtf8Value);
}

/** The way out for one bad row (docs/operator-cli.md). */
const FIX_ROW =
  'correct the row (UPDATE … WHERE id = <id>) and `outbox-relay events resend <id>`, or `outbox-relay events discard <id>`';

export function checkEvent(e: OutboxEvent): string | null {
  const fixNull = (column: string, why: string) =>
    `${column} is NULL: ${why}. Fix: ${FIX_ROW}; restore the column's NOT NULL constraint (docs/outbox-table.md)`;
  const fixType = (column: string, value: unknown, want: string) =>
    value instanceof NotUtf8Value
      ? `${column} holds ${describe(value)}`
      : `${column} is ${describe(value)}, not ${want}. Fix: ${FIX_ROW}; give the column the type in docs/outbox-table.md`;

  if (e.eventId === null || e.eventId === undefined)
    return fixNull('event_id', 'consumers deduplicate on the event id');
  if (typeof e.eventId !== 'string') return fixType('event_id', e.eventId, 'a uuid');
  if (e.aggregateType === null || e.aggregateType === undefined)
    return fixNull('aggregate_type', 'it chooses the topic');
  if (typeof e.aggregateType !== 'string') return fixType('aggregate_type', e.aggregateType, 'text');
  if (e.aggregateId === null || e.aggregateId === undefined)
    return fixNull('aggregate_id', "it is the message key that keeps an aggregate's events in order");
  if (typeof e.aggregateId !== 'string') return fixType('aggregate_id', e.aggregateId, 'text');
  // A UTF-16 code unit is at most 3 UTF-8 bytes: short keys need no count.
  const keyBytes = e.aggregateId.length * 3 <= MAX_KEY_BYTES ? 0 : Buffer.byteLength(e.aggregateId);
  if (keyBytes > MAX_KEY_BYTES)
    return `aggregate_id is ${keyBytes} bytes, over the relay's limit of ${MAX_KEY_BYTES} for a message key (longer keys stall the Kafka client's partitioner and cannot be indexed as failed). Fix: ${FIX_ROW}; use short aggregate ids`;
  if (e.eventType === null || e.eventType === undefined)
    return fixNull('event_type', 'it is the event_type header consumers dispatch on');
  if (typeof e.eventType !== 'string') return fixType('event_type', e.eventType, 'text');
  if (e.payload !== null && !Buffer.isBuffer(e.payload)) return fixType('payload', e.payload, 'bytea');
  if (e.contentType === null || e.contentType === undefined)
    return fixNull('content_type', 'it is the content-type header (the migrated table defaults it)');
  if (typeof e.contentType !== 'string') return fixType('content_type', e.contentType, 'text');
  if (!(e.createdAt instanceof Date) || !Number.isFinite(e.createdAt.getTime()))
    return `created_at is ${describe(e.createdAt)}, not a finite timestamp: it is the message timestamp. Fix: ${FIX_ROW} (the migrated table defaults it to clock_timestamp())`;
  const headers = checkHeaders(e.headers);
  if (headers) return headers;
  if (e.traceparent !== null && e.traceparent !== undefined) {
    if (typeof e.traceparent !== 'string') return fixType('traceparent', e.traceparent, 'text');
    if (!TRACEPARENT.test(e.traceparent))
      return `traceparent ${quote(e.traceparent)} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>). Fix: ${FIX_ROW} (a valid traceparent or NULL)`;
  }
  return null;
}

function checkHeaders(headers: unknown): string | null {
  const fix = `Fix: ${FIX_ROW} (headers: a JSON object of string values, docs/outbox-table.md)`;
  if (
    headers === null ||
    typeof headers !== 'object' ||
    Array.isArray(headers) ||
    headers instanceof UnreadableValue ||
    headers instanceof NotUtf8Value
  )
    return headers instanceof NotUtf8Value
      ? `headers holds ${describe(headers)}`
      : `headers is ${describe(headers)}, not a JSON object. ${fix}`;
  for (const name in headers) {
    if (!Object.hasOwn(headers, name)) continue;
    const value = (headers as Record<string, unknown>)[name];
    if (typeof value !== 'string')
      return `headers.${quote(name)} is ${describe(value)}: header values must be strings (convert it, or move it into the payload). ${fix}`;
  }
  return null;
}

/** A value for a message: its JSON type and a bounded preview (rows may hold megabytes). */
function describe(v: unknown): string {
  if (v === null) return 'NULL';
  if (v === undefined) return 'missing';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Date) return 'an invalid timestamp';
  if (v instanceof UnreadableValue)
    return `a value of type OID ${v.typeOid} in binary format, which the relay does not read`;
  if (v instanceof NotUtf8Value)
    return `bytes that are not UTF-8 (0x${v.byte.toString(16).padStart(2, '0')} at byte ${v.offset}; the database's encoding is SQL_ASCII, which stores any bytes), so no message can carry it as text; the row is recorded 'discarded' (convert the bytes to UTF-8, then \`outbox-relay replay --event-id <event_id>\`)`;
  if (Buffer.isBuffer(v)) return 'bytes';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return `the string ${quote(v)}`;
  return `a ${typeof v} (${quote(String(v))})`;
}

/** JSON-quoted, at most ~80 characters of the value. */
export function quote(s: string): string {
  return s.length > 80 ? `${JSON.stringify(s.slice(0, 80))}… (${s.length} characters)` : JSON.stringify(s);
}
