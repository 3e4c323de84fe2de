import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { slotOf, spawnCli } from '../support/relay.ts';

/**
 * The cutover from a distributed Kafka Connect worker: `migrate --compat debezium
 * --debezium-offsets-topic <offset.storage.topic>` reads the connector's offsets from the real
 * broker, written as Connect writes them (key and value by its internal JsonConverter with
 * schemas off, partitioned by the key): the latest record of the connector's key wins over an
 * older one, another connector's record makes the choice ambiguous until the connector is named
 * (exit 64, listing them), another kind of connector's record is left out, a tombstone (offsets
 * reset) is refused (exit 78). The dry run prints the record it read; the real run records it.
 */
let kafka: KafkaHarness;
let db: TestDatabase;

beforeAll(async () => {
  kafka = await startKafka();
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.query('SELECT pg_drop_replication_slot($1)', [slotOf(db)]).catch(() => {});
  await db?.close();
  await kafka?.stop();
});

const KEY = '["outbox-connector",{"server":"app"}]';
const OTHER = '["billing-connector",{"server":"billing"}]';

/** A Debezium PostgreSQL offsets value as Connect stores it. */
const value = (proc: bigint, commit: bigint, txId: number) =>
  `{"transaction_id":null,"lsn_proc":${proc},"messageType":"INSERT","lsn_commit":${commit},"lsn":${proc},"txId":${txId},"ts_usec":1764133200000000}`;

/** Debezium's outbox table and its pgoutput slot; the WAL position now (bytes). */
async function debeziumDatabase(d: TestDatabase): Promise<bigint> {
  await d.query(
    `CREATE TABLE public.outbox (
       id uuid NOT NULL PRIMARY KEY, aggregatetype varchar(255) NOT NULL,
       aggregateid varchar(255) NOT NULL, type varchar(255) NOT NULL, payload jsonb)`,
  );
  await d.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [slotOf(d)]);
  const [lsn] = await d.query<{ now: string }>(`SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS now`);
  return BigInt(lsn!.now);
}

/** `migrate --compat debezium` reading the offsets topic `topic` for database `d`. */
const migrateArgs = (d: TestDatabase, topic: string) => [
  'migrate',
  '--database-url',
  d.url,
  '--slot',
  slotOf(d),
  '--compat',
  'debezium',
  '--kafka-brokers',
  kafka.brokers.join(','),
  '--debezium-offsets-topic',
  topic,
];

/** An LSN's text form. */
const text = (n: bigint) =>
  `${(n >> 32n).toString(16).toUpperCase()}/${(n & 0xffffffffn).toString(16).toUpperCase()}`;

