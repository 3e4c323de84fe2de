// Shared by the stand-in's tests: kafkajs clients tuned for fast failure, and error-chain helpers.
import { createRequire } from 'node:module';
import net from 'node:net';
import { Kafka, type KafkaConfig, logLevel } from 'kafkajs';
import { Reader, Writer } from './codec.ts';
import type { KafkaStandIn } from './index.ts';

// kafkajs prints a partitioner migration notice on every producer otherwise.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';

export function client(broker: KafkaStandIn, overrides: Partial<KafkaConfig> = {}): Kafka {
  return new Kafka({
    clientId: 'standin-test',
    brokers: broker.brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1000,
    retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 100 },
    ...overrides,
  });
}

/** The error and everything it wraps (kafkajs uses `cause`, `originalError` and `errors`). */
export function errorChain(e: unknown): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const seen = new Set<unknown>();
  const visit = (x: unknown) => {
    if (x === null || typeof x !== 'object' || seen.has(x)) return;
    seen.add(x);
    const rec = x as Record<string, unknown>;
    out.push(rec);
    visit(rec.cause);
    visit(rec.originalError);
    if (Array.isArray(rec.errors)) rec.errors.forEach(visit);
  };
  visit(e);
  return out;
}

export function errorTypes(e: unknown): unknown[] {
  return errorChain(e).map((x) => x.type ?? x.name);
}

/** Awaits `promise`, which must reject; returns the rejection. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new Error('expected the promise to reject, but it resolved');
}

export async function until(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// kafkajs's own record-batch encoder, so unit tests feed the stand-in exactly what kafkajs sends.
const kafkajsInternals = createRequire(import.meta.url);
const { RecordBatch } = kafkajsInternals('kafkajs/src/protocol/recordBatch/v0/index.js');
const Record = kafkajsInternals('kafkajs/src/protocol/recordBatch/record/v0/index.js');
const Long = kafkajsInternals('kafkajs/src/utils/long.js');

export interface BatchSpec {
  producerId?: number;
  producerEpoch?: number;
  firstSequence?: number;
  compression?: number;
  timestamp?: number;
  messages: { key?: string | null; value: string | Buffer | null; headers?: Record<string, string> }[];
}

export async function encodeBatch(spec: BatchSpec): Promise<Buffer> {
  const ts = spec.timestamp ?? Date.now();
  const records = spec.messages.map((m, i) =>
    Record({
      offsetDelta: i,
      timestampDelta: i,
      key: m.key == null ? null : Buffer.from(m.key),
      value: typeof m.value === 'string' ? Buffer.from(m.value) : m.value,
      headers: m.headers ?? {},
    }),
  );
  const batch = await RecordBatch({
    compression: spec.compression ?? 0,
    records,
    firstTimestamp: ts,
    maxTimestamp: ts + records.length - 1,
    producerId: Long.fromValue(spec.producerId ?? -1),
    producerEpoch: spec.producerEpoch ?? 0,
    firstSequence: spec.firstSequence ?? 0,
    lastOffsetDelta: records.length - 1,
  });
  return Buffer.from(batch.buffer);
}

/** One request on a fresh connection, below kafkajs: for cases kafkajs cannot be made to send. */
export async function rawRequest(
  broker: KafkaStandIn,
  apiKey: number,
  apiVersion: number,
  body: (w: Writer) => void,
): Promise<Reader> {
  const w = new Writer();
  w.int16(apiKey).int16(apiVersion).int32(42).nullableString('raw-test');
  body(w);
  const payload = w.toBuffer();
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  const socket = net.connect(broker.port, '127.0.0.1');
  try {
    socket.write(frame);
    const chunks: Buffer[] = [];
    for await (const chunk of socket) {
      chunks.push(chunk as Buffer);
      const all = Buffer.concat(chunks);
      if (all.length >= 4 && all.length >= 4 + all.readInt32BE(0)) {
        const r = new Reader(all, 4, 4 + all.readInt32BE(0));
        if (r.int32() !== 42) throw new Error('correlation id mismatch');
        return r;
      }
    }
    throw new Error('connection closed before a response arrived');
  } finally {
    socket.destroy();
  }
}

/** Produce v7 request body for one partition. */
export function produceBody(
  topic: string,
  partition: number,
  records: Buffer,
  acks = -1,
): (w: Writer) => void {
  return (w) => {
    w.nullableString(null).int16(acks).int32(5000);
    w.int32(1).string(topic).int32(1).int32(partition).bytes(records);
  };
}

/** Produce v7 response for a single partition. */
export function readProduceResponse(r: Reader): { errorCode: number; baseOffset: number } {
  r.int32(); // topics
  r.string();
  r.int32(); // partitions
  r.int32();
  const errorCode = r.int16();
  const baseOffset = r.int64();
  return { errorCode, baseOffset };
}
