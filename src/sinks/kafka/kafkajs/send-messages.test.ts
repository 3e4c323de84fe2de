import { createRequire } from 'node:module';
import { Kafka, type Message, type PartitionerArgs } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { PartitionLedger } from '../partition-acks.ts';
import { patchedKafkaClass } from './client.ts';
import { createSendMessages, type PartitionResponse } from './send-messages.ts';

const require = createRequire(import.meta.url);
const stockSendMessages = require('kafkajs/src/producer/sendMessages.js') as typeof createSendMessages;
const createRetry = require('kafkajs/src/retry') as (
  o: object,
) => Parameters<typeof createSendMessages>[0]['retrier'];
const { KafkaJSConnectionError } = require('kafkajs/src/errors') as {
  KafkaJSConnectionError: new (m: string, o?: object) => Error;
};

interface Sent {
  nodeId: number;
  partitions: { topic: string; partition: number; firstSequence: number; n: number }[];
}

/**
 * A cluster of three brokers, in memory, with the one fault that matters here: broker `dies`
 * refuses its first request with a connection error and its partitions then move to `movesTo`,
 * which has already answered for its own. Metadata changes only when refreshed, as kafkajs'
 * cluster does. No Kafka protocol is imitated: the fake stands where kafkajs' cluster object
 * stands, below the function under test.
 */
function fakeCluster(o: { partitions: number; dies: number; movesTo: number }) {
  const sent: Sent[] = [];
  let leaders = Array.from({ length: o.partitions }, (_, p) => (p % 3) + 1);
  let refreshed = false;
  let died = false;
  const offsets = new Map<number, number>();
  let answeredOthers = () => {};
  const othersAnswered = new Promise<void>((r) => {
    answeredOthers = r;
  });
  const broker = (nodeId: number) => ({
    nodeId,
    async produce({
      topicData,
    }: {
      topicData: {
        topic: string;
        partitions: { partition: number; messages: Message[]; firstSequence: number }[];
      }[];
    }) {
      if (nodeId === o.dies && !died) {
        // A slow dying node: it fails only once every other broker of the first round has
        // answered (awaited, not timed, so a busy machine cannot reorder it).
        await othersAnswered;
        died = true;
        throw new KafkaJSConnectionError('Connection error: read ECONNRESET', {
          broker: `n${nodeId}`,
          code: 'ECONNRESET',
        });
      }
      if (nodeId === o.dies) throw new KafkaJSConnectionError('Connection error: connect ECONNREFUSED');
      await null;
      sent.push({
        nodeId,
        partitions: topicData.flatMap(({ topic, partitions }) =>
          partitions.map((p) => ({
            topic,
            partition: p.partition,
            firstSequence: p.firstSequence,
            n: p.messages.length,
          })),
        ),
      });
      const response = {
        topics: topicData.map(({ topic, partitions }) => ({
          topicName: topic,
          partitions: partitions.map((p) => {
            const base = offsets.get(p.partition) ?? 0;
            offsets.set(p.partition, base + p.messages.length);
            return {
              partition: p.partition,
              errorCode: 0,
              baseOffset: String(base),
              logAppendTime: '-1',
              logStartOffset: '0',
            };
          }),
        })),
      };
      if (new Set(sent.map((s) => s.nodeId)).size >= 2) answeredOthers();
      return response;
    },
  });
  const brokers = new Map([1, 2, 3].map((id) => [id, broker(id)]));
  const cluster = {
    async refreshMetadataIfNecessary() {},
    async refreshMetadata() {
      if (died && !refreshed) {
        refreshed = true;
        leaders = leaders.map((l) => (l === o.dies ? o.movesTo : l));
      }
    },
    async addMultipleTargetTopics() {},
    findTopicPartitionMetadata: (_topic: string) =>
      leaders.map((leader, partitionId) => ({
        partitionId,
        leader,
        partitionErrorCode: 0,
        replicas: [1, 2, 3],
        isr: [1, 2, 3],
      })),
    findLeaderForPartitions(_topic: string, partitions: (number | string)[]) {
      const out: Record<string, number[]> = {};
      for (const p of partitions.map(Number)) (out[leaders[p]!] ??= []).push(p);
      return out;
    },
    async findBroker({ nodeId }: { nodeId: string | number }) {
      return brokers.get(Number(nodeId))!;
    },
    isConnected: () => true,
    async connect() {},
    removeBroker() {},
  };
  const sequences = new Map<string, number>();
  const eosManager = {
    isTransactional: () => false,
    getTransactionalId: () => '',
    getProducerId: () => 7,
    getProducerEpoch: () => 0,
    getSequence: (t: string, p: number) => sequences.get(`${t}/${p}`) ?? 0,
    updateSequence: (t: string, p: number, n: number) =>
      sequences.set(`${t}/${p}`, (sequences.get(`${t}/${p}`) ?? 0) + n),
    async acquireBrokerLock() {},
    releaseBrokerLock() {},
    async addPartitionsToTransaction() {},
  };
  return { cluster, eosManager, sent, sequences };
}

