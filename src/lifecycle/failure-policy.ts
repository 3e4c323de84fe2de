import type { Config } from '../config/load.ts';
import type { Classified } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { backoffDelay } from '../retry/backoff.ts';
import type { OutboxEvent } from '../route/event.ts';

export type FailureOutcome = 'published' | 'retry' | 'dead' | 'discarded' | 'dlq' | 'parked' | 'released';

/** Delay before attempt n+1 of a failed event: full jitter, capped (seed 001). */
export function failureBackoff(
  c: Pick<Config, 'failureBackoffMs' | 'failureBackoffFactor' | 'failureBackoffMaxMs'>,
  attempts: number,
  random: () => number = Math.random,
): number {
  // Never 0: a row due "now" would be retried in the same sweep that failed it.
  return Math.max(
    1,
    backoffDelay(
      { initialMs: c.failureBackoffMs, maxMs: c.failureBackoffMaxMs, factor: c.failureBackoffFactor },
      attempts,
      random,
    ),
  );
}

/**
 * The `class/REASON:` prefix formatError writes, as a regular expression both JavaScript and
 * PostgreSQL read (`status` groups failed events by it in SQL; ops/remedies.ts reads the reason).
 * Reasons carry digits (the webhook sink's HTTP_400).
 */
export const LAST_ERROR_PREFIX = '^[a-z]+/[A-Za-z_][A-Za-z0-9_]*:';

/** last_error text: class, reason, message. */
export function formatError(f: Classified): string {
  return `${f.class}/${f.reason}: ${f.message}`.slice(0, 2000);
}

/** One structured line per outcome of the failure lifecycle. */
export function logOutcome(
  log: Logger,
  e: Pick<OutboxEvent, 'eventId' | 'aggregateId' | 'aggregateType' | 'id'>,
  topic: string,
  attempts: number,
  outcome: FailureOutcome,
  error?: Classified,
): void {
  const fields = {
    event_id: e.eventId,
    id: e.id,
    // Bounded: a hostile row's aggregate id may be megabytes long.
    aggregate_type: bounded(e.aggregateType),
    aggregate_id: bounded(e.aggregateId),
    topic,
    attempts,
    outcome,
    ...(error ? { error_class: error.class, reason: error.reason, err: error.message } : {}),
  };
  if (outcome === 'dead' || outcome === 'retry' || outcome === 'discarded')
    log.warn(fields, `event ${outcome === 'retry' ? 'failed' : outcome}: ${error?.message ?? ''}`);
  else log.info(fields, `event ${outcome}`);
}

function bounded(v: unknown): unknown {
  return typeof v === 'string' && v.length > 200 ? `${v.slice(0, 200)}… (${v.length} characters)` : v;
}
