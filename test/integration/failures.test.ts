import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BlockedAggregates } from '../../src/lifecycle/blocked-aggregates.ts';
import { OutboxStore } from '../../src/lifecycle/outbox-store.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { RelayMetrics } from '../../src/observability/metrics.ts';
import { routeConfigOf } from '../../src/route/router.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { OutboxRows } from '../../src/sweeper/outbox-rows.ts';
import { Sweeper } from '../../src/sweeper/sweeper.ts';
import { type KafkaHarness, startDedicatedKafka, startKafka } from '../support/kafka.ts';
import { createTestDatabase, dropSlotWhenReleased, useTestDatabase, waitFor } from '../support/postgres.ts';
import { insertEvents, migrateDb, slotPosition, startRelayInProcess, testConfig } from '../support/relay.ts';

/**
 * The failure lifecycle (permanent failures recorded, retried, dead, dead-lettered; strict
 * and relaxed ordering) against a real broker's own refusals: a topic that does not exist
 * (auto-creation off) and a topic whose max.message.bytes is too small. Refusals by ACL are in
 * kafka-auth.test.ts.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: Relay | null = null;
let sink: KafkaSink | null = null;

const FAST = [
  '--failure-backoff-ms',
  '150',
  '--failure-backoff-max-ms',
  '400',
  '--sweep-interval-ms',
  '100',
  '--status-interval-ms',
  '300',
];

async function startRelay(extra: string[], target: KafkaHarness = kafka): Promise<Relay> {
  const config = testConfig(db, [...FAST, ...extra], target);
  sink = new KafkaSink(config, silentLogger());
  relay = await startRelayInProcess(config, sink);
  await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });
  return relay;
}

interface Row {
  id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date | null;
}
async function rows(ids: string[]): Promise<Row[]> {
  return db.query<Row>(
    // ORDER BY the bigint (o.id), not the text alias: '10' sorts before '8'.
    'SELECT o.id::text AS id, status, attempts, last_error, next_attempt_at FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
    [ids],
  );
}
async function statusOf(id: string): Promise<string> {
  return (await rows([id]))[0]!.status;
}
/** outbox_events_published_total of the relay for `topic` (every path that publishes counts: issue 20). */
const publishedTotal = async (topic: string): Promise<number> =>
  (await relay!.metrics.eventsPublished.get()).values.find((v) => v.labels.topic === kafka.topic(topic))
    ?.value ?? 0;
const seqs = async (topic: string, key: string, from: KafkaHarness = kafka) =>
  (await from.readAll(topic))
    .filter((m) => m.key?.toString() === key)
    .map((m) => JSON.parse(m.value!.toString()).seq as number);
const ev = (type: string, id: string, seq: number, size = 0) => ({
  aggregateType: type,
  aggregateId: id,
  eventType: 'E',
  payload: JSON.stringify({ seq, pad: 'x'.repeat(size) }),
});

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
});

afterAll(async () => {
  await kafka?.stop();
});

