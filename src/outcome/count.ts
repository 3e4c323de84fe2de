import type { Classified } from '../errors.ts';
import { logOutcome } from '../lifecycle/failure-policy.ts';
import type { OutboxEvent } from '../route/event.ts';
import {
  type BatchItem,
  discardedAtOnce,
  type Outcome,
  type OutcomeDeps,
  PARKED,
  PUBLISHED,
} from './outcome.ts';

/**
 * The one place an event's outcome is counted (outbox_events_published_total, the end-to-end
 * lag, failures) and logged: every path that publishes — the stream, lost-slot recovery, the
 * sweeper's retries and releases — counts here, so the dashboards see all of them.
 */

/** A recorded batch of the stream or of slot recovery. */
export function countBatch(
  d: Pick<OutcomeDeps, 'metrics' | 'log'>,
  batch: readonly BatchItem[],
  outcomes: readonly Outcome[],
): void {
  const { metrics, log } = d;
  const now = Date.now();
  // Runs of events with the same topic and the same lag (a transaction's) are counted once each.
  let topic = '';
  let published = 0;
  let lagMs = -1;
  let lagged = 0;
  for (let i = 0; i < batch.length; i++) {
    const m = batch[i]!.message;
    const o = outcomes[i]!;
    if (o === PUBLISHED) {
      if (m.topic !== topic) {
        if (published > 0) metrics.eventsPublished.inc({ topic }, published);
        topic = m.topic;
        published = 0;
      }
      published++;
      const lag = Math.max(0, now - m.event.commitTimeMs);
      if (lag !== lagMs) {
        if (lagged > 0) metrics.endToEndLagSeconds.observe(lagMs / 1000, lagged);
        lagMs = lag;
        lagged = 0;
      }
      lagged++;
    } else if (o === PARKED) {
      logOutcome(log, m.event, m.topic, 0, 'parked');
    } else {
      metrics.failures.eventsFailed.inc({ reason: o.failed.reason });
      logOutcome(log, m.event, m.topic, 1, discardedAtOnce(o.failed) ? 'discarded' : 'retry', o.failed);
    }
  }
  if (published > 0) metrics.eventsPublished.inc({ topic }, published);
  if (lagged > 0) metrics.endToEndLagSeconds.observe(lagMs / 1000, lagged);
}

/**
 * One row the sweeper settled: a due retry (published, refused again, dead), or the release of a
 * parked row (released, or refused: it becomes its aggregate's new head, logged as 'retry').
 */
export type SweepOutcome = 'published' | 'retry' | 'dead' | 'released' | 'release-refused';

export function countSweep(
  d: Pick<OutcomeDeps, 'metrics' | 'log'>,
  event: OutboxEvent,
  topic: string,
  attempts: number,
  outcome: SweepOutcome,
  error?: Classified,
): void {
  const f = d.metrics.failures;
  if (outcome === 'published' || outcome === 'retry' || outcome === 'dead') f.retries.inc();
  if (outcome === 'published' || outcome === 'released') d.metrics.eventsPublished.inc({ topic });
  else if (outcome === 'dead') f.retryExhaustions.inc();
  else if (outcome === 'release-refused') f.eventsFailed.inc({ reason: error?.reason ?? 'UNKNOWN' });
  logOutcome(d.log, event, topic, attempts, outcome === 'release-refused' ? 'retry' : outcome, error);
}
