import type { Lsn } from '../replication/lsn.ts';
import type { OutboxEvent } from '../route/event.ts';

/** An outbox row's user-facing columns, as pg parses them (stream tuples and queries alike). */
export interface OutboxRow {
  id: string;
  event_id: string;
  aggregate_type: string;
  aggregate_id: string;
  event_type: string;
  payload: Buffer | null;
  content_type: string;
  headers: Record<string, unknown> | null;
  traceparent: string | null;
  created_at: Date;
}

/** A row as the sweeper reads it back: the columns above plus its lifecycle state. */
export interface StoredRow extends OutboxRow {
  status: string;
  attempts: number;
}

/** Note: renders id as text; order by the table's bigint column (alias it), never by this output. */
export const ROW_COLUMNS =
  'id::text, event_id::text, aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent, created_at, status, attempts';

/**
 * The one row → event mapping; `lsn`/`commitTimeMs` come from the stream's transaction when there
 * is one. Never throws, whatever the row holds (NULLs where the table says NOT NULL, other types):
 * route/row-check.ts judges the values.
 */
export function rowToEvent(
  r: OutboxRow,
  lsn: Lsn = 0n,
  commitTimeMs = r.created_at instanceof Date ? r.created_at.getTime() : 0,
  xid = 0,
): OutboxEvent {
  return {
    id: r.id,
    eventId: r.event_id,
    aggregateType: r.aggregate_type,
    aggregateId: r.aggregate_id,
    eventType: r.event_type,
    payload: r.payload,
    contentType: r.content_type,
    headers: r.headers ?? {},
    traceparent: r.traceparent,
    createdAt: r.created_at,
    lsn,
    commitTimeMs,
    xid,
  };
}
