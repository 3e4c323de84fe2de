/**
 * Issue 20: one home for a batch's outcome (src/outcome/), used by the stream, lost-slot
 * recovery and the sweeper. Against real PostgreSQL and a real Kafka broker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlockedAggregates } from '../../src/lifecycle/blocked-aggregates.ts';
import { OutboxStore } from '../../src/lifecycle/outbox-store.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import { RelayMetrics } from '../../src/observability/metrics.ts';
import { OutageLog } from '../../src/retry/outage-log.ts';
import { KafkaSink } from '../../src/sinks/kafka/kafka-sink.ts';
import { publishUnrecorded } from '../../src/supervisor/slot-recovery.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase } from '../support/postgres.ts';
import { insertEvents, migrateDb, testConfig } from '../support/relay.ts';

const db = useTestDatabase();
let kafka: KafkaHarness;
let sink: KafkaSink | null = null;

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Rec', 1);
});

afterAll(async () => {
  await sink?.stop();
  await kafka?.stop();
});

describe('lost-slot recovery records outcomes as the stream does', () => {
  it('a row PostgreSQL cannot record failed (54000) is recorded discarded, not retried forever; the rows around it are published and counted', async () => {
    const config = testConfig(db, [], kafka);
    const log = silentLogger();
    sink = new KafkaSink(config, log);
    await sink.start();
    const metrics = new RelayMetrics();
    const ids = await insertEvents(db.pool, [
      { aggregateType: 'Rec', aggregateId: 'k', eventType: 'E', payload: '{"seq":0}' },
      // Over the relay's 2048-byte limit (ROW_INVALID, permanent), and too long for PostgreSQL's
      // index of failed/dead/parked rows: recordFailed meets 54000 (program_limit_exceeded).
      { aggregateType: 'Rec', aggregateId: 'x'.repeat(2 * 1024 * 1024), eventType: 'E', payload: '{}' },
      { aggregateType: 'Rec', aggregateId: 'k', eventType: 'E', payload: '{"seq":1}' },
    ]);
    // Before the fix, slot recovery retried 54000 forever: only this bound ended it (null).
    const result = await publishUnrecorded(
      {
        config,
        sink,
        store: new OutboxStore(db.pool, 'public', 'outbox'),
        blocked: new BlockedAggregates(),
        log,
        metrics,
        outages: new OutageLog(log),
        delivery: { retryHeaders: {} },
      },
      AbortSignal.timeout(30_000),
    );
    expect(result).toMatchObject({ published: 2, failed: 1, parked: 0 });
    const rows = await db.query<{ id: string; status: string; last_error: string | null }>(
      'SELECT o.id::text AS id, status, left(last_error, 300) AS last_error FROM outbox_with_status o ORDER BY o.id',
    );
    expect(rows.map((r) => [r.id, r.status])).toEqual([
      [ids[0], 'published'],
      [ids[1], 'discarded'],
      [ids[2], 'published'],
    ]);
    expect(rows[1]!.last_error).toMatch(/ROW_INVALID: aggregate_id/);
    const seqs = (await kafka.readAll('outbox.event.Rec')).map((m) => JSON.parse(m.value!.toString()).seq);
    expect(seqs).toEqual([0, 1]);
    // Counted where every path counts (outcome/count.ts).
    const published = (await metrics.eventsPublished.get()).values;
    expect(published.map((v) => [v.labels.topic, v.value])).toEqual([[kafka.topic('outbox.event.Rec'), 2]]);
    expect((await metrics.failures.eventsFailed.get()).values[0]).toMatchObject({
      labels: { reason: 'ROW_INVALID' },
      value: 1,
    });
  }, 60_000);
});
