import { describe, expect, it } from 'vitest';
import { cacheTransactionCoordinator } from './coordinator-cache.ts';

const TRANSACTION = 1;

/** A cluster that counts FindCoordinator requests; the coordinator is `coordinator.node`. */
function fakes() {
  const coordinator = { node: 1, finds: 0 };
  const known = new Set([1, 2]);
  const cluster = {
    async findGroupCoordinator(_: { groupId: string; coordinatorType?: number }) {
      coordinator.finds++;
      return { nodeId: coordinator.node };
    },
    async findBroker({ nodeId }: { nodeId: string }) {
      if (!known.has(Number(nodeId))) throw new Error('KafkaJSBrokerNotFound');
      return { nodeId: Number(nodeId) };
    },
  };
  let fail: string | null = null;
  const eos = {
    isTransactional: () => true,
    async addPartitionsToTransaction() {
      const b = await cluster.findGroupCoordinator({ groupId: 't', coordinatorType: TRANSACTION });
      if (fail) throw Object.assign(new Error(fail), { type: fail });
      return b.nodeId;
    },
    async commit() {
      return (await cluster.findGroupCoordinator({ groupId: 't', coordinatorType: TRANSACTION })).nodeId;
    },
  };
  return { coordinator, known, cluster, eos, failWith: (t: string | null) => (fail = t) };
}

describe('cacheTransactionCoordinator', () => {
  it('asks once per producer, not before every transactional request', async () => {
    const f = fakes();
    cacheTransactionCoordinator(f.cluster, {}, false);
    // InitProducerId, before the first transaction: always asks.
    await f.cluster.findGroupCoordinator({ groupId: 't', coordinatorType: TRANSACTION });
    await f.cluster.findGroupCoordinator({ groupId: 't', coordinatorType: TRANSACTION });
    expect(f.coordinator.finds).toBe(2);
    for (let i = 0; i < 3; i++) {
      cacheTransactionCoordinator(f.cluster, f.eos, true);
      await f.eos.addPartitionsToTransaction();
      await f.eos.commit();
    }
    expect(f.coordinator.finds).toBe(3);
  });

  it('leaves group coordinators alone', async () => {
    const f = fakes();
    cacheTransactionCoordinator(f.cluster, f.eos, true);
    await f.cluster.findGroupCoordinator({ groupId: 'g' });
    await f.cluster.findGroupCoordinator({ groupId: 'g' });
    expect(f.coordinator.finds).toBe(2);
  });

  it('asks again after a failed request (NOT_COORDINATOR), not after CONCURRENT_TRANSACTIONS', async () => {
    const f = fakes();
    cacheTransactionCoordinator(f.cluster, f.eos, true);
    expect(await f.eos.commit()).toBe(1);
    f.failWith('CONCURRENT_TRANSACTIONS');
    await expect(f.eos.addPartitionsToTransaction()).rejects.toThrow();
    expect(f.coordinator.finds).toBe(1);
    f.coordinator.node = 2;
    f.failWith('NOT_COORDINATOR');
    await expect(f.eos.addPartitionsToTransaction()).rejects.toThrow();
    f.failWith(null);
    expect(await f.eos.addPartitionsToTransaction()).toBe(2);
    expect(f.coordinator.finds).toBe(2);
  });

  it('asks again when the remembered node left the metadata', async () => {
    const f = fakes();
    cacheTransactionCoordinator(f.cluster, f.eos, true);
    await f.eos.commit();
    f.known.delete(1);
    f.coordinator.node = 2;
    expect(await f.eos.commit()).toBe(2);
    expect(f.coordinator.finds).toBe(2);
  });
});
