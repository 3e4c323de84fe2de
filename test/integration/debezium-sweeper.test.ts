import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { createDebeziumOutbox, debeziumStringArgs, insertThenDelete } from '../support/debezium-table.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import { startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * The Debezium preset's failed events go through the relay's one sweeper (sweeper/sweeper.ts), so
 * they follow the failure lifecycle the outbox table's events follow:
 * - `--max-attempts 0` retries forever (the preset's copy of the sweeper marked the event dead at
 *   its first retry);
 * - a dead event's dead-letter copy is the shared one (sweeper/dead-letter.ts): the original
 *   record plus the x-dlq-* headers; a dead-letter topic that refuses the copy leaves the event
 *   dead and counts outbox_dlq_publish_failed_total (the copy's publish threw out of the round
 *   before the event was marked, so it was retried every round and never died, and every due
 *   event behind it in the round waited).
 */
let kafka: KafkaHarness;
let db: TestDatabase | null = null;
let relay: Relay | null = null;

beforeAll(async () => {
  kafka = await startKafka();
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
  await db?.close();
  db = null;
});

afterAll(async () => {
  await kafka?.stop();
});

const sideRow = async (id: string) =>
  (
    await db!.query<{ status: string; attempts: number; last_error: string }>(
      `SELECT status, attempts, last_error FROM outbox_relay_failed WHERE columns ->> 'id' = $1`,
      [id],
    )
  )[0];

async function startRelay(extra: string[]): Promise<void> {
  db = await createTestDatabase();
  await createDebeziumOutbox(db);
  const config = testConfig(
    db,
    [
      ...debeziumStringArgs(kafka),
      '--no-http',
      '--failure-backoff-ms',
      '20',
      '--failure-backoff-max-ms',
      '20',
      '--sweep-interval-ms',
      '100',
      ...extra,
    ],
    kafka.brokers,
  );
  relay = await startRelayInProcess(config, new KafkaSink(config, silentLogger()));
}

