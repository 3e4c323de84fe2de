import type { OutboxEvent } from '../route/event.ts';
import { utf8Text } from './binary-values.ts';
import type { Lsn } from './lsn.ts';

/**
 * A preset's rows read by column name (the Debezium preset's, compat/debezium/): a table of Debezium's shape, not the relay's, so
 * every column is kept as PostgreSQL's text for it (what Debezium reads from pgoutput), by name.
 * The stream asks for text values in this mode (connection.ts `text`).
 */
export interface ColumnsMode {
  /** The columns the pipeline's own fields come from (Debezium's option names in brackets). */
  eventId: string; // table.field.event.id
  key: string | null; // table.field.event.key
  routeBy: string; // route.by.field
  type: string; // table.field.event.type
  payload: string; // table.field.event.payload
}

/**
 * An INSERT's new tuple ('I', relation OID, 'N', tuple) as text by column name; null for a
 * malformed message. A binary value ('b') is refused: this mode streams text only.
 */
export function readColumnsTuple(
  data: Buffer,
  names: readonly string[],
  from: number,
  to: number,
): Record<string, string | null> | null {
  if (to - from < 8 || data[from + 5] !== 0x4e) return null;
  const n = data.readInt16BE(from + 6);
  if (n !== names.length) return null;
  const row: Record<string, string | null> = {};
  let p = from + 8;
  for (let i = 0; i < n; i++) {
    if (p >= to) return null;
    const kind = data[p];
    if (kind === 0x6e /* n */ || kind === 0x75 /* u: unchanged TOAST, never in an INSERT */) {
      row[names[i]!] = null;
      p += 1;
      continue;
    }
    if (kind !== 0x74 /* t */ || p + 5 > to) return null;
    const len = data.readInt32BE(p + 1);
    const end = p + 5 + len;
    if (len < 0 || end > to) return null;
    row[names[i]!] = utf8Text(data, p + 5, end);
    p = end;
  }
  return p === to ? row : null;
}

/**
 * The event of such a row. `id` is the insert's WAL position (unique per row, the same on every
 * replay): a Debezium table has no bigint id, and with insert-then-delete no row at all.
 */
export function columnsEvent(
  row: Record<string, string | null>,
  m: ColumnsMode,
  walPosition: Lsn,
  commitLsn: Lsn,
  commitTimeMs: number,
  xid: number,
): OutboxEvent {
  const payload = row[m.payload] ?? null;
  return {
    id: walPosition.toString(),
    eventId: row[m.eventId] ?? '',
    aggregateType: row[m.routeBy] ?? '',
    aggregateId: (m.key === null ? null : row[m.key]) ?? '',
    eventType: row[m.type] ?? '',
    payload: payload === null ? null : Buffer.from(payload, 'utf8'),
    contentType: 'application/json',
    headers: {},
    traceparent: null,
    createdAt: new Date(commitTimeMs),
    lsn: commitLsn,
    commitTimeMs,
    xid,
    columns: row,
  };
}
