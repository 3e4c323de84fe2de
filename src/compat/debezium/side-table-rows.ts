import type { Config } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import { errorMessage } from '../../errors.ts';
import { columnsEvent } from '../../replication/columns-tuple.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { dlqCopy } from '../../sweeper/dead-letter.ts';
import type { Rerouted, SweepStore } from '../../sweeper/sweep-store.ts';
import { columnsModeOf, type DebeziumRouting } from './event-router-options.ts';
import { type DebeziumRoute, routeDebezium } from './route.ts';
import type { DebeziumSideStore } from './side-store.ts';
import {
  claimDueSide,
  claimSideParked,
  heldSideAggregates,
  pruneSideSettled,
  releasableSideAggregates,
  type SideRow,
  settleSideRow,
  sideHasUnresolvedHead,
  sideUnhealthyCounts,
} from './side-table.ts';
import { tableColumns } from './table-columns.ts';

type Row = SideRow & { id: string };

/**
 * The sweeper's rows in the Debezium preset's side table (side-table.ts): the
 * events, as the WAL carried them, that could not be published. A row is routed again from those
 * columns, so a retry writes the bytes the stream would have written. An aggregate is the
 * route.by.field column's text and the table.field.event.key column's, as the stream names it.
 */
export class SideTableRows implements SweepStore<Row> {
  readonly db;
  readonly outboxTable = null;
  readonly #table: string;
  readonly #slot: string;
  readonly #routing: DebeziumRouting;
  readonly #columns: { routeBy: string; key: string | null };
  readonly #c: Pick<Config, 'schema' | 'table'>;
  /** The table's columns, read from the catalog at the first retry (as the stream reads them at its start). */
  #route: DebeziumRoute | null = null;

  constructor(
    store: DebeziumSideStore,
    slot: string,
    routing: DebeziumRouting,
    c: Pick<Config, 'schema' | 'table'>,
  ) {
    this.db = store.db;
    this.#table = store.failedTable;
    this.#slot = slot;
    this.#routing = routing;
    this.#columns = { routeBy: routing.routeByField, key: routing.fieldEventKey };
    this.#c = c;
  }

  async reroute(row: Row): Promise<Rerouted> {
    this.#route ??= {
      routing: this.#routing,
      table: { schema: this.#c.schema, table: this.#c.table },
      columns: await tableColumns(this.db, this.#c.schema, this.#c.table),
      state: { runId: crypto.randomUUID() },
    };
    const mode = columnsModeOf(this.#routing);
    // The side table's `columns` is jsonb an operator may have edited: anything but an object of
    // texts (or nulls) is this row's permanent failure, never a round that throws (and rolls back) for good.
    const invalid = invalidColumns(row.columns);
    if (invalid) {
      const event = columnsEvent({}, mode, BigInt(row.walPosition), 0n, Date.now(), 0);
      return {
        event,
        error: {
          class: 'permanent',
          reason: 'ROW_INVALID',
          message: `the side table's columns of this event ${invalid}: each column's text (or null) by name is expected, as the relay wrote it; fix the row's columns, or discard it`,
        },
      };
    }
    const event = columnsEvent(row.columns, mode, BigInt(row.walPosition), 0n, Date.now(), 0);
    try {
      return { event, message: routeDebezium(event, this.#route) };
    } catch (e) {
      return { event, error: { class: 'permanent', reason: 'ROW_INVALID', message: errorMessage(e) } };
    }
  }

  /** The record as routed, on the dead-letter topic; none for a row the preset cannot route. */
  deadLetter(r: Rerouted, dlqTopic: string, attempts: number, error: Classified): OutboundMessage | null {
    return 'message' in r ? dlqCopy(r.message, dlqTopic, attempts, error) : null;
  }

  async claimDue(
    client: Parameters<SweepStore['claimDue']>[0],
    limit: number,
    maxBytes: number,
  ): Promise<Row[]> {
    return withIds(await claimDueSide(client, this.#table, this.#slot, limit, maxBytes));
  }
  /** The side table's attempts count the refusals (`events list` shows them): a publish adds none. */
  retryPublished: SweepStore<Row>['retryPublished'] = (client, row) =>
    settleSideRow(client, this.#table, this.#slot, row.walPosition, {
      status: 'published',
      attempts: row.attempts,
    });
  retryLater: SweepStore<Row>['retryLater'] = (client, row, attempts, error, retryInMs) =>
    settleSideRow(client, this.#table, this.#slot, row.walPosition, {
      status: 'failed',
      attempts,
      error,
      retryInMs,
    });
  retryDead: SweepStore<Row>['retryDead'] = (client, row, attempts, error) =>
    settleSideRow(client, this.#table, this.#slot, row.walPosition, { status: 'dead', attempts, error });

  pruneSettled: NonNullable<SweepStore<Row>['pruneSettled']> = (window, limit) =>
    pruneSideSettled(this.db, this.#table, this.#slot, this.#columns, window, limit);

  releasable(): Promise<[string, string][]> {
    return releasableSideAggregates(this.db, this.#table, this.#slot, this.#columns);
  }
  hasUnresolvedHead: SweepStore<Row>['hasUnresolvedHead'] = (client, aggregate) =>
    sideHasUnresolvedHead(client, this.#table, this.#slot, this.#columns, aggregate);
  async claimParked(
    client: Parameters<SweepStore['claimParked']>[0],
    aggregate: [string, string],
    limit: number,
  ): Promise<Row[]> {
    return withIds(await claimSideParked(client, this.#table, this.#slot, this.#columns, aggregate, limit));
  }
  released: SweepStore<Row>['released'] = (client, row) =>
    settleSideRow(client, this.#table, this.#slot, row.walPosition, {
      status: 'published',
      attempts: row.attempts,
    });
  releaseFailed: SweepStore<Row>['releaseFailed'] = (client, row, error, retryInMs) =>
    settleSideRow(client, this.#table, this.#slot, row.walPosition, {
      status: 'failed',
      attempts: 1,
      error,
      retryInMs,
    });

  async held(keys: readonly [string, string][]): Promise<[string, string][]> {
    const wanted = new Set(keys.map((k) => JSON.stringify(k)));
    return (await this.heldAll()).filter((k) => wanted.has(JSON.stringify(k)));
  }
  heldAll(): Promise<[string, string][]> {
    return heldSideAggregates(this.db, this.#table, this.#slot, this.#columns.routeBy, this.#columns.key);
  }
  unhealthyCounts: SweepStore<Row>['unhealthyCounts'] = () =>
    sideUnhealthyCounts(this.db, this.#table, this.#slot);
}

const withIds = (rows: SideRow[]): Row[] => rows.map((r) => ({ ...r, id: r.walPosition }));

/** Why a side-table row's `columns` is not an object of texts or nulls; null when it is. */
export function invalidColumns(columns: unknown): string | null {
  if (columns === null || typeof columns !== 'object' || Array.isArray(columns))
    return `are ${columns === null ? 'null' : Array.isArray(columns) ? 'an array' : `a ${typeof columns}`}, not an object`;
  for (const [name, v] of Object.entries(columns))
    if (v !== null && typeof v !== 'string')
      return `hold ${JSON.stringify(name).slice(0, 80)} as ${Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`}, not a text`;
  return null;
}
