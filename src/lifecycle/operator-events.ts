import type pg from 'pg';
import { qualified } from '../store/sql-ident.ts';
import type { EventFilter } from './filter.ts';
import {
  countEvents,
  type EventRecord,
  type FailingRow,
  failingGroups,
  idsMatching,
  listEvents,
  readEvent,
  type StatusCounts,
  statusCounts,
  statusesOf,
} from './queries.ts';
import { discardEvents, resendEvents } from './transitions.ts';

/**
 * The events an operator looks at and resolves (`events list|count|show|resend|discard`,
 * `status`'s counts, the console): the relay's own outbox table, or with --compat debezium the
 * preset's side table (compat/debezium/side-events.ts). The commands and the console are written once
 * against this; each implementation keeps its own statements.
 *
 * resend and discard are guarded by status (failed or dead) and return the rows changed: the
 * caller compares it with what it meant to change (ops/events.ts resolveEvents).
 */
export interface OperatorEvents {
  /** The table, quoted: what messages and audit lines name. */
  readonly table: string;
  list(db: pg.ClientBase, f: EventFilter, limit: number): Promise<EventRecord[]>;
  /** Rows matching the filter, by status (statuses with no row are absent). */
  count(db: pg.ClientBase, f: EventFilter): Promise<Record<string, number>>;
  read(db: pg.ClientBase, id: string): Promise<EventRecord | null>;
  /** The status of each named event that exists, in id order. */
  statusesOf(db: pg.ClientBase, ids: readonly string[]): Promise<{ id: string; status: string }[]>;
  idsMatching(db: pg.ClientBase, f: EventFilter): Promise<string[]>;
  resend(db: pg.ClientBase, ids: readonly string[], resetAttempts: boolean): Promise<number>;
  discard(db: pg.ClientBase, ids: readonly string[]): Promise<number>;
  /** `status`: the events by status and the ages that matter (published: false leaves published out). */
  statusCounts(db: pg.ClientBase, o?: { published?: boolean }): Promise<StatusCounts>;
  /** `status`: failed and dead events by status, aggregate type, event type and reason (`class/REASON:`). */
  failingGroups(db: pg.ClientBase, limit: number): Promise<FailingRow[]>;
}

/** The relay's own outbox table (`schema` and `tableName` unquoted): queries.ts and transitions.ts. */
export function outboxEvents(schema: string, tableName: string): OperatorEvents {
  const table = qualified(schema, tableName);
  return {
    table,
    list: (db, f, limit) => listEvents(db, table, f, limit),
    count: (db, f) => countEvents(db, table, f),
    read: (db, id) => readEvent(db, table, id),
    statusesOf: (db, ids) => statusesOf(db, table, ids),
    idsMatching: (db, f) => idsMatching(db, table, f),
    resend: (db, ids, reset) => resendEvents(db, table, ids, reset),
    discard: (db, ids) => discardEvents(db, table, ids),
    statusCounts: (db, o) => statusCounts(db, schema, tableName, o),
    failingGroups: (db, limit) => failingGroups(db, table, limit),
  };
}
