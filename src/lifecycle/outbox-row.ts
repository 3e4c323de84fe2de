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

/** Note: renders id as text; order by the table's bigint column (alias it), never by this output. */
export const ROW_COLUMNS = `id::text, event_id::text, ${EVENT_COLUMNS.slice(1).join(', ')}, created_at, status, attempts`;
