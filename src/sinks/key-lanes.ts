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

export async function sendInLanes<T>(
  items: readonly T[],
  laneOf: (item: T) => string,
  limit: number,
  send: (item: T) => Promise<void>,
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
  return new Promise((resolve) => {
    const pump = () => {
      while (failures.length === 0 && inFlight < limit && readyAt < ready.length) {
        const q = ready[readyAt++]!;
        start(q);
      }
      if (inFlight === 0 && (failures.length > 0 || readyAt >= ready.length)) {
        failures.sort((a, b) => a.index - b.index);
        resolve(failures);
      }
    };
    const start = (q: number[]) => {
      const index = q.shift()!;
      const item = items[index]!;
      inFlight++;
      let p: Promise<void>;
      try {
        p = send(item);
      } catch (error) {
        p = Promise.reject(error);
      }
      p.then(
        () => {
          inFlight--;
          if (q.length > 0) ready.push(q);
          pump();
        },
        (error: unknown) => {
          inFlight--;
          failures.push({ index, item, error });
          pump();
        },
      );
    };
    pump();
  });
}
