import type { RelayMetrics, RelayState } from './metrics.ts';

/**
 * What /healthz and /readyz mean, as pure functions of a sample of the relay.
 *
 * Readiness (/readyz): 200 only while the relay streams from the slot. With two replicas on
 * one slot exactly one is Ready; the others are hot standbys (state and reason `standby`, 503).
 * A relay in state `waiting` is in a dependency outage (reason `outage`, 503), or stuck at a
 * poison position (reason `poison-position`, 503; retrying at the longest back-off).
 *
 * Liveness (/healthz): a restart would help only if the relay's loop is stuck, so 503 only when
 *  - the relay has stopped (its loop ended; the process is about to exit), or
 *  - it streams with events in flight, the broker is not in an outage, and for `stuckAfterMs`
 *    nothing moved: no batch published, no position confirmed, no transient error retried,
 *    no state change.
 * Everything else is alive: starting, stopping, standby, waiting (database or broker outage, or
 * a poison position: the loop is retrying on purpose, and a restart would meet the same error),
 * and an idle outbox (nothing in flight, nothing to do).
 * The event loop is covered by the answer itself: a blocked loop does not answer, and the
 * probe's timeout fails it.
 */

/** What the probes read from a relay. Relay satisfies it; unit tests pass plain objects. */
export interface RelayView {
  readonly state: RelayState;
  readonly waitingReason: string | null;
  readonly confirmedLsn: string | null;
  readonly lastProgressAt: number | null;
  readonly metrics: RelayMetrics;
  /**
   * Hears the relay's state changes at once, with a promise that settles once the relay-state row
   * says the new state (the health verdict is read again then). Returns the unsubscribe function.
   */
  onStateChange?(listener: (state: RelayState, recorded: Promise<void>) => void): () => void;
}

/** One reading of the relay at time `at` (ms since the epoch). */
export interface Sample {
  at: number;
  state: RelayState;
  waitingReason: string | null;
  confirmedLsn: string | null;
  lastProgressAt: number | null;
  inflightEvents: number;
  brokerOutage: boolean;
  /** The stream keeps failing with one error at one position (the waiting reason describes it). */
  poisonPosition: boolean;
  /** Sum over all labels; it grows on every retried failure. */
  transientErrors: number;
}

export type Reason =
  | 'standby'
  | 'outage'
  | 'poison-position'
  | 'broker-outage'
  | 'starting'
  | 'stopping'
  | 'stopped'
  | 'stuck';

export interface Verdict {
  ok: boolean;
  reason?: Reason;
  /** The relay's own words (its waiting reason), or why it counts as stuck. */
  detail?: string;
}

export async function readSample(relay: RelayView, at = Date.now()): Promise<Sample> {
  const sum = async (m: { get(): Promise<{ values: { value: number }[] }> }) =>
    (await m.get()).values.reduce((s, v) => s + v.value, 0);
  return {
    at,
    state: relay.state,
    waitingReason: relay.waitingReason,
    confirmedLsn: relay.confirmedLsn,
    lastProgressAt: relay.lastProgressAt,
    inflightEvents: await sum(relay.metrics.inflightEvents),
    brokerOutage: (await sum(relay.metrics.brokerOutage)) > 0,
    poisonPosition: (await sum(relay.metrics.poisonPosition)) > 0,
    transientErrors: await sum(relay.metrics.transientErrors),
  };
}

/** Remembers when anything that shows the loop turning last changed. Feed it every sample. */
export class ProgressWatch {
  #last: Sample | null = null;
  #movedAt: number;

  constructor(now = Date.now()) {
    this.#movedAt = now;
  }

  /** Time of the last observed movement (or of the construction). */
  get movedAt(): number {
    return this.#movedAt;
  }

  observe(s: Sample): void {
    const p = this.#last;
    if (
      p &&
      (p.state !== s.state ||
        p.confirmedLsn !== s.confirmedLsn ||
        p.lastProgressAt !== s.lastProgressAt ||
        p.transientErrors !== s.transientErrors)
    ) {
      this.#movedAt = s.at;
    }
    this.#last = s;
  }
}

export function liveness(s: Sample, movedAt: number, stuckAfterMs: number): Verdict {
  switch (s.state) {
    case 'stopped':
      return { ok: false, reason: 'stopped' };
    case 'starting':
    case 'stopping':
      return { ok: true, reason: s.state };
    case 'standby':
      return { ok: true, reason: 'standby', detail: s.waitingReason ?? undefined };
    case 'waiting':
      return { ok: true, reason: waitingReason(s), detail: s.waitingReason ?? undefined };
    case 'streaming': {
      if (s.brokerOutage) return { ok: true, reason: 'broker-outage' };
      const still = s.at - movedAt;
      if (s.inflightEvents > 0 && still > stuckAfterMs) {
        return {
          ok: false,
          reason: 'stuck',
          detail: `${s.inflightEvents} events in flight and no publish, confirmation or retry for ${Math.round(still / 1000)} s`,
        };
      }
      return { ok: true };
    }
  }
}

export function readiness(s: Sample): Verdict {
  switch (s.state) {
    case 'streaming':
      return s.brokerOutage ? { ok: true, reason: 'broker-outage' } : { ok: true };
    case 'standby':
      return { ok: false, reason: 'standby', detail: s.waitingReason ?? undefined };
    case 'waiting':
      return { ok: false, reason: waitingReason(s), detail: s.waitingReason ?? undefined };
    default:
      return { ok: false, reason: s.state };
  }
}

function waitingReason(s: Sample): Reason {
  return s.poisonPosition ? 'poison-position' : 'outage';
}

/**
 * How long a streaming relay with events in flight may show no movement before /healthz fails.
 * One publish may legitimately take kafkajs' 4 attempts of --kafka-request-timeout-ms each
 * (plus back-off) before it surfaces as a retried error, so stay well above that.
 */
export function stuckAfterFor(kafkaRequestTimeoutMs: number): number {
  return Math.max(MIN_STUCK_AFTER_MS, 5 * kafkaRequestTimeoutMs);
}

export const MIN_STUCK_AFTER_MS = 120_000;
