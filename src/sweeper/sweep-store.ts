import type pg from 'pg';
import type { Classified } from '../errors.ts';
import type { OutboundMessage, OutboxEvent } from '../route/event.ts';

type Db = pg.Pool | pg.ClientBase;

/** A failed or parked row, whichever table holds it. */
export interface SweepRow {
  /** The row's id in its table (the outbox id; the side table's WAL position). */
  id: string;
  attempts: number;
}

/** A row routed again as the stream routes it: the message, or why it cannot be. */
export type Rerouted =
  | { event: OutboxEvent; message: OutboundMessage }
  | { event: OutboxEvent; error: Classified };

/**
 * Where the sweeper's rows live, and how they are routed: the outbox table (outbox-rows.ts) or
 * the Debezium preset's side table (compat/debezium/side-table-rows.ts). The sweeper (sweeper.ts) owns the
 * lifecycle — which rows are due, retried, dead, copied to the dead-letter topic, released in
 * order, counted — once for both; a store only says how each move is written.
 *
 * Every move runs on a row claimed FOR UPDATE in the status it leaves (`client`: the claim's
 * transaction). An aggregate is named as the stream names it ([aggregateType, aggregateId] of
 * its events), so the stream's blocked aggregates and the table's agree.
 */
export interface SweepStore<R extends SweepRow = SweepRow> {
  readonly db: pg.Pool;
  /**
   * The outbox table's own upkeep, which a side table has not: the progress record to compact,
   * retention to prune, and pending and settled rows to count. null for a side table.
   */
  readonly outboxTable: { table: string; progress: string } | null;
  reroute(row: R): Promise<Rerouted>;
  /** The dead-letter copy of a dead row's event; null when none can be made (its routing failed). */
  deadLetter(routed: Rerouted, dlqTopic: string, attempts: number, error: Classified): OutboundMessage | null;

  /** Due failed rows, oldest first: at most `limit`, and of them only the first within `maxBytes` (one at least). */
  claimDue(client: Db, limit: number, maxBytes: number): Promise<R[]>;
  retryPublished(client: Db, row: R, attempts: number): Promise<void>;
  retryLater(client: Db, row: R, attempts: number, error: string, delayMs: number): Promise<void>;
  retryDead(client: Db, row: R, attempts: number, error: string): Promise<void>;

  /** Aggregates with parked rows and no failed or dead row ahead of them. */
  releasable(): Promise<[type: string, id: string][]>;
  hasUnresolvedHead(client: Db, aggregate: [string, string]): Promise<boolean>;
  /** The aggregate's parked rows, in order. */
  claimParked(client: Db, aggregate: [string, string], limit: number): Promise<R[]>;
  released(client: Db, row: R): Promise<void>;
  /** The first parked row refused on release: it becomes its aggregate's failed head. */
  releaseFailed(client: Db, row: R, error: string, delayMs: number): Promise<void>;

  /** Of `keys`, the aggregates a failed, dead or parked row still holds. */
  held(keys: readonly [string, string][]): Promise<[string, string][]>;
  /** Every aggregate a failed, dead or parked row holds (what a session starts blocked: BlockedAggregates.replace). */
  heldAll(): Promise<[string, string][]>;
  /** Failed, dead and parked rows by status: how many, and the oldest's age in seconds. */
  unhealthyCounts(): Promise<Map<string, { n: string; oldest: string | null }>>;
  /**
   * A side table's retention (the outbox table's is lifecycle/retention.ts): deletes at most
   * `limit` settled rows past their window — published and discarded after `publishedMs`, dead
   * after `deadMs` when set, never a dead row that parked rows of its aggregate wait behind.
   * Returns the deleted rows by status. Absent where `outboxTable` is set.
   */
  pruneSettled?(
    window: { publishedMs: number; deadMs?: number },
    limit: number,
  ): Promise<Record<string, number>>;
}
