/**
 * The relay's per-event JavaScript cost without I/O, for quick A/B of the hot path (the real
 * figures are `npm run bench`'s): pgoutput INSERT messages in binary mode, shaped like the
 * bench's bulk backlog (500-byte payloads, 1,000 aggregates), through the stream's decoder, the
 * router, and each sink's encoding — NDJSON lines (stdout) and a Kafka Produce request body
 * (murmur2 partitioning into 3 partitions, as the relay's Kafka sink sends them).
 *
 *   node bench/hot-path.ts [--events 200000] [--rounds 7] [--stage NDJSON]
 *
 * Prints µs per event (best and median round) per stage, garbage collection included.
 */
import { parseArgs } from 'node:util';
import type { Message } from 'kafkajs';
import { OutboxDecoder } from '../src/replication/decoder.ts';
import type { OutboundMessage } from '../src/route/event.ts';
import { routeConfigOf, tryRoute } from '../src/route/router.ts';
import { keepTimestampMicroseconds } from '../src/route/timestamptz.ts';
import { CachedDefaultPartitioner } from '../src/sinks/kafka/key-partitioner.ts';
import { encodeProduceBody, type ProduceMessage } from '../src/sinks/kafka/produce-encoder.ts';
import { encodeLines } from '../src/sinks/ndjson.ts';
import { Binary, begin, commit, insert, int32, OUTBOX_COLUMNS, relation } from '../test/support/pgoutput.ts';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '200000' },
    rounds: { type: 'string', default: '7' },
    stage: { type: 'string', default: '' },
  },
});
keepTimestampMicroseconds(); // as the CLI does at start
const EVENTS = Number(values.events);
const ROUNDS = Number(values.rounds);
const PER_TXN = 100;
const OID = 16390;

/** The migrated outbox table's columns, in order (sql/), with their type OIDs. */
const COLUMNS: [string, number][] = [
  ...OUTBOX_COLUMNS,
  ['next_attempt_at', 1184],
  ['last_error', 25],
  ['published_at', 1184],
];

/** Row i of the bulk backlog, every value in binary format. */
function row(i: number): Buffer {
  const id = Buffer.alloc(8);
  id.writeBigInt64BE(BigInt(i + 1));
  const created = Buffer.alloc(8);
  created.writeBigInt64BE(BigInt(Date.UTC(2026, 10, 24) - Date.UTC(2000, 0, 1) + i) * 1000n + 123n);
  const uuid = Buffer.alloc(16);
  for (let k = 0; k < 16; k++) uuid[k] = (i * 31 + k * 7) & 0xff;
  const b = (x: Buffer | string) => new Binary(Buffer.isBuffer(x) ? x : Buffer.from(x));
  return insert(OID, [
    b(id),
    b(uuid),
    b('Bulk'),
    b(`agg-${i % 1000}`),
    b('BenchEvent'),
    b(String(i).padStart(500, 'x')),
    b('application/json'),
    b(Buffer.from([1, 0x7b, 0x7d])), // jsonb '{}'
    null,
    b(created),
    b('pending'),
    b(int32(0)),
    null,
    null,
    null,
  ]);
}

const lsnOf = (txn: number) => 0x1900000n + BigInt(txn) * 0x10000n;

const messages: Buffer[] = [relation(OID, 'public', 'outbox', COLUMNS)];
for (let i = 0; i < EVENTS; i++) {
  const txn = Math.floor(i / PER_TXN);
  if (i % PER_TXN === 0) messages.push(begin(lsnOf(txn), 849_000_000_000_000n, 1000 + txn));
  messages.push(row(i));
  if (i % PER_TXN === PER_TXN - 1) messages.push(commit(lsnOf(txn), lsnOf(txn) + 8n));
}

const route = routeConfigOf({ topicTemplate: 'outbox.event.{aggregate_type}', topicOverrides: {} });
const BATCH = 1200;

/** Decodes every message (each from a scratch copy, as the stream's reused buffer is), routes, hands batches to `sink`. */
function run(sink: (batch: OutboundMessage[]) => void): void {
  const decoder = new OutboxDecoder('public', 'outbox');
  const scratch = Buffer.alloc(4096);
  let batch: OutboundMessage[] = [];
  for (const m of messages) {
    m.copy(scratch);
    const d = decoder.decode(scratch.subarray(0, m.length));
    if (d.kind !== 'event') continue;
    const r = tryRoute(d.event, route);
    if (!('message' in r)) throw new Error(r.error);
    batch.push(r.message);
    if (batch.length === BATCH) {
      sink(batch);
      batch = [];
    }
  }
  if (batch.length) sink(batch);
}

const partitioner = CachedDefaultPartitioner();
const partitionMetadata = [0, 1, 2].map((p) => ({ partitionId: p, leader: 1 }));

const stages: [string, (batch: OutboundMessage[]) => void][] = [
  ['decode + route', () => {}],
  [
    '… + NDJSON (stdout sink)',
    (batch) => {
      encodeLines(batch);
    },
  ],
  [
    '… + Kafka Produce body',
    (batch) => {
      const parts: ProduceMessage[][] = [[], [], []];
      for (const m of batch) {
        // The sink hands the messages to kafkajs as they are (src/sinks/kafka/kafka-sink.ts).
        const message = m as unknown as Message;
        // biome-ignore lint/suspicious/noExplicitAny: PartitionerArgs' metadata type is wider than needed here.
        const p = partitioner({ topic: m.topic, partitionMetadata: partitionMetadata as any, message });
        parts[p]!.push(message);
      }
      encodeProduceBody({
        acks: -1,
        timeout: 30000,
        producerId: 1000,
        producerEpoch: 0,
        topicData: [
          {
            topic: batch[0]!.topic,
            partitions: parts.map((messages, partition) => ({ partition, firstSequence: 0, messages })),
          },
        ],
      });
    },
  ],
];

// The sinks' encodings alone, on one routed batch encoded over and over.
{
  const routed: OutboundMessage[] = [];
  run((batch) => {
    if (routed.length === 0) routed.push(...batch);
  });
  const only: [string, () => void][] = [
    ['NDJSON only', () => encodeLines(routed)],
    ['Kafka Produce body only', () => stages[2]![1](routed)],
  ];
  for (const [name, f] of only) {
    if (values.stage && !name.includes(values.stage)) continue;
    for (let i = 0; i < 50; i++) f();
    const t0 = performance.now();
    const n = 300;
    for (let i = 0; i < n; i++) f();
    console.log(
      `${name.padEnd(28)} ${(((performance.now() - t0) * 1000) / (n * routed.length)).toFixed(2)} µs/event`,
    );
  }
}

console.log(
  `${EVENTS.toLocaleString('en')} events (binary pgoutput, 500-byte payloads), ${ROUNDS} rounds each`,
);
for (const [name, sink] of stages) {
  if (values.stage && !name.includes(values.stage)) continue;
  const times: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    run(sink);
    times.push(((performance.now() - t0) * 1000) / EVENTS);
  }
  times.sort((a, b) => a - b);
  console.log(
    `${name.padEnd(28)} best ${times[0]!.toFixed(2)} µs/event, median ${times[Math.floor(ROUNDS / 2)]!.toFixed(2)}`,
  );
}
