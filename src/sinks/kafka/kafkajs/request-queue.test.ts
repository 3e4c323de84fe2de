import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { installRequestQueueCheck } from './request-queue.ts';

const require = createRequire(import.meta.url);

interface Queue {
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  inflight: Map<number, unknown>;
  pending: unknown[];
  push(r: object): void;
  fulfillRequest(r: { correlationId: number; payload: Buffer | null; size: number }): void;
  maybeThrottle(ms: number): void;
  scheduleCheckPendingRequests(): void;
  destroy(): void;
}
const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as {
  new (o: object): Queue;
  prototype: Queue;
};
/** kafkajs' own method, read before the relay's replaces it (this file's process loads kafkajs first). */
const stockSchedule = RequestQueue.prototype.scheduleCheckPendingRequests;

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const queues: Queue[] = [];

function queue(maxInFlightRequests = 1): Queue {
  const q = new RequestQueue({
    maxInFlightRequests,
    requestTimeout: 30_000,
    clientId: 't',
    broker: 'b',
    logger: quiet,
  });
  queues.push(q);
  return q;
}

/** Pushes a request; `sent` resolves when the queue writes it to the socket, `done` when it is answered. */
function request(q: Queue, correlationId: number) {
  let sent!: () => void;
  const wasSent = new Promise<void>((r) => (sent = r));
  let resolve!: (v: unknown) => void;
  const done = new Promise((r) => (resolve = r));
  q.push({
    entry: { apiKey: 0, apiName: 'Produce', apiVersion: 7, correlationId, resolve, reject: () => {} },
    expectResponse: true,
    sendRequest: sent,
  });
  return { wasSent, done, answer: () => q.fulfillRequest({ correlationId, payload: null, size: 0 }) };
}

afterEach(() => {
  for (const q of queues.splice(0)) {
    q.destroy();
  }
});

describe('installRequestQueueCheck', () => {
  it("kafkajs' own queue keeps a timer after the last response (the 1 ms loop this replaces)", () => {
    const q = queue();
    q.scheduleCheckPendingRequests = stockSchedule;
    const r = request(q, 1);
    r.answer();
    expect(q.throttleCheckTimeoutId).not.toBeNull();
  });

  it('schedules nothing once no request waits and no throttling is in effect', async () => {
    expect(installRequestQueueCheck()).toBe(true);
    expect(installRequestQueueCheck()).toBe(true); // idempotent
    const q = queue();
    const r = request(q, 1);
    await r.wasSent;
    r.answer();
    await r.done;
    expect(q.throttleCheckTimeoutId).toBeNull();
  });

  it('still sends a queued request when the one in flight is answered', async () => {
    installRequestQueueCheck();
    const q = queue(1);
    const first = request(q, 1);
    const second = request(q, 2);
    expect(q.pending).toHaveLength(1);
    expect(q.throttleCheckTimeoutId).not.toBeNull(); // its own check, in 10 ms
    first.answer();
    await second.wasSent;
    second.answer();
    await second.done;
    expect(q.pending).toHaveLength(0);
  });

  it('sends a request held by throttling when the throttling ends, then stops checking', async () => {
    installRequestQueueCheck();
    const q = queue(5);
    q.maybeThrottle(30);
    const r = request(q, 1);
    expect(q.pending).toHaveLength(1);
    await r.wasSent; // by the check scheduled for the end of the throttling
    r.answer();
    await r.done;
    expect(q.throttleCheckTimeoutId).toBeNull();
  });
});
