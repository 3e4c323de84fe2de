import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureKafkaJars, javaBinary, kafkaVersionFromEnv } from '../../src/dev/local-kafka.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { OutboundMessage, OutboxEvent } from '../../src/route/event.ts';
import { KafkaSink, type KafkaSinkConfig } from '../../src/sinks/kafka/kafka-sink.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { ROOT } from '../support/relay.ts';

/**
 * Java-identical partitioning, proven against the real thing: the same 10,000 keys produced by
 * the relay (its KafkaSink: kafkajs' murmur2 through key-partitioner.ts and the relay's
 * sendMessages) and by Kafka's own Java producer (kafka-clients from the broker's jars, default
 * partitioner) land on the same partitions, for several partition counts. A consumer group with
 * Java producers beside the relay depends on it.
 */
let kafka: KafkaHarness;
let dir: string;
const COUNTS = [3, 7, 16];

/** 10,000 keys of the shapes aggregate ids take: names with numbers, UUIDs, digits, non-ASCII, long, empty. */
function keys(): string[] {
  const out: string[] = ['', ' ', '0'];
  for (let i = 0; out.length < 10_000; i++) {
    switch (i % 6) {
      case 0:
        out.push(`order-${i}`);
        break;
      case 1:
        out.push(randomUUID());
        break;
      case 2:
        out.push(String(i * 7919));
        break;
      case 3:
        out.push(`клиент-${i}-ü-日本-🙂`);
        break;
      case 4:
        out.push(`tenant/${i % 13}/account:${i}`.repeat(1 + (i % 20)));
        break;
      default:
        out.push(`${i}`.padStart(40, 'x'));
    }
  }
  return out;
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('error', reject);
    p.on('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${err.slice(-2000)}`)),
    );
  });
}

beforeAll(async () => {
  kafka = await startKafka();
  dir = mkdtempSync(join(tmpdir(), 'java-partitioning-'));
  for (const n of COUNTS) {
    await kafka.createTopic(`outbox.event.Parity${n}`, n);
    await kafka.createTopic(`java.parity.${n}`, n);
  }
});

afterAll(async () => {
  await kafka?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('partitioning: the relay and Kafka’s Java producer agree', () => {
  it('puts each of 10,000 keys on the partition the Java producer does, for 3, 7 and 16 partitions', async () => {
    const all = keys();
    const keysFile = join(dir, 'keys.hex');
    writeFileSync(keysFile, `${all.map((k) => Buffer.from(k, 'utf8').toString('hex')).join('\n')}\n`);
    const libs = await ensureKafkaJars(kafkaVersionFromEnv());
    const sink = new KafkaSink(
      {
        kafkaBrokers: kafka.brokers,
        kafkaClientId: 'java-parity',
        kafkaSsl: false,
        kafkaSaslMechanism: 'none',
        kafkaCompression: 'none',
        kafkaAutoCreateTopics: false,
        kafkaRequestTimeoutMs: 30_000,
      } as KafkaSinkConfig,
      silentLogger(),
    );
    await sink.start();
    try {
      for (const n of COUNTS) {
        const topic = kafka.topic(`outbox.event.Parity${n}`);
        const messages: OutboundMessage[] = all.map((key, i) => ({
          topic,
          key,
          value: Buffer.from(String(i)),
          headers: {},
          timestamp: Date.now(),
          event: {} as OutboxEvent,
          bytes: key.length + 10,
        }));
        for (let i = 0; i < messages.length; i += 1000) await sink.publish(messages.slice(i, i + 1000));
        const relayPartition = new Array<number>(all.length);
        for (const r of await kafka.readAll(`outbox.event.Parity${n}`, { timeoutMs: 120_000 }))
          relayPartition[Number(r.value!.toString())] = r.partition;

        const javaOut = await run(javaBinary(), [
          '-cp',
          join(libs, '*'),
          join(ROOT, 'test/support/java/KeyPartitions.java'),
          kafka.brokers.join(','),
          kafka.topic(`java.parity.${n}`),
          keysFile,
        ]);
        const javaPartition = new Array<number>(all.length);
        for (const line of javaOut.trim().split('\n')) {
          const [i, p] = line.split('\t').map(Number);
          javaPartition[i!] = p!;
        }
        const differ = all.flatMap((k, i) =>
          relayPartition[i] === javaPartition[i]
            ? []
            : [`${JSON.stringify(k)}: relay ${relayPartition[i]}, java ${javaPartition[i]}`],
        );
        expect(
          differ.slice(0, 5),
          `${differ.length} of ${all.length} keys differ with ${n} partitions`,
        ).toEqual([]);
        // Every partition used: the comparison covers each of them, not a degenerate spread.
        expect(new Set(javaPartition).size).toBe(n);
      }
    } finally {
      await sink.stop();
    }
  });
});
