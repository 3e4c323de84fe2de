import { createRequire } from 'node:module';

/**
 * kafkajs 2.2.4's request queue keeps a 1 ms timer running forever on every connection that has
 * had a response (tulios/kafkajs#1556, #1704; PR #1667, open): each response calls
 * `checkPendingRequests`, which ends in `scheduleCheckPendingRequests`, which — with no request
 * waiting and no throttling — schedules the next check after `throttledUntil - Date.now()` ms, a
 * large negative number that Node turns into 1 ms (and, from Node 23 on, a TimeoutNegativeWarning
 * each time: kafkajs/warnings.ts). The check finds nothing and schedules itself again. So a relay
 * woke ~1,000 times a second per Kafka connection whatever it was doing; in live mode those
 * wake-ups share the event loop with the commits (docs/benchmarks.md, "Live mode: where the CPU
 * per commit went").
 *
 * The replacement schedules a check only when one can find something to do: a request is waiting
 * (in 10 ms, or when the throttling ends) or a throttling is in effect. Nothing else ever needed
 * the loop: a request that cannot go out at once is queued *and* schedules its own check (push),
 * every response checks the queue (fulfillRequest), so does every request timeout.
 *
 * Installed on kafkajs' RequestQueue prototype, shared by every client of the process (the
 * relay's producer chain reuses kafkajs' network modules: kafkajs/client.ts). When the class does
 * not look as expected (another kafkajs), nothing is installed and kafkajs' own method stays.
 */

const require = createRequire(import.meta.url);

/** kafkajs' interval for a queued request (src/network/requestQueue/index.js). */
const CHECK_PENDING_REQUESTS_INTERVAL = 10;

const PATCHED = Symbol.for('pg-outbox-relay.requestQueueCheck');

interface RequestQueue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** Installs the check once per process; false when this kafkajs does not look as expected. */
export function installRequestQueueCheck(): boolean {
  let RequestQueue: { prototype: RequestQueue & { [PATCHED]?: true } };
  try {
    RequestQueue = require('kafkajs/src/network/requestQueue/index.js');
  } catch {
    return false;
  }
  const proto = RequestQueue?.prototype;
  if (
    typeof proto?.scheduleCheckPendingRequests !== 'function' ||
    typeof proto.checkPendingRequests !== 'function'
  )
    return false;
  if (proto[PATCHED]) return true;
  proto.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
  proto[PATCHED] = true;
  return true;
}

/** kafkajs' scheduleCheckPendingRequests, minus the check that can find nothing to do. */
function scheduleCheckPendingRequests(this: RequestQueue): void {
  if (this.throttleCheckTimeoutId) return;
  let scheduleAt = this.throttledUntil - Date.now();
  if (this.pending.length > 0) scheduleAt = scheduleAt > 0 ? scheduleAt : CHECK_PENDING_REQUESTS_INTERVAL;
  else if (scheduleAt <= 0) return;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, scheduleAt);
}
