/**
 * Rough edges a new user hit: kafkajs warnings on every start, kafkajs `error` lines for refusals
 * the relay had recorded as event failures, and the envelope's occurred_at cut to milliseconds.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.ts';
import { KafkaSink } from '../src/sinks/kafka/kafka-sink.ts';
import { type KafkaHarness, startKafka } from './support/kafka.ts';
import { useTestDatabase, waitFor } from './support/postgres.ts';
import { migrateDb, type RelayProcess, slotOf, spawnCli } from './support/relay.ts';

describe('kafkajs', () => {
  it('creating the Kafka sink logs no warning (partitioner, EoS) at the default level', async () => {
    const lines: { level: number; msg: string }[] = [];
    const out = new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        done();
      },
    });
    const log = pino({ level: 'debug' }, out);
    const { config } = loadConfig(
      'run',
      ['--database-url', 'postgres://db/app', '--kafka-brokers', '127.0.0.1:1'],
      {},
    );
    const sink = new KafkaSink(config, log);
    await new Promise((r) => setImmediate(r));
    const warnings = lines.filter((l) => l.level >= 40).map((l) => l.msg);
    expect(warnings).toEqual([]);
    // The EoS message is kept at debug, with the reason it does not apply in the code.
    expect(lines.some((l) => /EoS guarantees/.test(l.msg) && l.level === 20)).toBe(true);
    expect(lines.some((l) => /switched default partitioner/.test(l.msg))).toBe(false);
    await sink.stop();
  });
});

describe('dead-letter topic', () => {
  const db = useTestDatabase();
  let kafka: KafkaHarness;
  const relays: RelayProcess[] = [];
  afterAll(async () => {
    for (const r of relays) r.kill('SIGTERM');
    await Promise.all(relays.map((r) => r.exited));
    await kafka?.stop();
  });

  it('is checked at start: a missing one is a clear warning, an existing one passes', async () => {
    kafka = await startKafka();
    await migrateDb(db);
    const run = (topic: string) => {
      const r = spawnCli([
        'run',
        '--database-url',
        db.url,
        '--slot',
        slotOf(db),
        '--no-http',
        ...kafka.relayArgs(),
        '--dead-letter-topic',
        kafka.topic(topic),
      ]);
      relays.push(r);
      return r;
    };
    const missing = run('dlq.missing');
    await missing.waitForLog(/dead-letter topic \S+ is not usable \(it does not exist/);
    expect(missing.logs()).toMatch(/"level":40/);
    missing.kill('SIGTERM');
    expect(await missing.exited).toBe(0);
    await kafka.createTopic('dlq.present');
    const present = run('dlq.present');
    await present.waitForLog(/dead-letter topic checked/);
    expect(present.logs()).not.toMatch(/is not usable/);
  });
});

describe('log levels', () => {
  const db = useTestDatabase();
  let kafka: KafkaHarness;
  let relay: RelayProcess | undefined;
  afterAll(async () => {
    relay?.kill('SIGTERM');
    await relay?.exited;
    await kafka?.stop();
  });

  it('a refused event (missing topic on a real broker) is one warn line per event, and no line is error', async () => {
    kafka = await startKafka();
    await migrateDb(db);
    relay = spawnCli([
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--no-http',
      ...kafka.relayArgs(),
      // No retry within the test: each event fails once. The back-off is full jitter (a retry is
      // due anywhere in [0, 600 s)), so the sweeper, which would retry a row due early and log a
      // second 'event failed' for it (CI saw it once), looks only at start.
      '--failure-backoff-ms',
      '600000',
      '--sweep-interval-ms',
      '600000',
    ]);
    await relay.waitForLog(/streaming from the slot/);
    // Topic outbox.event.Missing does not exist, and the test broker does not create topics.
    await db.query(
      `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
       SELECT 'Missing', 'm-' || i, 'Refused', convert_to('{}', 'UTF8') FROM generate_series(1, 3) i`,
    );
    const events = await db.query<{ event_id: string }>('SELECT event_id FROM outbox ORDER BY id');
    const lines = () =>
      relay!
        .logs()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const failed = () => lines().filter((l) => l.msg !== undefined && /^event failed/.test(String(l.msg)));
    await waitFor(() => failed().length >= events.length, {
      timeoutMs: 30_000,
      message: () => `no 'event failed' line per event:\n${relay!.logs()}`,
    });
    // A moment for any late kafkajs line about the same refusal.
    await new Promise((r) => setTimeout(r, 1000));
    expect(
      lines().filter((l) => (l.level as number) >= 50),
      relay.logs(),
    ).toEqual([]);
    const f = failed();
    expect(f.map((l) => l.event_id).sort()).toEqual(events.map((e) => e.event_id).sort());
    for (const l of f) {
      expect(l).toMatchObject({
        level: 40,
        topic: kafka.topic('outbox.event.Missing'),
        error_class: 'permanent',
        reason: 'UNKNOWN_TOPIC_OR_PARTITION',
      });
    }
    // kafkajs' own lines about the refusal are debug: the relay's warn per event says it. (Others
    // may be warn, e.g. the broker's coordinator still loading right after it started.)
    const refusal = /does not host this topic-partition/;
    const kafkajs = lines().filter((l) => l.component === 'kafkajs');
    expect(kafkajs.some((l) => refusal.test(`${l.msg} ${l.error ?? ''}`))).toBe(false); // not at info+
    expect(kafkajs.filter((l) => (l.level as number) >= 50)).toEqual([]);
  });
});

describe('envelope occurred_at', () => {
  const db = useTestDatabase();
  let relay: RelayProcess | undefined;
  afterAll(async () => {
    relay?.kill('SIGTERM');
    await relay?.exited;
  });

  it('keeps the microseconds of created_at', async () => {
    await migrateDb(db);
    relay = spawnCli([
      'run',
      '--database-url',
      db.url,
      '--slot',
      slotOf(db),
      '--sink',
      'stdout',
      '--no-http',
      '--value-format',
      'envelope-json',
    ]);
    await relay.waitForLog(/streaming from the slot/);
    await db.query(
      `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, created_at)
       VALUES ('Order', '1', 'OrderPlaced', convert_to('{}', 'UTF8'), '2026-11-20 14:05:00.123456+00')`,
    );
    await waitFor(() => relay!.stdout().includes('OrderPlaced'), { timeoutMs: 20_000 });
    const line = JSON.parse(relay.stdout().trim().split('\n')[0]!) as { value: string };
    expect(JSON.parse(line.value).occurredAt).toBe('2026-11-20T14:05:00.123456Z');
  });
});
