import type { Config } from '../config/load.ts';
import type { Classified } from '../errors.ts';
import { errorMessage } from '../errors.ts';
import { type BlockedAggregates, hasAggregate } from '../lifecycle/blocked-aggregates.ts';
import { failureBackoff, formatError, logOutcome } from '../lifecycle/failure-policy.ts';
import { parseIdRanges } from '../lifecycle/id-ranges.ts';
import { rowToEvent, type StoredRow } from '../lifecycle/outbox-row.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { readPublished } from '../lifecycle/progress.ts';
import { pendingRowsBetween } from '../lifecycle/queries.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { backoffDelay, sleep } from '../retry/backoff.ts';
import type { OutboundMessage } from '../route/event.ts';
import { type RouteConfig, routeConfigOf, tryRoute } from '../route/router.ts';
import type { Sink } from '../sinks/sink.ts';

export interface RecoveryDeps {
  config: Config;
  sink: Sink;
  store: OutboxStore;
  blocked: BlockedAggregates;
  log: Logger;
  metrics: RelayMetrics;
}

export interface RecoveryResult {
  /** Rows published from the table (some may have reached the broker before the loss: duplicates). */
  published: number;
  failed: number;
  parked: number;
  firstId: string | null;
  lastId: string | null;
}

/** Rows per table batch. */
const BATCH = 500;

/**
 * A lost slot's gap, published from the table (docs/operations.md#lost-slot). Runs after the NEW
 * slot exists and before streaming from it:
 *
 *  - every row committed before the new slot's consistent point is visible now (creating a
 *    logical slot waits for the transactions running at its start), and every row committed
 *    after it will come through the new slot — so the rows the lost slot may have missed are
 *    exactly the rows visible in the table that no progress record covers (truthful status
 *    'pending'); failed / parked / dead / discarded rows belong to the sweeper and operators;
 *  - they are published in id order (so in order per aggregate), in batches, each batch settled
 *    like a stream batch: failures on the row first, then the batch's ids in the progress record;
 *  - strict ordering holds: an aggregate blocked by a failed event parks its later rows;
 *  - the stream then skips every row the progress record covers (session.ts), so rows committed
 *    after the new slot's start that this pass already published are not sent twice.
 *
 * Duplicates: rows the old slot had published but not yet recorded when it was lost (at most the
 * in-flight rows). Nothing is confirmed on the new slot until the pass is done.
 */
export async function publishUnrecorded(
  d: RecoveryDeps,
  signal: AbortSignal,
): Promise<RecoveryResult | null> {
  const route = routeConfigOf(d.config);
  const result: RecoveryResult = { published: 0, failed: 0, parked: 0, firstId: null, lastId: null };
  const recorded = await readPublished(d.store.db, d.store.progress);
  for (const [lo, hi] of complement(parseIdRanges(recorded))) {
    let from = lo;
    for (;;) {
      if (signal.aborted) return null;
      const rows = await pendingRowsBetween(d.store.db, d.store.table, from, hi, BATCH);
      if (rows.length === 0) break;
      if (!(await settleBatch(d, route, rows, result, signal))) return null;
      from = BigInt(rows[rows.length - 1]!.id) + 1n;
      result.firstId ??= rows[0]!.id;
      result.lastId = rows[rows.length - 1]!.id;
      if (rows.length < BATCH) break;
    }
  }
  return result;
}

/** The ids outside `ranges` (sorted, disjoint, half-open), as half-open ranges over the bigint domain. */
export function complement(ranges: readonly [bigint, bigint][]): [bigint, bigint][] {
  const MIN = -(2n ** 63n);
  const MAX = 2n ** 63n - 1n;
  const out: [bigint, bigint][] = [];
  let from = MIN;
  for (const [lo, hi] of ranges) {
    if (lo > from) out.push([from, lo]);
    from = hi;
  }
  if (from < MAX) out.push([from, MAX]);
  return out;
}

type Outcome = 'published' | 'parked' | { failed: Classified };

