import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { createDebeziumOutbox, debeziumStringArgs } from '../support/debezium-table.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import { slotOf, spawnCli, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * The Debezium preset with insert-then-delete (Debezium's documented usage: the table stays
 * empty, the event exists only in the WAL): an event the broker refuses for good (its topic does
 * not exist) cannot be written on its row, so it is kept in the side table with its reason, the
 * slot moves on, the other events of the transaction are published — and once the topic exists,
 * `outbox-relay events resend <id>` makes it due and the side table's sweeper publishes it with
 * the bytes the stream would have written.
 */
let kafka: KafkaHarness;
let db: TestDatabase;
let relay: Relay | null = null;

beforeAll(async () => {
  kafka = await startKafka();
  db = await createTestDatabase();
});

afterAll(async () => {
  await relay?.stop();
  await db?.close();
  await kafka?.stop();
});

it('a refused event of an insert-then-delete transaction is kept in the side table, then resent', async () => {
  await createDebeziumOutbox(db);
  await kafka.createTopic('outbox.event.Order', 3);
  const debeziumArgs = debeziumStringArgs(kafka);
  const config = testConfig(
    db,
    [
      ...debeziumArgs,
      '--no-http',
      '--failure-backoff-ms',
      '3600000',
      '--failure-backoff-max-ms',
      '3600000',
      '--sweep-interval-ms',
      '200',
    ],
    kafka.brokers,
  );
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));

  const ids = { a: randomUUID(), refused: randomUUID(), b: randomUUID() };
  const tx = await db.pool.connect();
  try {
    await tx.query('BEGIN');
    for (const [id, type, key] of [
      [ids.a, 'Order', 'o-1'],
      [ids.refused, 'Missing', 'm-1'],
      [ids.b, 'Order', 'o-2'],
    ])
      await tx.query(
        `INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload) VALUES ($1, $2, $3, 'Created', $4)`,
        [id, type, key, JSON.stringify({ id, note: 'ü "q"' })],
      );
    await tx.query('DELETE FROM outbox');
    await tx.query('COMMIT');
  } finally {
    tx.release();
  }
  const commitLsn = (await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'))[0]!.lsn;

  // The two others are published; the refused one is in the side table with its reason.
  await waitFor(async () => (await kafka.readAll('outbox.event.Order')).length === 2, {
    timeoutMs: 30_000,
    message: 'the two events of existing topics',
  });
  await waitFor(
    async () => (await db.query(`SELECT 1 FROM outbox_relay_failed WHERE status = 'failed'`)).length === 1,
    { timeoutMs: 30_000, message: 'the refused event in the side table' },
  );
  const [kept] = await db.query<{
    wal_position: string;
    columns: Record<string, string>;
    last_error: string;
  }>('SELECT wal_position::text, columns, last_error FROM outbox_relay_failed');
  expect(kept!.columns.id).toBe(ids.refused);
  expect(kept!.columns.aggregatetype).toBe('Missing');
  expect(kept!.last_error).toMatch(/^permanent\//);
  expect((await db.query('SELECT 1 FROM outbox')).length).toBe(0);
  // The slot moved past the transaction: the failure is recorded, nothing holds the stream.
  await waitFor(
    async () =>
      (
        await db.query<{ ok: boolean }>(
          'SELECT confirmed_flush_lsn >= $1::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = $2',
          [commitLsn, slotOf(db)],
        )
      )[0]?.ok === true,
    { timeoutMs: 30_000, message: 'the slot confirmed past the transaction' },
  );

  // The operator fixes the cause (creates the topic) and resends the event by its id.
  await kafka.createTopic('outbox.event.Missing', 3);
  const listed = spawnCli([
    'events',
    'list',
    '--json',
    '--database-url',
    db.url,
    '--slot',
    slotOf(db),
    ...debeziumArgs,
  ]);
  expect(await listed.exited).toBe(0);
  expect(JSON.parse(listed.stdout()).events.map((e: { id: string }) => e.id)).toEqual([kept!.wal_position]);
  const resend = spawnCli([
    'events',
    'resend',
    kept!.wal_position,
    '--database-url',
    db.url,
    '--slot',
    slotOf(db),
    ...debeziumArgs,
  ]);
  expect(await resend.exited).toBe(0);
  expect(resend.stdout()).toMatch(/1 event\(s\) due again now/);

  await waitFor(async () => (await kafka.readAll('outbox.event.Missing')).length === 1, {
    timeoutMs: 30_000,
    message: 'the resent event on its topic',
  });
  const [record] = await kafka.readAll('outbox.event.Missing');
  expect(record!.key?.toString()).toBe('m-1');
  expect(record!.headers.id?.toString()).toBe(ids.refused);
  // jsonb's text, as the WAL carried it (StringConverter: the bytes as they are).
  expect(record!.value?.toString()).toBe(`{"id": "${ids.refused}", "note": "ü \\"q\\""}`);
  const [after] = await db.query<{ status: string; attempts: number }>(
    'SELECT status, attempts FROM outbox_relay_failed',
  );
  expect(after).toEqual({ status: 'published', attempts: 1 });
}, 180_000);
