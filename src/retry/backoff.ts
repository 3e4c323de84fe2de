export interface BackoffPolicy {
  /** First delay, ms. */
  initialMs: number;
  /** Upper bound of any delay, ms. */
  maxMs: number;
  /** Growth per attempt. */
  factor: number;
}

/**
 * Exponential backoff with full jitter: a uniform delay in [0, min(max, initial·factor^(attempt-1))].
 * Full jitter spreads a herd of retries best (AWS architecture blog, "Exponential Backoff And Jitter").
 * `attempt` starts at 1. `random` is injectable for tests.
 */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * policy.factor ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

/** Resolves after ms, or at once (with no error) when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
