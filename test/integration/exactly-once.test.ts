import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeProgress } from '../../src/sinks/kafka-progress.ts';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  deliveryReport,
  type EventRow,
  insertEvents,
  migrateDb,
  orderViolations,
  type RelayProcess,
  spawnRelay,
} from '../support/relay.ts';

/**
 * --delivery exactly-once on the real broker (docs/exactly-once.md), read back read_committed
 * (kafkajs' consumer default): every event exactly once through kill -9s, a refused event inside
 * a transaction, and a zombie relay (SIGSTOPped, taken over, resumed) that must commit nothing.
 */
const db = useTestDatabase();
let kafka: KafkaHarness;
const running = new Set<RelayProcess>();

beforeAll(async () => {
  kafka = await startKafka();
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Account', 4);
  await kafka.createTopic('outbox.event.Big', 1, { config: { 'max.message.bytes': '2000' } });
});

afterAll(async () => {
  for (const r of running) r.kill('SIGKILL');
  await kafka?.stop();
});

function eos(extra: string[] = []): RelayProcess {
  const r = spawnRelay(db, kafka, [
    '--delivery',
    'exactly-once',
    '--kafka-progress-topic',
    kafka.topic('progress'),
    '--standby-poll-ms',
    '300',
    ...extra,
  ]);
  running.add(r);
  void r.exited.then(() => running.delete(r));
  return r;
}

function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

/** Writes `events` over `aggregates` keys in transactions of 1–40 rows; the sequence per key in nextSeq. */
async function write(events: number, aggregates: number, nextSeq: number[], seed: number, prefix = 'acct-') {
  const rnd = rng(seed);
  let produced = 0;
  while (produced < events) {
    const size = Math.min(events - produced, 1 + Math.floor(rnd() * 40));
    const rows: EventRow[] = [];
    for (let i = 0; i < size; i++) {
      const a = Math.floor(rnd() * aggregates);
      rows.push({
        aggregateType: 'Account',
        aggregateId: `${prefix}${a}`,
        eventType: 'Posted',
        payload: JSON.stringify({ seq: nextSeq[a]!++ }),
      });
    }
    await insertEvents(db.pool, rows);
    produced += size;
    if (rnd() < 0.3) await new Promise((r) => setTimeout(r, 5));
  }
}

async function settled(): Promise<void> {
  await waitFor(
    async () =>
      (
        await db.query<{ n: string }>(
          `SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'pending'`,
        )
      )[0]!.n === '0',
    { timeoutMs: 120_000, intervalMs: 300, message: 'no row pending' },
  );
}

describe('exactly-once', () => {
  it('delivers every event once through 6 kill -9s mid-stream', async () => {
    const AGG = 40;
    const nextSeq = new Array<number>(AGG).fill(0);
    const writing = write(4000, AGG, nextSeq, 20261126);
    const killRnd = rng(11);
    for (let k = 0; k < 6; k++) {
      const r = eos(['--batch-size', String(20 + Math.floor(killRnd() * 300))]);
      await r.waitForLog(/streaming from the slot/, 60_000);
      await new Promise((res) => setTimeout(res, 300 + Math.floor(killRnd() * 1200)));
      r.kill('SIGKILL');
      expect(await r.exited).toBe('SIGKILL');
    }
    await writing;
    const last = eos();
    await last.waitForLog(/streaming from the slot/, 60_000);
    await settled();
    last.kill('SIGTERM');
    expect(await last.exited).toBe(0);

    const records = await kafka.readAll('outbox.event.Account');
    const { seen, unique, missing, duplicates } = deliveryReport(records, nextSeq, 'acct-');
    console.log(`exactly-once kill -9: 6 kills, 4000 events, ${seen.length} read, ${duplicates} duplicates`);
    expect(missing.slice(0, 10), `${missing.length} lost`).toEqual([]);
    expect(duplicates).toBe(0);
    expect(unique.size).toBe(4000);
    expect(orderViolations(seen).slice(0, 10)).toEqual([]);
    // Kafka holds the slot's progress, committed with the events.
    const progress = (await kafka.readAll('progress')).map((m) => decodeProgress(m.value));
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => p !== null)).toBe(true);
  }, 400_000);
});
