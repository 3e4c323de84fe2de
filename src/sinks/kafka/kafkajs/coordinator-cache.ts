/**
 * kafkajs' transaction manager asks a broker for the transaction coordinator (FindCoordinator, one
 * round trip) before every AddPartitionsToTxn and EndTxn, and again before each retry of
 * AddPartitionsToTxn (kafkajs/send-messages.ts): 2 – 4 extra round trips per exactly-once batch
 * on a coordinator that almost never moves. Measured reason: docs/delivery.md, "Throughput".
 *
 * This remembers the coordinator's node id per producer (kafkajs' cluster object is the
 * producer's own) and asks again only when:
 *   - nothing is remembered yet: the producer's InitProducerId, before its first transaction,
 *     always asks (kafkajs retries it by asking again, e.g. after NOT_COORDINATOR);
 *   - a transactional request failed other than CONCURRENT_TRANSACTIONS (NOT_COORDINATOR after the coordinator moved, a lost
 *     connection, anything): the node is forgotten before the error goes up, so the retry of
 *     AddPartitionsToTxn and the relay's next producer ask the cluster;
 *   - the remembered node is no longer in the cluster's metadata (findBroker throws).
 * Group coordinators (consumers) are untouched. With another kafkajs layout (no
 * findGroupCoordinator on the cluster), nothing is cached.
 */

/** kafkajs' COORDINATOR_TYPES.TRANSACTION. */
const TRANSACTION = 1;

interface Broker {
  nodeId: number;
}

interface CoordinatorCluster {
  findGroupCoordinator(args: { groupId: string; coordinatorType?: number }): Promise<Broker>;
  findBroker(args: { nodeId: string }): Promise<Broker>;
}

/** The transactional requests after which the coordinator may have moved. */
const REQUESTS = ['addPartitionsToTransaction', 'commit', 'abort', 'sendOffsets'] as const;
type Requests = Partial<Record<(typeof REQUESTS)[number], (...args: unknown[]) => Promise<unknown>>>;

const caches = new WeakMap<object, { forget: () => void; use: () => void }>();
const wrapped = new WeakSet<object>();

/**
 * Called by createSendMessages with each (cluster, eos manager) pair: the idempotent manager at
 * the producer's creation, the transactional one at each transaction (after InitProducerId).
 */
export function cacheTransactionCoordinator(cluster: object, eos: object, transactional: boolean): void {
  const c = cluster as CoordinatorCluster;
  if (typeof c.findGroupCoordinator !== 'function') return;
  let cache = caches.get(cluster);
  if (!cache) {
    const find = c.findGroupCoordinator.bind(c);
    let node: number | null = null;
    let inUse = false;
    c.findGroupCoordinator = async (args) => {
      if (args.coordinatorType !== TRANSACTION || !inUse) return find(args);
      if (node !== null) {
        try {
          return await c.findBroker({ nodeId: String(node) });
        } catch {
          node = null;
        }
      }
      const broker = await find(args);
      node = broker.nodeId;
      return broker;
    };
    cache = {
      forget: () => {
        node = null;
      },
      use: () => {
        inUse = true;
      },
    };
    caches.set(cluster, cache);
  }
  if (!transactional || wrapped.has(eos)) return;
  wrapped.add(eos);
  cache.use();
  const { forget } = cache;
  const m = eos as Requests;
  for (const name of REQUESTS) {
    const request = m[name];
    if (typeof request !== 'function') continue;
    m[name] = async (...args: unknown[]) => {
      try {
        return await request(...args);
      } catch (e) {
        // "Busy" comes from the coordinator itself: it did not move.
        if ((e as { type?: string }).type !== 'CONCURRENT_TRANSACTIONS') forget();
        throw e;
      }
    };
  }
}