const quietLogger = { debug() {}, info() {}, warn() {}, error() {} };
const byKeyNumber = ({ message, partitionMetadata }: PartitionerArgs) =>
  Number(String(message.key).slice(1)) % partitionMetadata.length;
const messages = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));

async function sendWith(create: typeof createSendMessages) {
  // Partition 0 led by node 1, which dies; it moves to node 2, which answers for partition 1 first.
  const world = fakeCluster({ partitions: 3, dies: 1, movesTo: 2 });
  const send = create({
    logger: quietLogger,
    cluster: world.cluster as never,
    partitioner: byKeyNumber,
    eosManager: world.eosManager as never,
    retrier: createRetry({ retries: 5, initialRetryTime: 1, maxRetryTime: 5 }),
  });
  const responses = (await send({
    acks: -1,
    topicMessages: [{ topic: 't', messages }],
  })) as PartitionResponse[];
  return { ...world, responses };
}

describe("the relay's sendMessages (kafkajs/send-messages.ts)", () => {
  it("kafkajs 2.2.4's own: a partition whose leader moved to a broker that had answered is never sent, yet the send resolves (the bug)", async () => {
    const { sent, responses } = await sendWith(stockSendMessages);
    const stored = sent.flatMap((s) => s.partitions.map((p) => p.partition));
    expect(stored.sort()).toEqual([1, 2]);
    expect(responses.map((r) => r.partition).sort()).toEqual([1, 2]);
  });

  it('sends the moved partition to its new leader and resolves only once every partition is acknowledged', async () => {
    const { sent, responses, sequences } = await sendWith(createSendMessages);
    expect(responses.map((r) => r.partition).sort()).toEqual([0, 1, 2]);
    const p0 = sent.flatMap((s) =>
      s.partitions.filter((p) => p.partition === 0).map((p) => ({ ...p, nodeId: s.nodeId })),
    );
    // Once, to node 2, with the first sequence the failed request had (rolled back, not skipped).
    expect(p0).toEqual([{ nodeId: 2, topic: 't', partition: 0, firstSequence: 0, n: 10 }]);
    // Partitions 1 and 2 were acknowledged on the first attempt and are not sent again.
    expect(sent.flatMap((s) => s.partitions.map((p) => p.partition)).sort()).toEqual([0, 1, 2]);
    expect([...sequences.values()]).toEqual([10, 10, 10]);
  });

  it('the sink-boundary check catches what the stock client dropped', async () => {
    const ledger = new PartitionLedger();
    ledger.begin();
    const { responses } = await sendWith((opts) =>
      stockSendMessages({
        ...opts,
        partitioner: (args) => {
          const p = opts.partitioner(args);
          ledger.record(args.topic, p);
          return p;
        },
      }),
    );
    expect(ledger.unacknowledged(responses)).toEqual(['t/0']);
  });

  it("skips kafkajs' addMultipleTargetTopics only when it would change nothing (topics known, metadata loaded)", async () => {
    const world = fakeCluster({ partitions: 3, dies: 0, movesTo: 0 });
    const added: string[][] = [];
    const cluster = {
      ...world.cluster,
      targetTopics: new Set(['t']),
      brokerPool: { metadata: null as object | null },
      async addMultipleTargetTopics(topics: string[]) {
        added.push(topics);
      },
    };
    const send = createSendMessages({
      logger: quietLogger,
      cluster: cluster as never,
      partitioner: byKeyNumber,
      eosManager: world.eosManager as never,
      retrier: createRetry({ retries: 0 }),
    });
    await send({ acks: -1, topicMessages: [{ topic: 't', messages }] }); // no metadata yet
    cluster.brokerPool.metadata = {};
    await send({ acks: -1, topicMessages: [{ topic: 't', messages }] }); // nothing to add
    await send({ acks: -1, topicMessages: [{ topic: 'u', messages }] }); // a new topic
    expect(added).toEqual([['t'], ['u']]);
  });

  it("is what the relay's kafkajs client uses, and leaves kafkajs' modules as they were for everyone else", () => {
    const Client = patchedKafkaClass();
    expect(Client).not.toBeNull();
    expect(Client).not.toBe(Kafka);
    expect(patchedKafkaClass()).toBe(Client); // once per process
    expect(require('kafkajs').Kafka).toBe(Kafka);
    expect(require('kafkajs/src/producer/sendMessages.js')).toBe(stockSendMessages);
  });
});
