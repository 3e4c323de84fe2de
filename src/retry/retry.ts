import type { Config } from '../config/load.ts';
import { type BackoffPolicy, backoffDelay, sleep } from './backoff.ts';

/**
 * The back-off of every wait for a dependency to come back (database, broker): the relay's
 * --retry-initial-ms / --retry-max-ms, doubling. The one place this policy is spelled.
 */
export function outagePolicy(c: Pick<Config, 'retryInitialMs' | 'retryMaxMs'>): BackoffPolicy {
  return { initialMs: c.retryInitialMs, maxMs: c.retryMaxMs, factor: 2 };
}

/** Returned by an attempt that did not fail but is not done either: wait (by `policy`, if given) and try again. */
export class Again {
  readonly policy: BackoffPolicy | undefined;
  /** Wait exactly this long (the destination said when: an HTTP Retry-After), not by the policy. */
  readonly delayMs: number | undefined;
  constructor(policy?: BackoffPolicy, delayMs?: number) {
    this.policy = policy;
    this.delayMs = delayMs;
  }
}

export interface RetryOptions {
  signal: AbortSignal;
  policy: BackoffPolicy;
  /**
   * Told of each error an attempt throws, with the attempt's number (count it, log it). It may
   * throw to end the retries: an error that waiting cannot cure.
   */
  onError?(e: unknown, attempt: number): void;
}

/**
 * Runs `attempt` until it returns a value, waiting with full-jitter back-off after each error
 * (or Again) — forever: an outage is waited out, never given up on (design.md §4). null = the
 * signal aborted first (before an attempt or during a wait); an attempt in flight is not cut short.
 */
export async function retryUntilAborted<T>(
  attempt: (n: number) => Promise<T | Again>,
  o: RetryOptions,
): Promise<T | null> {
  for (let n = 1; ; n++) {
    if (o.signal.aborted) return null;
    let policy = o.policy;
    let delayMs: number | undefined;
    try {
      const r = await attempt(n);
      if (!(r instanceof Again)) return r;
      policy = r.policy ?? o.policy;
      delayMs = r.delayMs;
    } catch (e) {
      o.onError?.(e, n);
    }
    await sleep(delayMs ?? backoffDelay(policy, n), o.signal);
  }
}
