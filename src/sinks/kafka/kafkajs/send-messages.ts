import { createRequire } from 'node:module';
import type { Message, PartitionerArgs } from 'kafkajs';
import { acknowledges } from '../partition-acks.ts';
import { cacheTransactionCoordinator } from './coordinator-cache.ts';
import { groupMessagesPerPartition } from './linear-grouping.ts';

/**
 * The relay's replacement for kafkajs 2.2.4's `src/producer/sendMessages.js`: the function that
 * turns one sendBatch into Produce requests, one per partition leader, and retries them.
 *
 * The bug it fixes (tulios/kafkajs#1303, PR #1798, both open; docs/architecture.md "The Kafka
 * client"): kafkajs keeps the responses of an attempt per *broker* and, on a retry, sends again
 * only to brokers that have not answered yet. When a partition leader dies mid-request, its
 * partitions move to another broker; if that broker already answered for its own partitions,
 * the moved partitions are never sent again and sendBatch resolves as a success without them.
 * On a 3-node cluster that lost events in 3 of 4 runs while the relay confirmed the slot.
 *
 * Here the unit of accounting is the *partition*: an attempt sends every partition that has no
 * acknowledgement yet to whichever broker leads it now (metadata refreshed after a failure), and
 * a partition counts as done only once a Produce response for exactly that topic and partition
 * came back without an error and with a base offset. Each attempt also waits for all of its
 * requests to settle before the next one starts, so no request of an earlier attempt is still in
 * flight when a partition is sent again (kafkajs could send a partition twice that way).
 *
 * Sequence numbers follow kafkajs' rules unchanged: a partition's sequence advances when its
 * request is built and is rolled back if that request fails, so a partition sent again carries
 * the same first sequence and the broker drops a copy it already stored.
 *
 * The grouping by partition is the linear one of kafkajs/linear-grouping.ts, computed once per
 * call: a key's partition depends only on the partition count, which never shrinks.
 */

const require = createRequire(import.meta.url);

interface Broker {
  nodeId: number;
  produce(args: unknown): Promise<unknown>;
}

