import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/observability/logger.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import type { Relay } from '../../src/supervisor/relay.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  type EventRow,
  insertEvents,
  migrateDb,
  orderViolations,
  startRelayInProcess,
  testConfig,
} from '../support/relay.ts';

/**
 * A partial refusal on the real broker (issue 10, item 2): one Produce request spans several
 * topics and partitions; the broker stores all of them but one, which it refuses with
 * MESSAGE_TOO_LARGE (the topic's max.message.bytes). kafkajs then rolls back the sequence
 * numbers of every partition of that request, so a resend to a partition the broker did store
 * gets OUT_OF_ORDER_SEQUENCE_NUMBER — for ever, unless the producer is replaced.
 *
 * It must end as: the oversized event failed (recorded with the reason), every other event
 * published and on the broker (duplicates allowed), and later events still flowing.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
let relay: Relay | null = null;

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Small', 3);
  await kafka.createTopic('outbox.event.Big', 1, { config: { 'max.message.bytes': '1000' } });
});

afterEach(async () => {
  await relay?.stop();
  relay = null;
});

afterAll(async () => {
  await kafka?.stop();
});

interface Row {
  id: string;
  status: string;
  last_error: string | null;
}
const rowsOf = (ids: string[]) =>
  db.query<Row>(
    'SELECT o.id::text AS id, status, last_error FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
    [ids],
  );

describe('partial refusal of a multi-topic, multi-partition request', () => {
  it('fails only the refused event; the rest is published (no OUT_OF_ORDER_SEQUENCE_NUMBER wedge)', async () => {
    const config = testConfig(
      db,
      [
        // One batch for the whole transaction: the refusal must come inside a request that stores other partitions.
        '--linger-ms',
        '200',
        '--failure-backoff-ms',
        '60000',
        '--ordering',
        'relaxed',
      ],
      kafka,
    );
    const sink = new KafkaSink(config, silentLogger());
    relay = await startRelayInProcess(config, sink);
    await waitFor(() => relay!.state === 'streaming', { message: 'relay streaming' });

    const small = (k: number, seq: number): EventRow => ({
      aggregateType: 'Small',
      aggregateId: `s${k}`,
      eventType: 'E',
      payload: JSON.stringify({ seq }),
    });
    // Keys spread over the three partitions of Small; the oversized event sits in the middle.
    const first: EventRow[] = [];
    for (let seq = 0; seq < 3; seq++) for (let k = 0; k < 6; k++) first.push(small(k, seq));
    first.splice(9, 0, {
      aggregateType: 'Big',
      aggregateId: 'b-oversized',
      eventType: 'E',
      payload: JSON.stringify({ seq: 0, pad: 'x'.repeat(5000) }),
    });
    const firstIds = await insertEvents(db.pool, first);
    const oversizedId = firstIds[9]!;

    let settled = 0;
    await waitFor(
      async () =>
        (settled = (await rowsOf(firstIds)).filter((r) => r.status !== 'pending').length) === firstIds.length,
      {
        timeoutMs: 60_000,
        progress: () => settled,
        message: async () =>
          `rows still pending: ${JSON.stringify((await rowsOf(firstIds)).filter((r) => r.status === 'pending').map((r) => r.id))}`,
      },
    );
    const rows = await rowsOf(firstIds);
    const oversized = rows.find((r) => r.id === oversizedId)!;
    expect(oversized.status).toBe('failed');
    expect(oversized.last_error).toMatch(/MESSAGE_TOO_LARGE/);
    // The refusal came in a Produce response that stored other partitions: the producer was replaced.
    expect(sink.producerReplacements).toBeGreaterThanOrEqual(1);
    expect(rows.filter((r) => r.id !== oversizedId).map((r) => r.status)).toEqual(
      Array(first.length - 1).fill('published'),
    );

    // Not wedged: a later transaction flows through the same relay.
    const second: EventRow[] = [];
    for (let k = 0; k < 6; k++) second.push(small(k, 3));
    const secondIds = await insertEvents(db.pool, second);
    await waitFor(async () => (await rowsOf(secondIds)).every((r) => r.status === 'published'), {
      timeoutMs: 30_000,
      message: 'later events published',
    });

    // What a separate consumer reads: every Small event (duplicates allowed), per-key order kept.
    const records = await kafka.readAll('outbox.event.Small');
    const seen = records.map((m) => ({
      key: m.key!.toString(),
      seq: JSON.parse(m.value!.toString()).seq as number,
    }));
    const unique = new Set(seen.map((s) => `${s.key}#${s.seq}`));
    for (let k = 0; k < 6; k++)
      for (let seq = 0; seq < 4; seq++) expect(unique.has(`s${k}#${seq}`), `s${k}#${seq}`).toBe(true);
    expect(orderViolations(seen)).toEqual([]);
    expect(await kafka.readAll('outbox.event.Big')).toEqual([]);
  });
});
