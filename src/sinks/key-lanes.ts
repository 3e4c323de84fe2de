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
  // A lane is a chain of indexes: next[i] is 1 + the index of the item after i in its lane (0: none).
  // `ready` holds the indexes whose turn has come, in the order it came — a lane's first item in
  // the order of first messages, so earlier messages go first; each index enters once. Typed arrays
  // rather than an array per lane: the bulk path's batches are ~1,000 lanes of one or two events.
  const n = items.length;
  const next = new Int32Array(n);
  const ready = new Int32Array(n);
  let readyEnd = 0;
  const last = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const lane = laneOf(items[i]!);
    const prev = last.get(lane);
    if (prev === undefined) ready[readyEnd++] = i;
    else next[prev] = i + 1;
    last.set(lane, i);
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
      while (failures.length === 0 && inFlight < limit && readyAt < readyEnd) start(ready[readyAt++]!);
      pumping = false;
      if (!resolved && inFlight === 0 && (failures.length > 0 || readyAt >= readyEnd)) {
        resolved = true;
        failures.sort((a, b) => a.index - b.index);
        resolve(failures);
      }
    };
    const start = (index: number) => {
      const item = items[index]!;
      inFlight++;
      let called = false;
      const done: LaneDone = (error?: unknown) => {
        if (called) return;
        called = true;
        inFlight--;
        if (error === undefined) {
          if (next[index] !== 0) ready[readyEnd++] = next[index]! - 1;
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
