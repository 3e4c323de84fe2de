import { CompressionTypes, type Consumer, type Message, Partitioners, type TopicMessages } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaStandIn, type StoredRecord } from './index.ts';
import { client, until } from './test-helpers.ts';

const TOPICS = ['rt.orders', 'rt.customers', 'rt.invoices'];
const PARTITIONS = 3;
const KEYS = 25;
const GROUP = 'rt-group';

interface Consumed {
  topic: string;
  partition: number;
  offset: number;
  key: string;
  value: string;
  headers: Record<string, string>;
}

let broker: KafkaStandIn;
const consumers: Consumer[] = [];

beforeAll(async () => {
  broker = await KafkaStandIn.start();
  for (const t of TOPICS) broker.createTopic(t, { partitions: PARTITIONS });
});

afterAll(async () => {
  await Promise.allSettled(consumers.map((c) => c.disconnect()));
  await broker.stop();
});

/** Messages n = from..to-1: topic by n % 3, key by n % 25, a per-(topic, key) sequence in value and header. */
function batchOf(from: number, to: number, seqs: Map<string, number>): TopicMessages[] {
  const byTopic = new Map<string, Message[]>(TOPICS.map((t) => [t, []]));
  for (let n = from; n < to; n++) {
    const topic = TOPICS[n % TOPICS.length]!;
    const key = `key-${n % KEYS}`;
    const id = `${topic}/${key}`;
    const seq = seqs.get(id) ?? 0;
    seqs.set(id, seq + 1);
    byTopic.get(topic)!.push({
      key,
      value: JSON.stringify({ n, seq }),
      headers: { seq: String(seq), 'trace-id': `trace-${n}`, source: 'roundtrip' },
    });
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

function newConsumer(): Consumer {
  const consumer = client(broker).consumer({ groupId: GROUP, maxWaitTimeInMs: 100 });
  consumers.push(consumer);
  return consumer;
}

async function run(consumer: Consumer, into: Consumed[]): Promise<void> {
  await consumer.connect();
  await consumer.subscribe({ topics: TOPICS, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      into.push({
        topic,
        partition,
        offset: Number(message.offset),
        key: message.key!.toString(),
        value: message.value!.toString(),
        headers: Object.fromEntries(Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)])),
      });
    },
  });
}

function asConsumed(r: StoredRecord): Consumed {
  return {
    topic: r.topic,
    partition: r.partition,
    offset: r.offset,
    key: r.key!.toString(),
    value: r.value!.toString(),
    headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.toString()])),
  };
}

const compareNames = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const byPosition = (a: Consumed, b: Consumed) =>
  compareNames(a.topic, b.topic) || a.partition - b.partition || a.offset - b.offset;

/** (topic, key) -> sequence numbers in the order given. */
function sequencesPerKey(records: readonly Consumed[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const r of records) {
    const id = `${r.topic}/${r.key}`;
    out.set(id, [...(out.get(id) ?? []), JSON.parse(r.value).seq]);
  }
  return out;
}

