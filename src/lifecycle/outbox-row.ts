import { EVENT_COLUMNS, type OutboxRow } from '../route/outbox-row.ts';

/** A row as the sweeper reads it back: the event's columns plus its lifecycle state. */
export interface StoredRow extends OutboxRow {
  status: string;
  attempts: number;
  /** The sweeper's claim (transitions.ts claimDueFailed): the payload was too large to read back, so it is null here. */
  too_large?: boolean;
  /** With too_large: the payload's size in bytes. */
  payload_bytes?: number;
}

/**
 * The select list of a stored row, `payload` standing for the payload column (an expression in its
 * place: the sweeper's claim reads large ones only up to a size). Note: renders id as text; order
 * by the table's bigint column (alias it), never by this output.
 */
export function rowColumns(payload = 'payload'): string {
  const event = EVENT_COLUMNS.slice(1).map((c) => (c === 'payload' ? payload : c));
  return `id::text, event_id::text, ${event.join(', ')}, created_at, status, attempts`;
}

export const ROW_COLUMNS = rowColumns();
