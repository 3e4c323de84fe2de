import type { Config } from '../config/load.ts';
import { errorMessage } from '../errors.ts';
import type { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import type { DebeziumSideStore } from '../lifecycle/debezium-side-store.ts';
import {
  dueSideRows,
  heldSideAggregates,
  markSideFailed,
  markSidePublished,
  type SideRow,
  sideUnhealthyCounts,
} from '../lifecycle/debezium-side-table.ts';
import { failureBackoff, formatError } from '../lifecycle/failure-policy.ts';
import { UNHEALTHY } from '../lifecycle/statuses.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { columnsEvent, columnsModeOf } from '../replication/columns-tuple.ts';
import type { DebeziumRouting } from '../route/debezium/event-router-options.ts';
import { type DebeziumRoute, routeDebezium } from '../route/debezium/route.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Sink } from '../sinks/sink.ts';
import { tableColumns } from '../store/table-columns.ts';
import { SweepLoop } from './sweep-loop.ts';

export interface SideSweeperDeps {
  config: Config;
  sink: Sink;
  store: DebeziumSideStore;
  /** The stream's blocked aggregates (strict ordering): unblocked once nothing holds them. */
  blocked: BlockedAggregates;
  log: Logger;
  metrics: RelayMetrics;
}

/**
 * The Debezium preset's sweeper: the failure lifecycle of the side table
 * (lifecycle/debezium-side-table.ts). Every --sweep-interval-ms, in WAL order: a failed event
 * whose time has come is routed again from the columns the WAL carried (the same bytes the
 * stream would have written) and published; refused again, it is due again after the back-off,
 * or dead after --max-attempts (copied to --dead-letter-topic when set, with the x-dlq-*
 * headers). A parked event is released once its key has no failed or dead event before it. A
 * transient broker failure ends the round; nothing is counted against the event. After a round,
 * the aggregates the stream blocked that no failed, dead or parked row holds any more are
 * unblocked (the mark/unblockSince rule of lifecycle/blocked-aggregates.ts), so their next
 * events are published at once instead of parked and released a round later. Then the gauges
 * of the relay's own sweeper, of the side table: outbox_events{status} for failed, dead and
 * parked, outbox_events_parked, outbox_oldest_failed_age_seconds (docs/metrics.md); a retry counts
 * in outbox_retries_total, outbox_retry_exhaustions_total, outbox_dlq_published_total and, once
 * published, outbox_events_published_total as the relay's sweeper counts them.
 *
 * start() / stop() as the relay's Sweeper: one round at a time; stop() aborts and waits.
 */
export class DebeziumSideSweeper {
  readonly #d: SideSweeperDeps;
  readonly #routing: DebeziumRouting;
  #route: DebeziumRoute | null = null;
  readonly #loop: SweepLoop;

  constructor(deps: SideSweeperDeps, routing: DebeziumRouting) {
    this.#d = deps;
    this.#routing = routing;
    this.#loop = new SweepLoop((signal) => this.sweepOnce(signal), {
      intervalMs: deps.config.sweepIntervalMs,
      log: deps.log,
      failed: 'side table sweep failed; trying again next round',
    });
  }

  start(): void {
    this.#loop.start();
  }

  stop(): Promise<void> {
    return this.#loop.stop();
  }

  /** One round; the number of events published. */
  async sweepOnce(signal: AbortSignal = new AbortController().signal): Promise<number> {
    const c = this.#d.config;
    const { store } = this.#d;
    this.#route ??= {
      routing: this.#routing,
      table: { schema: c.schema, table: c.table },
      columns: await tableColumns(store.db, c.schema, c.table),
      state: { runId: crypto.randomUUID() },
    };
    const key = this.#routing.fieldEventKey ?? this.#routing.routeByField;
    const rows = await dueSideRows(store.db, store.failedTable, c.slot, key, c.sweepBatchSize);
    let published = 0;
    for (const row of rows) {
      if (signal.aborted) break;
      const outcome = await this.#retry(row);
      if (outcome === 'transient') break;
      if (outcome === 'published') published++;
    }
    await this.#reconcileBlocked();
    await this.#refreshGauges();
    return published;
  }

  async #refreshGauges(): Promise<void> {
    const { store, metrics } = this.#d;
    const f = metrics.failures;
    const by = await sideUnhealthyCounts(store.db, store.failedTable, this.#d.config.slot);
    for (const s of UNHEALTHY) f.events.set({ status: s }, Number(by.get(s)?.n ?? 0));
    f.eventsParked.set(Number(by.get('parked')?.n ?? 0));
    f.oldestFailedAgeSeconds.set(
      Math.max(Number(by.get('failed')?.oldest ?? 0), Number(by.get('dead')?.oldest ?? 0)),
    );
  }

  async #reconcileBlocked(): Promise<void> {
    const { store, blocked } = this.#d;
    const keys = blocked.keys();
    if (keys.length === 0) return;
    const marks = keys.map(([type, id]) => blocked.mark(type, id)); // before the read
    const held = await heldSideAggregates(
      store.db,
      store.failedTable,
      this.#d.config.slot,
      this.#routing.routeByField,
      this.#routing.fieldEventKey,
    );
    const still = new Set(held.map((k) => JSON.stringify(k)));
    keys.forEach(([type, id], i) => {
      if (!still.has(JSON.stringify([type, id]))) blocked.unblockSince(type, id, marks[i]!);
    });
  }

  async #retry(row: SideRow): Promise<'published' | 'failed' | 'transient'> {
    const c = this.#d.config;
    const { store, sink, log } = this.#d;
    const event = columnsEvent(
      row.columns,
      columnsModeOf(this.#routing),
      BigInt(row.walPosition),
      0n,
      Date.now(),
      0,
    );
    let message: OutboundMessage;
    try {
      message = routeDebezium(event, this.#route!);
    } catch (e) {
      await this.#failed(row, { class: 'permanent', reason: 'ROW_INVALID', message: errorMessage(e) }, null);
      return 'failed';
    }
    try {
      await sink.publish([message]);
    } catch (e) {
      const cls = sink.classify(e);
      if (cls.class === 'transient') {
        log.info({ err: cls.message, wal_position: row.walPosition }, 'side table retry: broker unavailable');
        return 'transient';
      }
      await this.#failed(row, cls, message);
      return 'failed';
    }
    await markSidePublished(store.db, store.failedTable, c.slot, row.walPosition);
    if (row.status === 'failed') this.#d.metrics.failures.retries.inc();
    this.#d.metrics.eventsPublished.inc({ topic: message.topic });
    log.info(
      { wal_position: row.walPosition, topic: message.topic, event_id: event.eventId },
      'event published',
    );
    return 'published';
  }

  async #failed(
    row: SideRow,
    error: { class: 'permanent' | 'transient'; reason: string; message: string },
    message: OutboundMessage | null,
  ): Promise<void> {
    const c = this.#d.config;
    const { store, sink, log } = this.#d;
    const attempts = row.attempts + 1;
    const dead = attempts >= c.maxAttempts;
    if (dead && c.deadLetterTopic && message) {
      const copy: OutboundMessage = {
        ...message,
        topic: c.deadLetterTopic,
        headers: {
          ...message.headers,
          'x-dlq-reason': `${error.reason}: ${error.message}`.slice(0, 1000),
          'x-dlq-attempts': String(attempts),
          'x-dlq-original-topic': message.topic,
          'x-dlq-failed-at': new Date().toISOString(),
        },
      };
      delete copy.partition;
      await sink.publish([copy]);
      this.#d.metrics.failures.dlqPublished.inc();
    }
    await markSideFailed(
      store.db,
      store.failedTable,
      c.slot,
      row.walPosition,
      formatError(error),
      dead ? null : failureBackoff(c, attempts),
    );
    if (row.status === 'failed') this.#d.metrics.failures.retries.inc();
    if (dead) this.#d.metrics.failures.retryExhaustions.inc();
    log.warn(
      { wal_position: row.walPosition, attempts, err: error.message },
      dead ? 'event dead (side table)' : 'event failed again (side table)',
    );
  }
}
