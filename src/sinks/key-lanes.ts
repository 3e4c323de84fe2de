/**
 * Sends a batch with many messages in flight while keeping each key's order, for brokers whose
 * acknowledgements come one message at a time (NATS JetStream's PubAck, RabbitMQ's publisher
 * confirms).
 *
 * Why one message in flight per lane (a lane is one key on one destination): pipelining on one
 * connection keeps order only while every message is taken. When message n of a key is refused
 * or lost with its connection (a timeout, a full stream or queue, a reconnect that flushes a
 * buffer of later messages) while n+1 is stored, the resend of n lands after n+1 — a reorder
 * that no duplicate window undoes. With at most one unacknowledged message per lane, n+1 leaves
 * only after n's acknowledgement: whatever fails, nothing of that key was sent after it.
 * Different lanes have no order between them and share the `limit` in flight.
 *
 * On the first failure no new message starts; the ones in flight are awaited (so a retry never
 * overlaps this attempt) and the failures are returned in batch order.
 */
export interface LaneFailure<T> {
  index: number;
  item: T;
  error: unknown;
}

/** What `send` calls once the item is acknowledged (no argument) or failed (the error). */
export type LaneDone = (error?: unknown) => void;

/**
 * `send` takes a callback, not a promise: the sinks' acknowledgements arrive as callbacks
 * (PubAcks, amqplib's confirms), and a promise per event cost an allocation and a microtask hop
 * each on the bulk path. A `send` that throws fails that item; `done` may be called at once.
 */
export function sendInLanes<T>(
  items: readonly T[],
  laneOf: (item: T) => string,
  limit: number,
  send: (item: T, done: LaneDone) => void,
): Promise<LaneFailure<T>[]> {
  // Each lane's indexes, in batch order; `ready` holds the lanes whose head may start, in the
  // order of their first message, so earlier messages go first.
  const lanes = new Map<string, number[]>();
  const ready: number[][] = [];
  for (let i = 0; i < items.length; i++) {
    const lane = laneOf(items[i]!);
    let q = lanes.get(lane);
    if (!q) {
      lanes.set(lane, (q = []));
      ready.push(q);
    }
    q.push(i);
  }
  const failures: LaneFailure<T>[] = [];
  let inFlight = 0;
  let readyAt = 0;
  let pumping = false;
  let resolved = false;
  return new Promise((resolve) => {
    // Not re-entered: a `done` called from within `send` leaves the loop to the pump running.
    const pump = () => {
      if (pumping) return;
      pumping = true;
      while (failures.length === 0 && inFlight < limit && readyAt < ready.length) start(ready[readyAt++]!);
      pumping = false;
      if (!resolved && inFlight === 0 && (failures.length > 0 || readyAt >= ready.length)) {
        resolved = true;
        failures.sort((a, b) => a.index - b.index);
        resolve(failures);
      }
    };
    const start = (q: number[]) => {
      const index = q.shift()!;
      const item = items[index]!;
      inFlight++;
      let called = false;
      const done: LaneDone = (error?: unknown) => {
        if (called) return;
        called = true;
        inFlight--;
        if (error === undefined) {
          if (q.length > 0) ready.push(q);
        } else failures.push({ index, item, error });
        pump();
      };
      try {
        send(item, done);
      } catch (error) {
        done(error);
      }
    };
    pump();
  });
}
