import type { Config } from '../config/load.ts';
import type { Classified } from '../errors.ts';
import type { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { BatchTracer } from '../observability/tracing.ts';
import type { OutageLog } from '../retry/outage-log.ts';
import type { OutboundMessage, OutboxEvent } from '../route/event.ts';
import { type RouteConfig, RouteFailure, routeEvent } from '../route/router.ts';
import type { Sink } from '../sinks/sink.ts';

export const PUBLISHED = 'published' as const;
export const PARKED = 'parked' as const;

/**
 * What became of one event of a batch: acknowledged by the broker, refused for good (the
 * router's or the broker's reason), or held behind a failed event of its aggregate (strict
 * ordering). Transient failures are no outcome: they are waited out.
 */
export type Outcome = typeof PUBLISHED | typeof PARKED | { failed: Classified };

/**
 * A refusal recorded 'discarded' at once instead of 'failed': a row whose text is not UTF-8 (a
 * SQL_ASCII database, route/row-check.ts NotUtf8Value). The sweeper reads failed rows back through
 * a UTF8 connection, which cannot carry them (22021 would fail every sweep); and a discarded row
 * holds no aggregate in strict ordering, so nothing waits behind it.
 */
export function discardedAtOnce(f: Classified): boolean {
  return f.reason === 'ROW_ENCODING';
}

/**
 * One event of a batch: its routed message (`message.event` is the row), or — for a row the
 * router refused — a placeholder carrying the event and `routeError`, permanent for that event.
 */
export interface BatchItem {
  message: OutboundMessage;
  routeError?: Classified;
}

/**
 * What deciding and recording a batch's outcome needs: the stream, lost-slot recovery and the
 * sweeper each pass their own (the sweeper publishes through `publishOnce` and counts with
 * `countSweep` only).
 */
export interface OutcomeDeps {
  config: Pick<
    Config,
    | 'ordering'
    | 'slot'
    | 'retryInitialMs'
    | 'retryMaxMs'
    | 'failureBackoffMs'
    | 'failureBackoffFactor'
    | 'failureBackoffMaxMs'
  >;
  sink: Pick<Sink, 'publish' | 'classify' | 'destinationOf'>;
  store: Pick<
    OutboxStore,
    'db' | 'recordFailed' | 'recordParked' | 'recordProgress' | 'recordUnrecordable' | 'unwritten'
  >;
  /** Strict ordering's blocked aggregates, shared by the stream, slot recovery and the sweeper. */
  blocked: BlockedAggregates;
  log: Logger;
  metrics: RelayMetrics;
  /** Logs each outage of the broker or the database once, and its end. */
  outages: OutageLog;
  /** One span per publish attempt when OpenTelemetry is present. */
  tracer?: BatchTracer;
}

/** Routes one event into a batch item (see unroutable). */
export function routeItem(event: OutboxEvent, route: RouteConfig): BatchItem {
  const routed = routeEvent(event, route);
  return routed instanceof RouteFailure ? unroutable(event, routed) : { message: routed };
}

/**
 * An unroutable row (a bad value, an illegal topic) is permanent for that event and recorded
 * 'failed' like a broker refusal; its placeholder message carries the event and is never sent.
 */
export function unroutable(event: OutboxEvent, f: RouteFailure): BatchItem {
  return {
    message: { topic: '', key: '', value: null, headers: {}, timestamp: 0, event, bytes: 0 },
    routeError: { class: 'permanent', reason: f.reason, message: f.error },
  };
}
