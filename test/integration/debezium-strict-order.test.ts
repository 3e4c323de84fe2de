import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { createDebeziumOutbox, debeziumStringArgs, insertThenDelete } from '../support/debezium-table.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import { slotOf, spawnCli, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * The Debezium preset with strict ordering (the default): the events of a key whose earlier event
 * failed are parked in the side table behind it — in the session that saw the failure, and after
 * a restart, when which keys are blocked comes from the side table. Once the head is resent and
 * published, the parked events follow in WAL order: the key's order on its topic is kept; then
 * the key is unblocked and its next event goes straight out.
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

const sideRows = () =>
  db.query<{ wal_position: string; id: string; status: string }>(
    `SELECT wal_position::text, columns ->> 'id' AS id, status FROM outbox_relay_failed ORDER BY wal_position`,
  );

it('a key blocked by a failed event stays blocked across a restart; the head resent, its parked events follow in order', async () => {
  await createDebeziumOutbox(db);
  await kafka.createTopic('outbox.event.Order', 1);
  const debeziumArgs = debeziumStringArgs(kafka);
  const config = testConfig(
    db,
    [
      ...debeziumArgs,
      '--no-http',
      // The head is retried only when resent: nothing but the fix of the cause releases the key.
      '--failure-backoff-ms',
      '3600000',
      '--failure-backoff-max-ms',
      '3600000',
      '--sweep-interval-ms',
      '200',
    ],
    kafka.brokers,
  );
  const start = async () => {
    relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
  };
  const ids = { a: randomUUID(), a2: randomUUID(), b: randomUUID(), o1: randomUUID(), o2: randomUUID() };

  // A of key x-1 is refused (its topic does not exist); A2 of the same key, streamed in the same
  // session, is parked behind it; o-1 of another topic goes out.
  await start();
  await insertThenDelete(db, [[ids.a, 'Missing', 'x-1']]);
  await waitFor(async () => (await sideRows()).length === 1, { timeoutMs: 30_000, message: 'A failed' });
  await insertThenDelete(db, [
    [ids.a2, 'Missing', 'x-1'],
    [ids.o1, 'Order', 'o-1'],
  ]);
  await waitFor(async () => (await kafka.readAll('outbox.event.Order')).length === 1, {
    timeoutMs: 30_000,
    message: 'o-1 published',
  });
  await waitFor(async () => (await sideRows()).length === 2, { timeoutMs: 30_000, message: 'A2 parked' });
  expect((await sideRows()).map((r) => [r.id, r.status])).toEqual([
    [ids.a, 'failed'],
    [ids.a2, 'parked'],
  ]);

  // The relay restarts; meanwhile the topic is created, so nothing but the order rule would hold
  // B of x-1 back: its key must be blocked again, read from the side table.
  await relay!.stop();
  relay = null;
  await kafka.createTopic('outbox.event.Missing', 1);
  await start();
  await insertThenDelete(db, [
    [ids.b, 'Missing', 'x-1'],
    [ids.o2, 'Order', 'o-2'],
  ]);
  await waitFor(async () => (await kafka.readAll('outbox.event.Order')).length === 2, {
    timeoutMs: 30_000,
    message: 'o-2 published (B was streamed before it)',
  });
  await waitFor(async () => (await sideRows()).length === 3, {
    timeoutMs: 10_000,
    message: 'B parked behind A after the restart',
  }).catch(() => {});
  // B published here, before A, is the reorder this guards against.
  expect((await kafka.readAll('outbox.event.Missing')).map((r) => r.headers.id?.toString())).toEqual([]);
  expect((await sideRows()).map((r) => [r.id, r.status])).toEqual([
    [ids.a, 'failed'],
    [ids.a2, 'parked'],
    [ids.b, 'parked'],
  ]);

  // The operator resends A: A is published, then its parked events are released in WAL order.
  const a = (await sideRows())[0]!;
  const resend = spawnCli([
    'events',
    'resend',
    a.wal_position,
    '--database-url',
    db.url,
    '--slot',
    slotOf(db),
    ...debeziumArgs,
  ]);
  expect(await resend.exited).toBe(0);
  await waitFor(async () => (await kafka.readAll('outbox.event.Missing')).length === 3, {
    timeoutMs: 30_000,
    message: 'A, then A2 and B released',
  });
  const published = await kafka.readAll('outbox.event.Missing');
  expect(published.map((r) => r.headers.id?.toString())).toEqual([ids.a, ids.a2, ids.b]);
  expect(published.map((r) => r.key?.toString())).toEqual(['x-1', 'x-1', 'x-1']);
  await waitFor(async () => (await sideRows()).every((r) => r.status === 'published'), {
    timeoutMs: 10_000,
    message: 'every side row published',
  });

  // Nothing holds x-1 any more: the side sweeper unblocks it (a few rounds of 200 ms), and its next
  // event is published by the stream at once, never written to the side table.
  await waitFor(() => relay!.blockedAggregates === 0, {
    timeoutMs: 30_000,
    message: 'x-1 unblocked by the side sweeper',
  });
  const d = randomUUID();
  await insertThenDelete(db, [[d, 'Missing', 'x-1']]);
  await waitFor(async () => (await kafka.readAll('outbox.event.Missing')).length === 4, {
    timeoutMs: 30_000,
    message: 'D published',
  });
  expect((await kafka.readAll('outbox.event.Missing'))[3]!.headers.id?.toString()).toBe(d);
  expect((await sideRows()).map((r) => r.id)).not.toContain(d);
}, 180_000);
