import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureKafkaJars, javaBinary, kafkaVersionFromEnv } from '../../src/dev/local-kafka.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { OutboundMessage, OutboxEvent } from '../../src/route/event.ts';
import { KafkaSink, type KafkaSinkConfig } from '../../src/sinks/kafka/kafka-sink.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { ROOT } from '../support/relay.ts';

/**
 * Compressed record batches written by the relay's encoder (src/sinks/kafka/produce-encoder.ts with
 * src/sinks/kafka/kafka-codecs.ts), read back by three independent readers: Kafka's own Java
 * consumer (kafka-clients from the broker's jars, CRCs checked), kcat (librdkafka 2.0.2) and
 * kafkajs. The broker itself decompresses every batch to validate it (and recompresses one
 * whose codec differs from the topic's compression.type). Each reader must see the sent keys,
 * values and headers, in the sent order per key.
 */
let kafka: KafkaHarness;
const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
const N = 600;

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    // Chunks joined before decoding: a UTF-8 character may straddle two.
    const out: Buffer[] = [];
    let err = '';
    p.stdout.on('data', (d: Buffer) => out.push(d));
    p.stderr.on('data', (d) => (err += d));
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(out).toString('utf8'))
        : reject(new Error(`${cmd} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

interface Sent {
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** N events as the relay routes them: JSON payloads (compressible, with a unique part), 17 keys, headers. */
function events(): Sent[] {
  return Array.from({ length: N }, (_, i) => ({
    key: `order-${i % 17}-ключ`,
    value: JSON.stringify({
      seq: i,
      id: randomUUID(),
      customer: { name: 'Zoë Müller', city: 'Zürich', tier: i % 3 ? 'gold' : 'silver' },
      lines: Array.from({ length: 1 + (i % 4) }, (_, j) => ({ sku: `SKU-${j}`, qty: j + 1, price: 9.99 })),
    }),
    headers: { id: randomUUID(), aggregate_type: 'Order', event_type: 'OrderPlaced', ünï: 'cödé 🙂' },
  }));
}

async function publish(codec: (typeof CODECS)[number], topic: string, sent: Sent[]): Promise<void> {
  const sink = new KafkaSink(
    {
      kafkaBrokers: kafka.brokers,
      kafkaClientId: `compression-${codec}`,
      kafkaSsl: false,
      kafkaSaslMechanism: 'none',
      kafkaCompression: codec,
      kafkaAutoCreateTopics: false,
      kafkaRequestTimeoutMs: 30_000,
    } as KafkaSinkConfig,
    silentLogger(),
  );
  await sink.start();
  try {
    const messages: OutboundMessage[] = sent.map((s) => ({
      topic,
      key: s.key,
      value: Buffer.from(s.value),
      headers: s.headers,
      timestamp: Date.now(),
      event: {} as OutboxEvent,
      bytes: s.value.length,
    }));
    for (let i = 0; i < messages.length; i += 200) await sink.publish(messages.slice(i, i + 200));
  } finally {
    await sink.stop();
  }
}

/** A reader's records in a form every reader can produce: key, value, headers (all as UTF-8 text), per partition in offset order. */
type Row = { partition: number; key: string; value: string; headers: Record<string, string> };

/** What must be read back: every event once, and per partition the events of its keys in the order sent. */
function expectSameAsSent(reader: string, rows: Row[], sent: Sent[]): void {
  expect(rows.length, reader).toBe(sent.length);
  const bySeq = rows.map((r) => ({ r, seq: (JSON.parse(r.value) as { seq: number }).seq }));
  for (const { r, seq } of bySeq) {
    expect({ key: r.key, value: r.value, headers: r.headers }, `${reader}: event ${seq}`).toEqual(sent[seq]);
  }
  for (const p of new Set(rows.map((r) => r.partition))) {
    const seqs = bySeq.filter((x) => x.r.partition === p).map((x) => x.seq);
    expect(seqs, `${reader}: partition ${p} in the order sent`).toEqual([...seqs].sort((a, b) => a - b));
  }
  expect(new Set(bySeq.map((x) => x.seq)).size).toBe(sent.length);
}

const fromHex = (h: string) => Buffer.from(h, 'hex').toString('utf8');

beforeAll(async () => {
  kafka = await startKafka();
  for (const codec of CODECS) await kafka.createTopic(`compression.${codec}`, 3);
  await kafka.createTopic('compression.zstd-topic', 3, { config: { 'compression.type': 'zstd' } });
  await kafka.createTopic('compression.lz4-on-zstd-topic', 3, { config: { 'compression.type': 'zstd' } });
});

afterAll(async () => {
  await kafka?.stop();
});

describe('compressed record batches: read back by Kafka’s Java consumer, kcat and kafkajs', () => {
  it('none, gzip, snappy, lz4, zstd; a topic with compression.type=zstd takes zstd and lz4 batches', async () => {
    const sent = events();
    const topics: { name: string; codec: (typeof CODECS)[number] }[] = [
      ...CODECS.map((codec) => ({ name: `compression.${codec}`, codec })),
      { name: 'compression.zstd-topic', codec: 'zstd' as const },
      { name: 'compression.lz4-on-zstd-topic', codec: 'lz4' as const },
    ];
    for (const t of topics) await publish(t.codec, kafka.topic(t.name), sent);

    // Kafka's Java consumer, all topics in one JVM (CRCs checked: check.crcs=true).
    const libs = await ensureKafkaJars(kafkaVersionFromEnv());
    const javaOut = await run(javaBinary(), [
      '-cp',
      join(libs, '*'),
      join(ROOT, 'test/support/java/ReadRecords.java'),
      kafka.brokers.join(','),
      String(N),
      ...topics.map((t) => kafka.topic(t.name)),
    ]);
    const storedBytes = new Map<string, number>();
    const javaRows = new Map<string, Row[]>();
    for (const line of javaOut.trim().split('\n')) {
      const f = line.split('\t');
      if (f[1] === 'bytes') {
        storedBytes.set(f[0]!, Number(f[2]));
        continue;
      }
      const [topic, partition, , key, value, headers] = f as [string, string, string, string, string, string];
      const rows = javaRows.get(topic) ?? [];
      rows.push({
        partition: Number(partition),
        key: fromHex(key),
        value: fromHex(value),
        headers: Object.fromEntries(
          (headers ? headers.split(',') : []).map((h) => h.split('=').map(fromHex) as [string, string]),
        ),
      });
      javaRows.set(topic, rows);
    }

    for (const t of topics) {
      const topic = kafka.topic(t.name);
      expectSameAsSent(`java ${t.name}`, javaRows.get(topic) ?? [], sent);

      // kcat (librdkafka), CRCs checked. Its raw format, not -J: kcat 1.7.1's JSON mangles
      // characters outside the BMP (e.g. 🙂), compressed or not. The events hold no tab or newline.
      const kcatOut = await run('kcat', [
        '-C',
        '-b',
        kafka.brokers.join(','),
        '-t',
        topic,
        '-o',
        'beginning',
        '-e',
        '-q',
        '-X',
        'check.crcs=true',
        '-f',
        '%p\\t%o\\t%k\\t%s\\t%h\\n',
      ]);
      const kcatRows = kcatOut
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t') as [string, string, string, string, string])
        .sort((a, b) => Number(a[0]) - Number(b[0]) || Number(a[1]) - Number(b[1]))
        .map(([partition, , key, value, headers]) => ({
          partition: Number(partition),
          key,
          value,
          headers: Object.fromEntries(headers.split(',').map((h) => h.split('=') as [string, string])),
        }));
      expectSameAsSent(`kcat ${t.name}`, kcatRows, sent);

      // kafkajs (the relay's codecs registered with it).
      const kafkajsRows = (await kafka.readAll(t.name, { timeoutMs: 60_000 })).map((r) => ({
        partition: r.partition,
        key: r.key!.toString('utf8'),
        value: r.value!.toString('utf8'),
        headers: Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.toString('utf8')])),
      }));
      expectSameAsSent(`kafkajs ${t.name}`, kafkajsRows, sent);
    }

    // Compressed on the broker's disk too: each codec's topic takes less than the uncompressed one.
    const none = storedBytes.get(kafka.topic('compression.none'))!;
    expect(none).toBeGreaterThan(N * 100);
    for (const codec of ['gzip', 'snappy', 'lz4', 'zstd'])
      expect(storedBytes.get(kafka.topic(`compression.${codec}`)), codec).toBeLessThan(none * 0.8);
  });
});