it('--max-attempts 0 retries a refused event of the side table forever: it is never dead', async () => {
  await startRelay(['--max-attempts', '0']);
  const id = randomUUID();
  // Its topic does not exist (auto-creation off): every attempt is refused for good.
  await insertThenDelete(db!, [[id, 'Missing', 'm-1']]);

  await waitFor(
    async () => {
      const r = await sideRow(id);
      return r !== undefined && (r.attempts >= 4 || r.status !== 'failed');
    },
    { timeoutMs: 30_000, message: 'the refused event retried three times' },
  );
  const r = (await sideRow(id))!;
  expect(r.status).toBe('failed');
  expect(r.attempts).toBeGreaterThanOrEqual(4);
  expect(r.last_error).toMatch(/^permanent\//);
});

it('a dead event of the side table is copied to the dead-letter topic; a refused copy leaves it dead and is counted', async () => {
  const dlq = `${kafka.ns}outbox.dlq`;
  await startRelay(['--max-attempts', '2', '--dead-letter-topic', dlq]);
  const first = randomUUID();
  // The dead-letter topic does not exist yet: the copy is refused, the event is dead all the same.
  await insertThenDelete(db!, [[first, 'Missing', 'm-1']]);
  await waitFor(async () => (await sideRow(first))?.status === 'dead', {
    timeoutMs: 30_000,
    message: 'the event dead after two attempts although its dead-letter copy was refused',
  });
  expect((await sideRow(first))!.attempts).toBe(2);
  await waitFor(async () => (await relay!.metrics.failures.dlqPublishFailed.get()).values[0]?.value === 1, {
    timeoutMs: 10_000,
    message: 'outbox_dlq_publish_failed_total = 1',
  });
  expect((await relay!.metrics.failures.retryExhaustions.get()).values[0]?.value).toBe(1);

  // With the topic there, the next dead event's copy is the original record plus why it died.
  await kafka.createTopic('outbox.dlq', 1);
  const second = randomUUID();
  await insertThenDelete(db!, [[second, 'Missing', 'm-2']]);
  await waitFor(async () => (await kafka.readAll('outbox.dlq')).length === 1, {
    timeoutMs: 30_000,
    message: 'the dead event on the dead-letter topic',
  });
  const [copy] = await kafka.readAll('outbox.dlq');
  const h = (name: string) => copy!.headers[name]?.toString();
  expect(copy!.key?.toString()).toBe('m-2');
  expect(copy!.value?.toString()).toBe(`{"id": "${second}"}`);
  expect(h('id')).toBe(second);
  expect(h('x-dlq-attempts')).toBe('2');
  expect(h('x-dlq-original-topic')).toBe(`${kafka.ns}outbox.event.Missing`);
  expect(h('x-dlq-reason')).toMatch(/^UNKNOWN_TOPIC_OR_PARTITION: /);
  expect(Number.isNaN(Date.parse(h('x-dlq-failed-at') ?? ''))).toBe(false);
  expect((await sideRow(second))!.status).toBe('dead');
  expect((await relay!.metrics.failures.dlqPublished.get()).values[0]?.value).toBe(1);
});

it('a side-table row whose columns an operator broke fails alone (ROW_INVALID); the round goes on and retries the others', async () => {
  await startRelay(['--max-attempts', '0']);
  const [broken, objectPayload, good] = [randomUUID(), randomUUID(), randomUUID()];
  // Refused for good at first (their topic does not exist): each is kept in the side table.
  await insertThenDelete(db!, [
    [broken, 'Later', 'l-1'],
    [objectPayload, 'Later', 'l-2'],
    [good, 'Later', 'l-3'],
  ]);
  await waitFor(async () => (await sideRow(good))?.status === 'failed', {
    timeoutMs: 30_000,
    message: 'the three events in the side table',
  });
  // An operator's edits: the first row's columns become JSON null, the second's payload an object.
  await db!.query(`UPDATE outbox_relay_failed SET columns = 'null'::jsonb WHERE columns ->> 'id' = $1`, [
    broken,
  ]);
  await db!.query(
    `UPDATE outbox_relay_failed SET columns = jsonb_set(columns, '{payload}', '{"a": 1}') WHERE columns ->> 'id' = $1`,
    [objectPayload],
  );
  await kafka.createTopic('outbox.event.Later', 1);
  // The good one is published by a retry in a round that also meets the two broken rows.
  await waitFor(async () => (await sideRow(good))?.status === 'published', {
    timeoutMs: 30_000,
    message: 'the intact event published by the sweeper',
  });
  const [r] = await db!.query<{ status: string; last_error: string }>(
    "SELECT status, last_error FROM outbox_relay_failed WHERE columns = 'null'::jsonb",
  );
  expect(r!.status).toBe('failed');
  expect(r!.last_error).toMatch(/ROW_INVALID.*columns of this event are null, not an object/);
  const o = (await sideRow(objectPayload))!;
  expect(o.status).toBe('failed');
  expect(o.last_error).toMatch(/ROW_INVALID.*hold "payload" as an object, not a text/);
  expect((await kafka.readAll('outbox.event.Later')).map((m) => m.key?.toString())).toEqual(['l-3']);
});

it('prunes the side table: dead and published rows past their window go, a dead head its parked event waits behind stays until discarded', async () => {
  await startRelay([
    '--max-attempts',
    '2',
    '--retention-published-ms',
    '0',
    '--retention-dead-ms',
    '0',
    '--prune-interval-ms',
    '100',
  ]);
  const [dead, head, follower, probe] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  // Refused for good (no such topic yet): kept in the side table; the follower parked behind g-1.
  await insertThenDelete(db!, [
    [dead, 'Gone', 'd-1'],
    [head, 'Gone', 'g-1'],
    [follower, 'Gone', 'g-1'],
  ]);
  await waitFor(async () => (await sideRow(head))?.status === 'dead', {
    timeoutMs: 30_000,
    message: 'the head dead (and not pruned: its follower waits behind it)',
  });
  expect((await sideRow(follower))?.status).toBe('parked');
  // A probe that dies after the head: once it is pruned, a prune round has seen the head dead.
  await insertThenDelete(db!, [[probe, 'Gone', 'p-1']]);
  const prunedDead = async () =>
    (await relay!.metrics.pruned.get()).values.find((v) => v.labels.status === 'dead')?.value ?? 0;
  await waitFor(async () => (await prunedDead()) === 2, {
    timeoutMs: 30_000,
    message: 'the two dead rows without followers (d-1, the probe) pruned from the side table',
  });
  expect(await sideRow(dead)).toBeUndefined();
  expect(await sideRow(probe)).toBeUndefined();
  expect((await sideRow(head))?.status).toBe('dead');
  expect((await sideRow(follower))?.status).toBe('parked');
  // The topic made and the head discarded by an operator: the follower is released (published),
  // and both go at the next prunes.
  await kafka.createTopic('outbox.event.Gone', 1);
  await db!.query(`UPDATE outbox_relay_failed SET status = 'discarded' WHERE columns ->> 'id' = $1`, [head]);
  await waitFor(async () => !(await sideRow(head)) && !(await sideRow(follower)), {
    timeoutMs: 30_000,
    message: 'the discarded head and its published follower pruned',
  });
  expect((await kafka.readAll('outbox.event.Gone')).map((m) => m.key?.toString())).toEqual(['g-1']);
  const pruned = Object.fromEntries(
    (await relay!.metrics.pruned.get()).values.map((v) => [v.labels.status, v.value]),
  );
  expect(pruned).toEqual({ dead: 2, discarded: 1, published: 1 });
});