describe('permanent failures', () => {
  it('records a refused event (topic over its max.message.bytes) as failed, keeps other aggregates flowing, confirms past it, and publishes once fixed', async () => {
    await kafka.createTopic('outbox.event.Secret', 1, { config: { 'max.message.bytes': '1500' } });
    await kafka.createTopic('outbox.event.Open', 1);
    await startRelay(['--max-attempts', '0']);
    const [s1, o1] = await insertEvents(db.pool, [ev('Secret', 's', 0, 4000), ev('Open', 'o', 0)]);
    const [o2] = await insertEvents(db.pool, [ev('Open', 'o', 1)]);
    const afterInsert = (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l'))[0]!.l;
    await waitFor(async () => (await statusOf(o2!)) === 'published', {
      timeoutMs: 20_000,
      message: 'other aggregate published',
    });
    expect(await statusOf(o1!)).toBe('published');
    await waitFor(async () => (await statusOf(s1!)) === 'failed', { message: 's1 failed' });
    const [failed] = await rows([s1!]);
    expect(failed!.last_error).toMatch(/permanent\/MESSAGE_TOO_LARGE/);
    expect(failed!.next_attempt_at).not.toBeNull();
    // Recorded, so its position is confirmed: the slot does not wait for the failed event.
    await waitFor(
      async () => {
        const { confirmed } = await slotPosition(db);
        return (
          await db.query<{ ok: boolean }>('SELECT $1::pg_lsn >= $2::pg_lsn AS ok', [confirmed, afterInsert])
        )[0]!.ok;
      },
      { message: 'slot confirmed past the failed event' },
    );
    // The sweeper retries with back-off: attempts grow while the topic keeps refusing it.
    await waitFor(async () => (await rows([s1!]))[0]!.attempts >= 3, {
      timeoutMs: 20_000,
      message: 'attempts grow',
    });
    // Every Open event, in order; duplicates allowed: after the partial refusal the producer is
    // replaced and re-sends what the broker had stored (issue 10, item 2).
    expect([...new Set(await seqs('outbox.event.Open', 'o'))]).toEqual([0, 1]);
    expect((await relay!.metrics.failures.retries.get()).values[0]!.value).toBeGreaterThanOrEqual(2);
    await raiseMaxMessageBytes('outbox.event.Secret');
    await waitFor(async () => (await statusOf(s1!)) === 'published', {
      timeoutMs: 20_000,
      message: 's1 published after the fix',
    });
    expect(await seqs('outbox.event.Secret', 's')).toEqual([0]);
  });

  it('records an event for a topic that does not exist (auto-creation off) as failed, and publishes it once the topic exists', async () => {
    await kafka.createTopic('outbox.event.Present', 1);
    await startRelay(['--max-attempts', '0']);
    const [m1, p1] = await insertEvents(db.pool, [ev('Absent', 'a', 0), ev('Present', 'p', 0)]);
    await waitFor(async () => (await statusOf(p1!)) === 'published', {
      timeoutMs: 20_000,
      message: 'the event of the existing topic published',
    });
    await waitFor(async () => (await statusOf(m1!)) === 'failed', {
      timeoutMs: 20_000,
      message: 'the event of the missing topic recorded failed',
    });
    expect((await rows([m1!]))[0]!.last_error).toMatch(/permanent\/UNKNOWN_TOPIC_OR_PARTITION/);
    expect(await kafka.listTopics()).not.toContain('outbox.event.Absent');
    // Refused by the metadata request, before any Produce request: the producer's sequence state
    // is intact and it is kept (replacing it costs the stream a second or two per refused event).
    expect(sink!.producerReplacements).toBe(0);
    // Found missing by the relay's own metadata request before its first send, not after kafkajs'
    // ~3 s of metadata retries, which held the whole stream (the soak's start-up stall,
    // docs/benchmarks.md); remembered: its next events fail at once.
    expect(sink!.missingTopics.has(kafka.topic('outbox.event.Absent'))).toBe(true);
    expect(sink!.missingTopics.foundBeforeSend).toBe(1);
    // Another aggregate: a's next event would be parked behind m1 in strict order.
    const [m2, p2] = await insertEvents(db.pool, [ev('Absent', 'b', 0), ev('Present', 'p', 1)]);
    await waitFor(async () => (await statusOf(m2!)) === 'failed' && (await statusOf(p2!)) === 'published', {
      timeoutMs: 20_000,
      message: 'the second event of the missing topic failed, its neighbour published',
    });
    expect(sink!.missingTopics.refusedFast).toBeGreaterThan(0);
    await kafka.createTopic('outbox.event.Absent', 1);
    await waitFor(async () => (await statusOf(m1!)) === 'published', {
      timeoutMs: 20_000,
      message: 'published once the topic exists',
    });
    await waitFor(async () => (await statusOf(m2!)) === 'published', {
      timeoutMs: 20_000,
      message: 'the second one too (the next probe found the topic)',
    });
    expect(sink!.missingTopics.has(kafka.topic('outbox.event.Absent'))).toBe(false);
    expect(await seqs('outbox.event.Absent', 'a')).toEqual([0]);
    expect(await seqs('outbox.event.Absent', 'b')).toEqual([0]);
    // The sweeper's successful retry is counted like the stream's publication.
    await waitFor(async () => (await publishedTotal('outbox.event.Absent')) === 2, {
      message: async () =>
        `outbox_events_published_total{Absent} = ${await publishedTotal('outbox.event.Absent')}`,
    });
    expect(await publishedTotal('outbox.event.Present')).toBe(2);
  });

  it('marks an event dead after max attempts and copies it to the dead-letter topic with x-dlq headers', async () => {
    // outbox.event.Doomed does not exist: every attempt is refused.
    await kafka.createTopic('outbox.dlq', 1);
    await startRelay(['--max-attempts', '3', '--dead-letter-topic', kafka.topic('outbox.dlq')]);
    const [d1] = await insertEvents(db.pool, [ev('Doomed', 'd', 0)]);
    await waitFor(async () => (await statusOf(d1!)) === 'dead', {
      timeoutMs: 20_000,
      message: 'dead after 3 attempts',
    });
    const [dead] = await rows([d1!]);
    expect(dead!.attempts).toBe(3);
    expect(dead!.next_attempt_at).toBeNull();
    await waitFor(async () => (await kafka.readAll('outbox.dlq')).length === 1, { message: 'DLQ copy' });
    const [copy] = await kafka.readAll('outbox.dlq');
    const h = Object.fromEntries(Object.entries(copy!.headers).map(([k, v]) => [k, v.toString()]));
    expect(copy!.key?.toString()).toBe('d');
    expect(JSON.parse(copy!.value!.toString()).seq).toBe(0);
    expect(h['x-dlq-reason']).toMatch(/UNKNOWN_TOPIC_OR_PARTITION/);
    expect(h['x-dlq-attempts']).toBe('3');
    expect(h['x-dlq-original-topic']).toBe(kafka.topic('outbox.event.Doomed'));
    expect(Date.parse(h['x-dlq-failed-at']!)).toBeGreaterThan(Date.now() - 60_000);
    expect((await relay!.metrics.failures.retryExhaustions.get()).values[0]!.value).toBe(1);
    expect((await relay!.metrics.failures.dlqPublished.get()).values[0]!.value).toBe(1);
  });

  it('does not burn attempts while the broker is unreachable during a sweep', async () => {
    const ded = await startDedicatedKafka({ proxy: true });
    try {
      // outbox.event.Flaky does not exist yet: the event is recorded failed.
      await startRelay(
        ['--max-attempts', '0', '--failure-backoff-ms', '50', '--failure-backoff-max-ms', '100'],
        ded,
      );
      const [f1] = await insertEvents(db.pool, [ev('Flaky', 'f', 0)]);
      await waitFor(async () => (await statusOf(f1!)) === 'failed', { timeoutMs: 30_000 });
      ded.proxies[0]!.cut();
      try {
        await new Promise((r) => setTimeout(r, 300));
        const before = (await rows([f1!]))[0]!.attempts;
        // Many sweep rounds with the row due and the broker unreachable.
        await new Promise((r) => setTimeout(r, 4000));
        expect((await rows([f1!]))[0]!.attempts).toBe(before);
      } finally {
        ded.proxies[0]!.restore();
      }
      await ded.createTopic('outbox.event.Flaky', 1);
      await waitFor(async () => (await statusOf(f1!)) === 'published', { timeoutMs: 30_000 });
      expect(await seqs('outbox.event.Flaky', 'f', ded)).toEqual([0]);
    } finally {
      await relay?.stop();
      relay = null;
      await ded.stop();
    }
  });
});

/** Raises a topic's max.message.bytes in place (what an operator does to fix MESSAGE_TOO_LARGE). */
async function raiseMaxMessageBytes(name: string): Promise<void> {
  const admin = await kafka.admin();
  await admin.alterConfigs({
    validateOnly: false,
    resources: [
      {
        type: 2 /* TOPIC */,
        name: kafka.topic(name),
        configEntries: [{ name: 'max.message.bytes', value: '1048588' }],
      },
    ],
  });
}

describe('ordering per aggregate', () => {
  /** The topic refuses batches over 1500 bytes (MESSAGE_TOO_LARGE): A1 is big, A2.. small. */
  const tooLargeTopic = (name: string) =>
    kafka.createTopic(name, 1, { config: { 'max.message.bytes': '1500' } });
  const fixTopic = raiseMaxMessageBytes;

  it('strict: later events of a failed aggregate are parked (also across a restart) and released in order', async () => {
    await tooLargeTopic('outbox.event.Strict');
    await kafka.createTopic('outbox.event.Other', 1);
    await startRelay(['--ordering', 'strict', '--max-attempts', '0']);
    const [a1] = await insertEvents(db.pool, [ev('Strict', 'A', 1, 4000)]);
    const [a2, b1, a3] = await insertEvents(db.pool, [
      ev('Strict', 'A', 2),
      ev('Other', 'B', 1),
      ev('Strict', 'A', 3),
    ]);
    await waitFor(async () => (await statusOf(b1!)) === 'published', {
      timeoutMs: 20_000,
      message: 'B1 flows meanwhile',
    });
    await waitFor(
      async () => (await rows([a1!, a2!, a3!])).map((r) => r.status).join() === 'failed,parked,parked',
      {
        message: async () =>
          `A1 failed, A2 and A3 parked (is ${(await rows([a1!, a2!, a3!])).map((r) => r.status)})`,
      },
    );
    expect((await rows([a1!]))[0]!.last_error).toMatch(/MESSAGE_TOO_LARGE/);
    // Restart: the new relay knows A is blocked from the table alone.
    await relay!.stop();
    await startRelay(['--ordering', 'strict', '--max-attempts', '0']);
    const [a4] = await insertEvents(db.pool, [ev('Strict', 'A', 4)]);
    await waitFor(async () => (await statusOf(a4!)) === 'parked', { message: 'A4 parked after the restart' });
    expect(await seqs('outbox.event.Strict', 'A')).toEqual([]);
    await fixTopic('outbox.event.Strict');
    await waitFor(async () => (await rows([a1!, a2!, a3!, a4!])).every((r) => r.status === 'published'), {
      timeoutMs: 20_000,
      message: 'A1..A4 published after the fix',
    });
    const [a5] = await insertEvents(db.pool, [ev('Strict', 'A', 5)]);
    await waitFor(async () => (await statusOf(a5!)) === 'published', {
      message: 'A5 flows once A is released',
    });
    // Row ids cross 9 → 10 here: a release ordered by the id as text would put A4 first (a bug this caught).
    expect(await seqs('outbox.event.Strict', 'A')).toEqual([1, 2, 3, 4, 5]);
    // Since the restart: A1 by a retry, A2..A4 released, A5 by the stream — each counted once.
    await waitFor(async () => (await publishedTotal('outbox.event.Strict')) === 5, {
      message: async () =>
        `outbox_events_published_total{Strict} = ${await publishedTotal('outbox.event.Strict')}`,
    });
  });

  it('relaxed: later events of the aggregate go first; the failed one is retried on its own', async () => {
    await tooLargeTopic('outbox.event.Relaxed');
    await startRelay(['--ordering', 'relaxed', '--max-attempts', '0']);
    const [r1] = await insertEvents(db.pool, [ev('Relaxed', 'R', 1, 4000)]);
    const [r2, r3] = await insertEvents(db.pool, [ev('Relaxed', 'R', 2), ev('Relaxed', 'R', 3)]);
    await waitFor(async () => (await rows([r2!, r3!])).every((r) => r.status === 'published'), {
      timeoutMs: 20_000,
    });
    expect(await statusOf(r1!)).toBe('failed');
    // Across a restart too.
    await relay!.stop();
    await startRelay(['--ordering', 'relaxed', '--max-attempts', '0']);
    const [r4] = await insertEvents(db.pool, [ev('Relaxed', 'R', 4)]);
    await waitFor(async () => (await statusOf(r4!)) === 'published');
    expect(await seqs('outbox.event.Relaxed', 'R')).toEqual([2, 3, 4]);
    await fixTopic('outbox.event.Relaxed');
    await waitFor(async () => (await statusOf(r1!)) === 'published', { timeoutMs: 20_000 });
    // Relaxed: the failed event comes after the ones that overtook it.
    expect(await seqs('outbox.event.Relaxed', 'R')).toEqual([2, 3, 4, 1]);
  });
});

describe('re-streamed after a recorded failure (a crash between recording and confirming)', () => {
  // A second slot created before the insert replays the same transaction, as a relay restarted
  // before confirming would see it again.
  for (const ordering of ['strict', 'relaxed'] as const) {
    it(`${ordering}: no second failure record, attempts not counted twice, nothing published`, async () => {
      // The topic does not exist: the event is refused (UNKNOWN_TOPIC_OR_PARTITION).
      const topic = `outbox.event.Replayed${ordering}`;
      const replaySlot = `${db.name}_${ordering[0]}`;
      await db.query(`SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, [replaySlot]);
      const slow = [
        '--ordering',
        ordering,
        '--max-attempts',
        '0',
        '--failure-backoff-ms',
        '600000',
        '--failure-backoff-max-ms',
        '600000',
      ];
      await startRelay(slow);
      const [x1] = await insertEvents(db.pool, [ev(`Replayed${ordering}`, 'x', 0)]);
      await waitFor(async () => (await statusOf(x1!)) === 'failed', { message: 'x1 failed' });
      const first = (await rows([x1!]))[0]!;
      await relay!.stop();
      // The "restarted" relay streams the same transaction again from the replay slot.
      const afterInsert = (await db.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l'))[0]!.l;
      await startRelay([...slow, '--slot', replaySlot]);
      await waitFor(
        async () =>
          (
            await db.query<{ ok: boolean }>(
              'SELECT confirmed_flush_lsn >= $2::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = $1',
              [replaySlot, afterInsert],
            )
          )[0]?.ok === true,
        { timeoutMs: 20_000, message: 'replay slot confirmed past the re-streamed event' },
      );
      const again = (await rows([x1!]))[0]!;
      expect(again.status).toBe('failed');
      expect(again.attempts).toBe(1);
      expect(again.next_attempt_at?.getTime()).toBe(first.next_attempt_at?.getTime());
      expect(await kafka.readAll(topic)).toEqual([]);
      await relay!.stop();
      relay = null;
      await dropSlotWhenReleased(db, replaySlot);
    });
  }
});

describe('strict ordering after an operator resolved the head', () => {
  it('the sweeper unblocks an aggregate nothing holds any more, never one with an unwritten decision', async () => {
    const h = await createTestDatabase({ name: 'unblock' });
    try {
      await migrateDb(h);
      const config = testConfig(h, ['--ordering', 'strict', '--no-prune']);
      const published: string[] = [];
      const sink: Sink = {
        name: 'capture',
        start: async () => {},
        stop: async () => {},
        publish: async (batch) => {
          published.push(...batch.map((m) => m.event.id));
        },
        classify: (e) => ({ class: 'permanent', reason: 'TEST', message: String(e) }),
      };
      const blocked = new BlockedAggregates();
      const store = new OutboxRows(new OutboxStore(h.pool, 'public', 'outbox'), routeConfigOf(config));
      const sweeper = new Sweeper({
        config,
        sink,
        store,
        blocked,
        log: silentLogger(),
        metrics: new RelayMetrics(),
        retryHeaders: {},
      });
      // A failed head with no parked followers, not due for a retry.
      const [head] = await insertEvents(h.pool, [ev('Held', 'h', 0)]);
      await h.query(
        `UPDATE outbox SET status = 'failed', attempts = 1, next_attempt_at = now() + interval '1 hour' WHERE id = $1`,
        [head],
      );
      blocked.replace(await store.heldAll()); // as the relay's 'blocked aggregates' component does
      await sweeper.sweepOnce();
      expect(blocked.has('Held', 'h'), 'still held by its failed head').toBe(true);

      // The operator discards it: the next round unblocks the aggregate (its next event flows at once).
      await h.query(`UPDATE outbox SET status = 'discarded' WHERE id = $1`, [head]);
      await sweeper.sweepOnce();
      expect(blocked.has('Held', 'h'), 'unblocked once nothing holds it').toBe(false);

      // A failure the stream decided but has not written yet: the table says nothing, the
      // decision does — the aggregate stays blocked until the row is written and read again.
      blocked.blockDecided('Held', 'x');
      await sweeper.sweepOnce();
      expect(blocked.has('Held', 'x')).toBe(true);
      const [x1] = await insertEvents(h.pool, [ev('Held', 'x', 0)]);
      await h.query(
        `UPDATE outbox SET status = 'failed', attempts = 1, next_attempt_at = now() + interval '1 hour' WHERE id = $1`,
        [x1],
      );
      blocked.written('Held', 'x');
      await sweeper.sweepOnce();
      expect(blocked.has('Held', 'x'), 'its failed row now holds it').toBe(true);
      expect(published).toEqual([]);
    } finally {
      await h.close();
    }
  });
});