describe('kafkajs producer -> stand-in -> kafkajs consumer group', () => {
  it('stores, serves and resumes 1,000 keyed, gzip-compressed messages over 3 topics x 3 partitions', async () => {
    const kafka = client(broker);
    const producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    const seqs = new Map<string, number>();
    for (let from = 0; from < 1000; from += 100) {
      await producer.sendBatch({
        topicMessages: batchOf(from, from + 100, seqs),
        acks: -1,
        compression: CompressionTypes.GZIP,
      });
    }

    // What the broker stored, decoded from the raw batches.
    const stored = broker.records();
    expect(stored).toHaveLength(1000);
    expect(broker.count()).toBe(1000);
    expect(broker.stats().producedBatchesByCompression).toEqual({ gzip: expect.any(Number) });
    const producerIds = new Set(stored.map((r) => r.producerId));
    expect(producerIds.size).toBe(1);
    expect([...producerIds][0]).toBeGreaterThanOrEqual(0);

    const partitioner = Partitioners.DefaultPartitioner();
    const partitionMetadata = [0, 1, 2].map((partitionId) => ({
      partitionErrorCode: 0,
      partitionId,
      leader: 0,
      replicas: [0],
      isr: [0],
    }));
    const ns = new Set<number>();
    for (const r of stored) {
      const value = JSON.parse(r.value!.toString());
      ns.add(value.n);
      expect(r.topic).toBe(TOPICS[value.n % 3]);
      expect(r.key!.toString()).toBe(`key-${value.n % KEYS}`);
      expect(r.partition).toBe(
        partitioner({ topic: r.topic, partitionMetadata, message: { key: r.key, value: r.value } }),
      );
      expect(Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.toString()]))).toEqual({
        seq: String(value.seq),
        'trace-id': `trace-${value.n}`,
        source: 'roundtrip',
      });
    }
    expect(ns.size).toBe(1000);
    // Offsets are dense per partition and per-key order is the send order.
    const storedConsumed = stored.map(asConsumed);
    for (const t of TOPICS) {
      for (let p = 0; p < PARTITIONS; p++) {
        const offsets = storedConsumed.filter((r) => r.topic === t && r.partition === p).map((r) => r.offset);
        expect(offsets).toEqual(offsets.map((_, i) => i));
      }
    }
    for (const [id, list] of sequencesPerKey(storedConsumed)) {
      expect(list, id).toEqual(list.map((_, i) => i));
    }

    // First consumer of the group reads everything and commits.
    const first: Consumed[] = [];
    const consumer1 = newConsumer();
    await run(consumer1, first);
    await until(() => first.length >= 1000, '1000 consumed messages');
    const highWatermarks = new Map<string, number>();
    for (const r of storedConsumed) highWatermarks.set(`${r.topic}/${r.partition}`, r.offset + 1);
    const committedEverything = () =>
      [...highWatermarks].every(
        ([tp, high]) =>
          broker.committedOffsets(GROUP).find((c) => `${c.topic}/${c.partition}` === tp)?.offset === high,
      );
    await until(committedEverything, 'offsets committed up to the high watermarks');
    await consumer1.disconnect();

    expect(first).toHaveLength(1000);
    expect([...first].sort(byPosition)).toEqual(storedConsumed);
    for (const [id, list] of sequencesPerKey(first)) {
      expect(list, `consumption order of ${id}`).toEqual(list.map((_, i) => i));
    }
    expect(broker.committedOffsets(GROUP).map((c) => [`${c.topic}/${c.partition}`, c.offset])).toEqual(
      [...highWatermarks].sort(([a], [b]) => compareNames(a, b)),
    );

    // More messages, then a new member of the same group: it starts at the committed offsets even
    // though it subscribes fromBeginning, so it sees exactly the new ones.
    await producer.sendBatch({
      topicMessages: batchOf(1000, 1150, seqs),
      acks: -1,
      compression: CompressionTypes.GZIP,
    });
    await producer.disconnect();
    const second: Consumed[] = [];
    const consumer2 = newConsumer();
    await run(consumer2, second);
    await until(() => second.length >= 150, '150 messages for the second consumer');
    await new Promise((r) => setTimeout(r, 300)); // nothing older may trickle in
    await consumer2.disconnect();
    expect(second.map((r) => JSON.parse(r.value).n).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 150 }, (_, i) => 1000 + i),
    );
    for (const r of second)
      expect(r.offset).toBeGreaterThanOrEqual(highWatermarks.get(`${r.topic}/${r.partition}`) ?? 0);
    expect(broker.stats().internalErrors).toBe(0);
  });

  it('rebalances partitions between two members of a group and back to one when a member leaves', async () => {
    const topic = 'rt.rebalance';
    broker.createTopic(topic, { partitions: 4 });
    const producer = client(broker).producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const send = (from: number, to: number) =>
      producer.send({
        topic,
        acks: -1,
        messages: Array.from({ length: to - from }, (_, i) => ({
          key: `k${from + i}`,
          value: String(from + i),
        })),
      });
    const got = new Map<string, { partition: number; n: number }[]>();
    const member = (name: string) => {
      const c = client(broker).consumer({
        groupId: 'rt-rebalance',
        maxWaitTimeInMs: 100,
        heartbeatInterval: 100,
        sessionTimeout: 6000,
      });
      consumers.push(c);
      got.set(name, []);
      return c;
    };
    const start = async (name: string, c: Consumer) => {
      await c.connect();
      await c.subscribe({ topic, fromBeginning: true });
      await c.run({
        eachMessage: async ({ partition, message }) => {
          got.get(name)!.push({ partition, n: Number(message.value!.toString()) });
        },
      });
    };
    const a = member('a');
    const b = member('b');
    const assignments = new Map<string, number[]>();
    for (const [name, c] of [
      ['a', a],
      ['b', b],
    ] as const) {
      c.on(c.events.GROUP_JOIN, (e) => assignments.set(name, e.payload.memberAssignment[topic] ?? []));
    }
    await start('a', a);
    await start('b', b);
    // 'a' first owns everything; once 'b' joins, 'a' learns of the rebalance from its heartbeat.
    const split = () => {
      const owned = [...(assignments.get('a') ?? []), ...(assignments.get('b') ?? [])];
      return (assignments.get('b')?.length ?? 0) > 0 && owned.length === 4 && new Set(owned).size === 4;
    };
    await until(split, 'the four partitions split between both members');
    expect(broker.groupState('rt-rebalance')).toMatchObject({ state: 'Stable', members: expect.any(Array) });
    expect(broker.groupState('rt-rebalance')!.members).toHaveLength(2);

    await send(0, 200);
    const total = () => got.get('a')!.length + got.get('b')!.length;
    await until(() => total() >= 200, '200 messages across both members');
    for (const [name, list] of got) {
      const mine = new Set(assignments.get(name));
      for (const m of list) expect(mine.has(m.partition), `${name} got partition ${m.partition}`).toBe(true);
    }

    await a.disconnect();
    await until(() => assignments.get('b')?.length === 4, 'b owning every partition after a left');
    await send(200, 300);
    await until(() => got.get('b')!.some((m) => m.n === 299), 'b consuming the new messages');
    const all = [...got.get('a')!, ...got.get('b')!].map((m) => m.n);
    // At-least-once across a rebalance: everything arrives; redelivery is allowed but not loss.
    expect(new Set(all)).toEqual(new Set(Array.from({ length: 300 }, (_, i) => i)));
    await b.disconnect();
    await producer.disconnect();
  });
});
