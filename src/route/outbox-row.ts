import type { OutboxEvent } from './event.ts';

/**
 * The outbox table's event columns, in table order: what a producer inserts and replay copies
 * (sql/000001_outbox.sql; id, created_at and the lifecycle columns are the table's own). The one
 * spelling of the column list: SQL that names them builds it from here.
 */
export const EVENT_COLUMNS = [
  'event_id',
  'aggregate_type',
  'aggregate_id',
  'event_type',
  'payload',
  'content_type',
  'headers',
  'traceparent',
] as const;

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

/**
 * The one row → event mapping; `lsn`/`commitTimeMs` come from the stream's transaction when there
 * is one. Never throws, whatever the row holds (NULLs where the table says NOT NULL, other types):
 * row-check.ts judges the values.
 */
export function rowToEvent(
  r: OutboxRow,
  lsn = 0n,
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