it('migrate --debezium-offsets-topic: the connector named, its latest record; dry run prints it', async () => {
  await db.query('CREATE TABLE filler AS SELECT g FROM generate_series(1, 1000) g');
  const now = await debeziumDatabase(db);

  // Connect's offsets topic: compacted, several partitions; records keyed by connector and server.
  const topic = kafka.topic('connect-offsets');
  await kafka.createTopic('connect-offsets', 5, { config: { 'cleanup.policy': 'compact' } });
  const client = new Kafka({ brokers: kafka.brokers, logLevel: logLevel.NOTHING });
  const producer = client.producer();
  await producer.connect();
  const send = (key: string, v: string | null) => producer.send({ topic, messages: [{ key, value: v }] });
  await send(KEY, value(now - 400n, now - 500n, 700)); // older: superseded
  await send(OTHER, value(now - 9000n, now - 9100n, 3)); // another Debezium connector
  await send('["files",{"filename":"/var/in.txt"}]', '{"position":42}'); // not Debezium
  await send(KEY, value(now, now - 24n, 701));

  const args = migrateArgs(db, topic);
  const ambiguous = spawnCli([...args, '--dry-run']);
  expect(await ambiguous.exited, ambiguous.logs()).toBe(64);
  expect(ambiguous.logs()).toMatch(
    /several Debezium PostgreSQL connectors: (outbox-connector \(topic.prefix app\), billing-connector \(topic.prefix billing\)|billing-connector \(topic.prefix billing\), outbox-connector \(topic.prefix app\))\. Name one with --debezium-connector/,
  );

  const dry = spawnCli([...args, '--debezium-connector', 'outbox-connector', '--dry-run']);
  expect(await dry.exited, dry.logs()).toBe(0);
  expect(dry.stdout()).toMatch(
    new RegExp(
      `Debezium's offsets \\(connector outbox-connector, topic ${topic.replace(/\./g, '\\.')} partition \\d offset \\d+\\): lsn_proc ${text(now)}, lsn_commit ${text(now - 24n)}`,
    ),
  );
  expect((await db.query(`SELECT to_regclass('outbox_relay_cutover') AS t`))[0]).toEqual({ t: null });

  // The real run, the connector picked by its topic.prefix this time.
  const real = spawnCli([...args, '--debezium', 'topic.prefix=app']);
  expect(await real.exited, real.logs()).toBe(0);
  expect(await db.query('SELECT lsn_proc::text, lsn_commit::text FROM outbox_relay_cutover')).toEqual([
    { lsn_proc: text(now), lsn_commit: text(now - 24n) },
  ]);

  // The connector's offsets reset (a tombstone): there is no position to start from.
  await send(KEY, null);
  await producer.disconnect();
  const reset = spawnCli([...args, '--debezium-connector', 'outbox-connector', '--dry-run']);
  expect(await reset.exited, reset.logs()).toBe(78);
  expect(reset.logs()).toMatch(
    /offsets of outbox-connector \(topic.prefix app\) were reset \(a tombstone at topic/,
  );
}, 120_000);

it('migrate --debezium-offsets-topic: a transaction left open on the topic is waited for, not read past (the latest committed record wins)', async () => {
  const own = await createTestDatabase();
  try {
    const now = await debeziumDatabase(own);

    const topic = kafka.topic('connect-offsets-txn');
    await kafka.createTopic('connect-offsets-txn', 1, { config: { 'cleanup.policy': 'compact' } });
    const client = new Kafka({ brokers: kafka.brokers, logLevel: logLevel.NOTHING });
    const plain = client.producer();
    const worker = client.producer({
      transactionalId: `${topic}-worker`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await plain.connect();
    await worker.connect();
    try {
      await plain.send({ topic, messages: [{ key: KEY, value: value(now - 800n, now - 900n, 700) }] });
      // A worker's offsets transaction, left open (a worker killed mid-transaction): the last
      // stable offset stops at its record, before the newer record committed after it.
      const open = await worker.transaction();
      await open.send({ topic, messages: [{ key: KEY, value: value(now - 400n, now - 500n, 701) }] });
      await plain.send({ topic, messages: [{ key: KEY, value: value(now, now - 24n, 702) }] });

      // The wait is bounded: a transaction open longer than the read waits is named.
      const { TopicLog, OpenTransactionError } = await import('../../src/sinks/kafka/kafka-log-reader.ts');
      const log = await TopicLog.open(client, topic);
      try {
        const refused = await log.decidedBounds(0, { timeoutMs: 300 }).catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(OpenTransactionError);
        expect((refused as Error).message).toMatch(/stayed at 1, below its end 3, .*still open/);
      } finally {
        await log.close();
      }

      const dry = spawnCli([...migrateArgs(own, topic), '--dry-run']);
      await dry.waitForLog(/the offsets topic has an open transaction/, 60_000);
      await open.abort();
      expect(await dry.exited, dry.logs()).toBe(0);
      // Not the record before the open transaction (0/…-800), and not the aborted one.
      expect(dry.stdout()).toMatch(
        new RegExp(`partition 0 offset \\d+\\): lsn_proc ${text(now)}, lsn_commit ${text(now - 24n)}`),
      );
    } finally {
      await plain.disconnect();
      await worker.disconnect();
    }
  } finally {
    await own.query('SELECT pg_drop_replication_slot($1)', [slotOf(own)]).catch(() => {});
    await own.close();
  }
}, 120_000);
