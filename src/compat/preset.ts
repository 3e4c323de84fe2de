import type pg from 'pg';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import type { Logger } from '../observability/logger.ts';
import type { ColumnsMode } from '../replication/columns-tuple.ts';
import type { Lsn } from '../replication/lsn.ts';
import type { OutboundMessage, OutboxEvent } from '../route/event.ts';
import type { RouteConfig } from '../route/router.ts';
import type { SweepStore } from '../sweeper/sweep-store.ts';
import type { PresetName } from './preset-facts.ts';

/**
 * A table preset: what kind of table the relay streams from, and where its outcomes go. Chosen
 * once at start from --compat (presets.ts) and handed to the core, which calls only this
 * interface (the PowerSync model: a variant is a module plugged into the core's interfaces).
 *
 *  - the outbox table (outbox.ts, the default): the relay's own table holds every outcome and
 *    the progress record;
 *  - Debezium's table (debezium/, --compat debezium): the application's table is only read; the
 *    events that cannot be published go to a side table, and the slot's confirmed position is
 *    the only progress.
 */
export interface RelayPreset {
  /** Where the stream and slot recovery record a batch's outcomes (outcome/record.ts). */
  readonly store: OutboxStore;
  /** Where the sweeper finds failed and parked rows; also what a session's blocked aggregates are read from. */
  readonly sweepStore: SweepStore;
  /**
   * Whether the table holds the relay's progress record: a session skips the ids it names, and
   * a lost slot's events are recovered from the table. false: the slot's confirmed position is
   * the only progress (Debezium's table: its events may exist only in the WAL).
   */
  readonly progressRecord: boolean;
  /** The stream's pieces (stream/session.ts). */
  readonly stream: StreamPreset;
}

/** What the stream asks of a preset. The default (OUTBOX_STREAM) changes nothing. */
export interface StreamPreset {
  /**
   * How rows are decoded: the outbox table's columns (null), or every column's text by name
   * (replication/columns-tuple.ts), for which the server is asked for text values.
   */
  readonly columns: ColumnsMode | null;
  /** Once per session, before the stream starts. */
  open(db: pg.Pool): Promise<PresetSession>;
}

/** A preset's part in one session. Every member is optional: absent, the stream does what it does for the outbox table. */
export interface PresetSession {
  /** Routes a row instead of router.ts' outbox routing; throws a RouteError for a row it cannot route. */
  route?: (event: OutboxEvent) => OutboundMessage;
  /** Filters the stream's events, transaction by transaction (the cutover from Debezium). */
  gate?: EventGate;
  /** Each event the stream queues, before its outcome is recorded. */
  queued?: (event: OutboxEvent) => void;
  /** The session ended. */
  end?: (log: Logger) => void;
}

/** Which events of a transaction the stream publishes; the order of events is kept. */
export interface EventGate {
  /** BEGIN, with the transaction's commit position. */
  begin(commitLsn: Lsn): void;
  /** An event at WAL position `lsn`: the events to publish now, possibly none. */
  event(e: OutboxEvent, lsn: bigint): readonly OutboxEvent[];
  /** COMMIT: the events still held that pass. */
  commit(): readonly OutboxEvent[];
}

/** The outbox table's stream: its own columns, routed by router.ts, every event published. */
export const OUTBOX_STREAM: StreamPreset = {
  columns: null,
  open: async () => ({}),
};

/** What picks the operator's events: the table, its routing, and the preset with its options. */
export type OperatorTarget = Pick<RouteConfig, 'topicTemplate' | 'topicOverrides'> & {
  schema: string;
  table: string;
  slot: string;
  compat?: PresetName;
  debezium?: Record<string, string>;
};

/** A preset as the operator commands, `status` and the console see it. */
export interface OperatorPreset {
  /** The events they work on: the outbox table's, or a side table's. */
  readonly events: OperatorEvents;
  /** The topic an event of this aggregate type is routed to, as the relay routes it; throws when none. */
  topicOf(aggregateType: string, eventType: string): string;
  /**
   * Whether the events live in the preset's own side table (`status` names it; until migrate
   * created it, `status` shows no counts) rather than the outbox table.
   */
  readonly sideTable: boolean;
  /** What the CLI commands quoted to an operator need beyond ids (` --compat debezium`, or ''). */
  readonly cliFlags: string;
  /** Why replay (copies of the table's rows) is not available, or null. */
  readonly noReplay: string | null;
}
