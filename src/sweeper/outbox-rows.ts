import type { Classified } from '../errors.ts';
import type { StoredRow } from '../lifecycle/outbox-row.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { allHeldAggregates, heldAggregates, unhealthyCounts } from '../lifecycle/queries.ts';
import {
  claimDueFailed,
  claimParked,
  hasUnresolvedHead,
  releasableAggregates,
  released,
  releaseFailed,
  retryDead,
  retryLater,
  retryPublished,
  SWEEP_MAX_PAYLOAD_BYTES,
} from '../lifecycle/transitions.ts';
import type { OutboundMessage } from '../route/event.ts';
import { rowToEvent } from '../route/outbox-row.ts';
import { type RouteConfig, tryRoute } from '../route/router.ts';
import { dlqMessage } from './dead-letter.ts';
import type { Rerouted, SweepStore } from './sweep-store.ts';

/** The sweeper's rows in the outbox table: the statements of lifecycle/transitions.ts. */
export class OutboxRows implements SweepStore<StoredRow> {
  readonly db;
  readonly outboxTable;
  readonly #table: string;
  readonly #route: RouteConfig;

  constructor(store: OutboxStore, route: RouteConfig) {
    this.db = store.db;
    this.#table = store.table;
    this.outboxTable = { table: store.table, progress: store.progress };
    this.#route = route;
  }

  async reroute(row: StoredRow): Promise<Rerouted> {
    const event = rowToEvent(row);
    if (row.too_large)
      return {
        event,
        error: {
          class: 'permanent',
          reason: 'ROW_TOO_LARGE',
          message: `the payload of ${row.payload_bytes} bytes is larger than the sweeper reads back (${SWEEP_MAX_PAYLOAD_BYTES} bytes: PostgreSQL's client reads a bytea as hex text, and Node.js strings stop at 2^29 characters), so it is not retried; store large payloads elsewhere and send a reference, then discard this row (outbox-relay events discard)`,
        },
      };
    const routed = tryRoute(event, this.#route);
    if ('error' in routed)
      return { event, error: { class: 'permanent', reason: routed.reason, message: routed.error } };
    return { event, message: routed.message };
  }

  /**
   * Routed again to the dead-letter topic in the event's value format: even an unroutable event
   * has a copy — but not one whose payload was too large to read (it would be a copy without it).
   */
  deadLetter(r: Rerouted, dlqTopic: string, attempts: number, error: Classified): OutboundMessage | null {
    if ('error' in r && r.error.reason === 'ROW_TOO_LARGE') return null;
    const topic = 'message' in r ? r.message.topic : '';
    return dlqMessage(r.event, dlqTopic, topic, attempts, error, this.#route);
  }

  claimDue: SweepStore<StoredRow>['claimDue'] = (client, limit, maxBytes) =>
    claimDueFailed(client, this.#table, limit, maxBytes);
  retryPublished: SweepStore<StoredRow>['retryPublished'] = (client, row, attempts) =>
    retryPublished(client, this.#table, row.id, attempts);
  retryLater: SweepStore<StoredRow>['retryLater'] = (client, row, attempts, error, delayMs) =>
    retryLater(client, this.#table, row.id, attempts, error, delayMs);
  retryDead: SweepStore<StoredRow>['retryDead'] = (client, row, attempts, error) =>
    retryDead(client, this.#table, row.id, attempts, error);

  async releasable(): Promise<[string, string][]> {
    const rows = await releasableAggregates(this.db, this.#table);
    return rows.map((a) => [a.aggregate_type, a.aggregate_id]);
  }
  hasUnresolvedHead: SweepStore<StoredRow>['hasUnresolvedHead'] = (client, [type, id]) =>
    hasUnresolvedHead(client, this.#table, type, id);
  claimParked: SweepStore<StoredRow>['claimParked'] = (client, [type, id], limit) =>
    claimParked(client, this.#table, type, id, limit);
  released: SweepStore<StoredRow>['released'] = (client, row) => released(client, this.#table, row.id);
  releaseFailed: SweepStore<StoredRow>['releaseFailed'] = (client, row, error, delayMs) =>
    releaseFailed(client, this.#table, row.id, error, delayMs);

  async held(keys: readonly [string, string][]): Promise<[string, string][]> {
    const rows = await heldAggregates(this.db, this.#table, keys);
    return rows.map((r) => [r.aggregate_type, r.aggregate_id]);
  }
  heldAll(): Promise<[string, string][]> {
    return allHeldAggregates(this.db, this.#table);
  }
  unhealthyCounts: SweepStore<StoredRow>['unhealthyCounts'] = () => unhealthyCounts(this.db, this.#table);
}