interface Cluster {
  refreshMetadataIfNecessary(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  findTopicPartitionMetadata(topic: string): PartitionerArgs['partitionMetadata'];
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(args: { nodeId: string }): Promise<Broker>;
  isConnected(): boolean;
  connect(): Promise<void>;
  removeBroker(args: { host: string; port: number }): void;
  /** kafkajs' topics whose metadata the cluster keeps, and that metadata (read only: knownTargets). */
  targetTopics?: Set<string>;
  brokerPool?: { metadata?: unknown };
}

interface EosManager {
  isTransactional(): boolean;
  getTransactionalId(): string;
  getProducerId(): number;
  getProducerEpoch(): number;
  getSequence(topic: string, partition: number): number;
  updateSequence(topic: string, partition: number, increment: number): void;
  acquireBrokerLock(broker: Broker): Promise<void>;
  releaseBrokerLock(broker: Broker): void;
  addPartitionsToTransaction(topicData: TopicData[]): Promise<void>;
}

interface Logger {
  debug(message: string, extra?: object): void;
  warn(message: string, extra?: object): void;
}

type Retrier = <T>(
  fn: (bail: (e: unknown) => void, retryCount: number, retryTime: number) => Promise<T>,
) => Promise<T>;

interface TopicData {
  topic: string;
  partitions: { partition: number; messages: Message[]; firstSequence?: number }[];
}

/** One partition's entry of a Produce response, as kafkajs' responseSerializer gives it. */
export interface PartitionResponse {
  topicName: string;
  partition: number;
  errorCode: number;
  baseOffset: string;
  logAppendTime?: string;
  logStartOffset?: string;
}

interface SendArgs {
  acks: number;
  timeout?: number;
  compression?: number;
  topicMessages: { topic: string; messages: Message[] }[];
}

type KafkaError = Error & { retriable?: boolean; type?: string; host?: string; port?: number };

/** Sends counted by this module (tests check the producer really uses it). */
export let sendsByPartition = 0;

export function createSendMessages({
  logger,
  cluster,
  partitioner,
  eosManager,
  retrier,
}: {
  logger: Logger;
  cluster: Cluster;
  partitioner: (args: PartitionerArgs) => number;
  eosManager: EosManager;
  retrier: Retrier;
}) {
  const { KafkaJSMetadataNotLoaded } = require('kafkajs/src/errors') as {
    KafkaJSMetadataNotLoaded: new (message: string) => Error;
  };
  const { staleMetadata } = require('kafkajs/src/protocol/error') as {
    staleMetadata: (e: unknown) => boolean;
  };
  const responseSerializer = require('kafkajs/src/producer/responseSerializer') as (
    response: unknown,
  ) => PartitionResponse[];
  cacheTransactionCoordinator(cluster, eosManager, eosManager.isTransactional());

  return async ({ acks, timeout, compression, topicMessages }: SendArgs): Promise<PartitionResponse[]> => {
    sendsByPartition++;
    const expectResponse = acks !== 0;
    /** topic → partition → its messages (computed once per call). */
    const grouped = new Map<string, Record<string, Message[]>>();
    /** topic → partition → the acknowledging response (acks = 0: an empty placeholder). */
    const done = new Map<string, Map<number, PartitionResponse>>();
    for (const { topic } of topicMessages) done.set(topic, new Map());

    const attempt = async (): Promise<void> => {
      await cluster.refreshMetadataIfNecessary();
      /** leader node id → the topic data it is sent this attempt. */
      const perLeader = new Map<string, TopicData[]>();
      for (const { topic, messages } of topicMessages) {
        const partitionMetadata = cluster.findTopicPartitionMetadata(topic);
        if (partitionMetadata.length === 0) {
          logger.debug('Producing to topic without metadata', { topic });
          throw new KafkaJSMetadataNotLoaded('Producing to topic without metadata');
        }
        let byPartition = grouped.get(topic);
        if (!byPartition) {
          byPartition = groupMessagesPerPartition({ topic, partitionMetadata, messages, partitioner });
          grouped.set(topic, byPartition);
        }
        const acked = done.get(topic)!;
        const pending = Object.keys(byPartition)
          .map(Number)
          .filter((p) => !acked.has(p));
        if (pending.length === 0) continue;
        const leaders = cluster.findLeaderForPartitions(topic, pending);
        const led = new Set(Object.values(leaders).flat());
        const orphans = pending.filter((p) => !led.has(p));
        if (orphans.length > 0) {
          // A partition the metadata does not list (yet): stale metadata, refreshed below.
          throw Object.assign(
            new KafkaJSMetadataNotLoaded(`no leader known for ${topic} partition(s) ${orphans.join(',')}`),
            {
              retriable: true,
            },
          );
        }
        for (const [nodeId, partitions] of Object.entries(leaders)) {
          let list = perLeader.get(nodeId);
          if (!list) perLeader.set(nodeId, (list = []));
          list.push({
            topic,
            partitions: partitions.map((partition) => ({ partition, messages: byPartition![partition]! })),
          });
        }
      }

      const sends = [...perLeader].map(async ([nodeId, topicData]) => {
        const broker = await cluster.findBroker({ nodeId });
        await eosManager.acquireBrokerLock(broker);
        try {
          if (eosManager.isTransactional()) await addPartitionsToTransaction(eosManager, topicData);
          for (const { topic, partitions } of topicData) {
            for (const entry of partitions) {
              entry.firstSequence = eosManager.getSequence(topic, entry.partition);
              eosManager.updateSequence(topic, entry.partition, entry.messages.length);
            }
          }
          let response: unknown;
          try {
            response = await broker.produce({
              transactionalId: eosManager.isTransactional() ? eosManager.getTransactionalId() : undefined,
              producerId: eosManager.getProducerId(),
              producerEpoch: eosManager.getProducerEpoch(),
              acks,
              timeout,
              compression,
              topicData,
            });
          } catch (e) {
            for (const { topic, partitions } of topicData)
              for (const entry of partitions)
                eosManager.updateSequence(topic, entry.partition, -entry.messages.length);
            throw e;
          }
          if (!expectResponse) {
            for (const { topic, partitions } of topicData)
              for (const { partition } of partitions)
                done
                  .get(topic)!
                  .set(partition, { topicName: topic, partition, errorCode: 0, baseOffset: '-1' });
            return;
          }
          // Only what the response itself acknowledges counts; a partition it leaves out stays
          // pending and is sent again next attempt (its sequence advanced: the broker answered
          // for the request, so a copy it stored is dropped as a duplicate sequence).
          for (const r of responseSerializer(response)) {
            if (acknowledges(r) && done.has(r.topicName)) done.get(r.topicName)!.set(r.partition, r);
          }
        } finally {
          eosManager.releaseBrokerLock(broker);
        }
      });
      // Every request of this attempt settles before the next attempt sends anything again.
      const settled = await Promise.allSettled(sends);
      const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
      if (failed) throw failed.reason;
      const missing: string[] = [];
      for (const [topic, byPartition] of grouped) {
        const acked = done.get(topic)!;
        for (const p of Object.keys(byPartition)) if (!acked.has(Number(p))) missing.push(`${topic}/${p}`);
      }
      if (missing.length > 0) {
        throw Object.assign(new Error(`Produce responses did not acknowledge ${missing.join(', ')}`), {
          name: 'KafkaJSUnacknowledgedPartitions',
          retriable: true,
        });
      }
    };

    return retrier(async (bail, retryCount, retryTime) => {
      if (!knownTargets(cluster, topicMessages))
        await cluster.addMultipleTargetTopics(topicMessages.map(({ topic }) => topic));
      try {
        await attempt();
        return expectResponse ? [...done.values()].flatMap((m) => [...m.values()]) : [];
      } catch (err) {
        const e = err as KafkaError;
        if (e.name === 'KafkaJSConnectionClosedError' && e.host !== undefined && e.port !== undefined)
          cluster.removeBroker({ host: e.host, port: e.port });
        if (!cluster.isConnected()) {
          logger.debug(`Cluster has disconnected, reconnecting: ${e.message}`, { retryCount, retryTime });
          await cluster.connect();
          await cluster.refreshMetadata();
          throw e;
        }
        if (
          staleMetadata(e) ||
          e.name === 'KafkaJSMetadataNotLoaded' ||
          e.name === 'KafkaJSConnectionError' ||
          e.name === 'KafkaJSConnectionClosedError' ||
          e.name === 'KafkaJSUnacknowledgedPartitions' ||
          (e.name === 'KafkaJSProtocolError' && e.retriable)
        ) {
          // Retried here, then by the relay's own loop: a warning, not an error (the relay is fine).
          logger.warn(`Failed to send messages: ${e.message}`, { retryCount, retryTime });
          await cluster.refreshMetadata();
          throw e;
        }
        if (e.retriable) {
          logger.warn(`${e.message}`, { retryCount, retryTime });
          throw e;
        }
        // A refusal the relay records as the events' failure, with its own line.
        logger.debug(`${e.message}`, { retryCount, retryTime });
        bail(e);
        return [];
      }
    });
  };
}

/**
 * Whether kafkajs' addMultipleTargetTopics would do nothing: every topic is a target already and
 * the metadata is loaded (it then only takes and releases its lock, and copies the set of topics:
 * per request, which in live mode is per commit). Anything else goes through it as before.
 */
function knownTargets(cluster: Cluster, topicMessages: { topic: string }[]): boolean {
  const targets = cluster.targetTopics;
  if (!(targets instanceof Set) || !cluster.brokerPool?.metadata) return false;
  for (const { topic } of topicMessages) if (!targets.has(topic)) return false;
  return true;
}

/**
 * Coordinator answers to AddPartitionsToTxn that mean "not now" (kafkajs names): the previous
 * transaction's markers are still being written (CONCURRENT_TRANSACTIONS: after every commit, for
 * a few ms), the coordinator is loading or moved. kafkajs does not retry AddPartitionsToTxn at all
 * (tulios/kafkajs#296, #430); its sendMessages retrier would, but only after ≥ 200 ms and a
 * metadata refresh. Java's producer retries these after 20 ms; this retries after 1, 2, 4 … 250 ms
 * (30 attempts, ≈ 5 s) before the error goes up (the relay then replaces the producer and sends
 * the batch again). The first retry comes soon because CONCURRENT_TRANSACTIONS is the usual answer
 * right after a commit: the coordinator answers EndTxn once PREPARE_COMMIT is logged and writes the
 * markers after, a few ms on a local broker; waiting 5 ms first cost a measurable share of
 * the exactly-once drain (docs/delivery.md, "Throughput").
 */
const COORDINATOR_BUSY = new Set([
  'CONCURRENT_TRANSACTIONS',
  'COORDINATOR_LOAD_IN_PROGRESS',
  'GROUP_LOAD_IN_PROGRESS',
  'NOT_COORDINATOR',
  'NOT_COORDINATOR_FOR_GROUP',
  'COORDINATOR_NOT_AVAILABLE',
  'GROUP_COORDINATOR_NOT_AVAILABLE',
]);

async function addPartitionsToTransaction(eos: EosManager, topicData: TopicData[]): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await eos.addPartitionsToTransaction(topicData);
      return;
    } catch (e) {
      if (attempt >= 30 || !COORDINATOR_BUSY.has((e as KafkaError).type ?? '')) throw e;
      await new Promise((r) => setTimeout(r, Math.min(2 ** attempt, 250)));
    }
  }
}