async function settleBatch(
  d: RecoveryDeps,
  route: RouteConfig,
  rows: StoredRow[],
  result: RecoveryResult,
  signal: AbortSignal,
): Promise<boolean> {
  const strict = d.config.ordering === 'strict';
  const events = rows.map((r) => rowToEvent(r));
  const outcomes: (Outcome | undefined)[] = new Array(rows.length);
  const messages: (OutboundMessage | null)[] = events.map((e, i) => {
    const routed = tryRoute(e, route);
    if ('error' in routed) {
      outcomes[i] = { failed: { class: 'permanent', reason: routed.reason, message: routed.error } };
      return null;
    }
    return routed.message;
  });
  // The usual case: one publish for the batch. Otherwise (a refusal, a route error, a blocked
  // aggregate) row by row in id order, as the stream does, so strict ordering parks an
  // aggregate's later rows behind its failed one.
  const blockedNow = (i: number) => {
    const e = events[i]!;
    return strict && hasAggregate(e) && d.blocked.has(e.aggregateType, e.aggregateId);
  };
  let oneByOne = outcomes.some((o) => o !== undefined) || rows.some((_, i) => blockedNow(i));
  if (!oneByOne) {
    const sent = await send(d, messages as OutboundMessage[], signal);
    if (sent === null) return false;
    if (sent === true) outcomes.fill('published');
    else oneByOne = true;
  }
  if (oneByOne) {
    for (let i = 0; i < rows.length; i++) {
      const e = events[i]!;
      if (blockedNow(i)) {
        outcomes[i] = 'parked';
        d.blocked.parkDecided(e.aggregateType, e.aggregateId);
        continue;
      }
      if (outcomes[i] === undefined) {
        const sent = await send(d, [messages[i]!], signal);
        if (sent === null) return false;
        outcomes[i] = sent === true ? 'published' : { failed: sent };
      }
      if (outcomes[i] !== 'published' && strict && hasAggregate(e))
        d.blocked.blockDecided(e.aggregateType, e.aggregateId);
    }
  }

  const failed = rows.flatMap((r, i) => {
    const o = outcomes[i];
    return typeof o === 'object'
      ? [{ id: r.id, xid: 0, error: formatError(o.failed), retryInMs: failureBackoff(d.config, 1) }]
      : [];
  });
  const parked = rows.filter((_, i) => outcomes[i] === 'parked').map((r) => r.id);
  await retry(d, 'failed', () => d.store.recordFailed(failed), signal);
  await retry(d, 'parked', () => d.store.recordParked(parked), signal);
  await retry(
    d,
    'progress',
    async () => {
      const n = await d.store.recordProgress(
        d.config.slot,
        rows.map((r) => r.id),
      );
      if (n !== 1)
        throw new Error(`the progress record of slot ${d.config.slot} was not written (${n} rows)`);
      return n;
    },
    signal,
  );
  for (let i = 0; i < rows.length; i++) {
    const o = outcomes[i]!;
    const e = events[i]!;
    const topic = messages[i]?.topic ?? '';
    if (o === 'published') {
      result.published++;
      d.metrics.eventsPublished.inc({ topic });
    } else if (o === 'parked') {
      result.parked++;
      logOutcome(d.log, e, topic, 0, 'parked');
    } else {
      result.failed++;
      d.metrics.failures.eventsFailed.inc({ reason: o.failed.reason });
      logOutcome(d.log, e, topic, 1, 'retry', o.failed);
    }
    if (hasAggregate(e) && (o === 'parked' || (strict && o !== 'published')))
      d.blocked.written(e.aggregateType, e.aggregateId);
  }
  return !signal.aborted;
}

/** true = acknowledged; Classified = refused for good; null = aborted. Transient errors retry forever. */
async function send(
  d: RecoveryDeps,
  messages: OutboundMessage[],
  signal: AbortSignal,
): Promise<true | Classified | null> {
  for (let attempt = 1; ; attempt++) {
    if (signal.aborted) return null;
    try {
      await d.sink.publish(messages);
      return true;
    } catch (e) {
      const cls = d.sink.classify(e);
      if (cls.class === 'permanent') return cls;
      d.metrics.transientErrors.inc({ dependency: 'broker', reason: cls.reason });
      d.log.warn(
        { reason: cls.reason, err: cls.message, attempt },
        'slot recovery: broker unavailable; retrying',
      );
      await sleep(
        backoffDelay({ initialMs: d.config.retryInitialMs, maxMs: d.config.retryMaxMs, factor: 2 }, attempt),
        signal,
      );
    }
  }
}

/** A row or progress statement, retried on database errors until it succeeds (or stop). */
async function retry(
  d: RecoveryDeps,
  what: string,
  run: () => Promise<number>,
  signal: AbortSignal,
): Promise<void> {
  for (let attempt = 1; !signal.aborted; attempt++) {
    try {
      await run();
      return;
    } catch (e) {
      d.metrics.transientErrors.inc({
        dependency: 'database',
        reason: (e as { code?: string }).code ?? 'UNKNOWN',
      });
      d.log.warn(
        { err: errorMessage(e), what, attempt },
        'slot recovery: could not record outcomes; retrying',
      );
      await sleep(
        backoffDelay({ initialMs: d.config.retryInitialMs, maxMs: d.config.retryMaxMs, factor: 2 }, attempt),
        signal,
      );
    }
  }
}
