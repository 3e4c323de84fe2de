import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DedicatedKafka, startDedicatedKafka } from '../support/kafka.ts';
import { useTestDatabase, waitFor } from '../support/postgres.ts';
import {
  deliveryReport,
  insertEvents,
  migrateDb,
  orderViolations,
  type RelayProcess,
  spawnRelay,
} from '../support/relay.ts';

/**
 * The acknowledgement rule under kill -9: a stream of ≥ 20,000 events over ≥ 100 aggregates
 * while the relay process is SIGKILLed 20 times at random moments. Every event must arrive
 * (duplicates allowed, counted) and no event may overtake an earlier one of its key.
 */
const EVENTS = 20_000;
const AGGREGATES = 120;
const KILLS = 20;

const db = useTestDatabase();
let kafka: DedicatedKafka;
let current: RelayProcess | null = null;

beforeAll(async () => {
  kafka = await startDedicatedKafka({ proxy: true });
  await migrateDb(db);
  await kafka.createTopic('outbox.event.Account', 4);
});

afterAll(async () => {
  current?.kill('SIGKILL');
  await kafka?.stop();
});

// Deterministic pseudo-random so a failure can be replayed.
function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

describe('crash safety', () => {
  it(`loses nothing and keeps per-key order across ${KILLS} SIGKILLs during ${EVENTS} events`, async () => {
    const rnd = rng(20261122);
    const nextSeq = new Array<number>(AGGREGATES).fill(0);
    let produced = 0;
    const producer = (async () => {
      while (produced < EVENTS) {
        const size = Math.min(EVENTS - produced, 1 + Math.floor(rnd() * 60));
        const rows = [];
        for (let i = 0; i < size; i++) {
          const a = Math.floor(rnd() * AGGREGATES);
          rows.push({
            aggregateType: 'Account',
            aggregateId: `acct-${a}`,
            eventType: 'Posted',
            payload: JSON.stringify({ seq: nextSeq[a]!++ }),
          });
        }
        await insertEvents(db.pool, rows);
        produced += size;
        if (rnd() < 0.3) await new Promise((r) => setTimeout(r, 5));
      }
    })();

    // A slow broker keeps a backlog of received-but-unacknowledged transactions in the relay at
    // every kill: confirming any of them early would lose them (the mutation this test must catch).
    kafka.proxies[0]!.setLatency(40);
    const killRnd = rng(7);
    let exits = 0;
    for (let k = 0; k < KILLS; k++) {
      current = spawnRelay(db, kafka, ['--batch-size', String(50 + Math.floor(killRnd() * 500))]);
      await current.waitForLog(/streaming from the slot/, 30_000);
      await new Promise((r) => setTimeout(r, 150 + Math.floor(killRnd() * 900)));
      current.kill('SIGKILL');
      expect(await current.exited).toBe('SIGKILL');
      exits++;
    }
    await producer;
    kafka.proxies[0]!.setLatency(0);
    current = spawnRelay(db, kafka);
    await current.waitForLog(/streaming from the slot/, 30_000);
    let delivered = 0;
    await waitFor(async () => (delivered = (await kafka.readAll('outbox.event.Account')).length) >= EVENTS, {
      // Bounded by progress: the drain's length scales with the machine's load.
      timeoutMs: 60_000,
      progress: () => delivered,
      capMs: 300_000,
      intervalMs: 500,
      message: () => `all ${EVENTS} events delivered (have ${delivered})`,
    });
    await waitFor(
      async () =>
        (
          await db.query<{ n: string }>(
            `SELECT count(*)::text AS n FROM outbox_with_status WHERE status <> 'published'`,
          )
        )[0]!.n === '0',
      { timeoutMs: 60_000, message: 'every row marked published' },
    );
    current.kill('SIGTERM');
    expect(await current.exited).toBe(0);
    current = null;

    const records = await kafka.readAll('outbox.event.Account');
    const { seen, unique, missing, duplicates } = deliveryReport(records, nextSeq, 'acct-');
    console.log(
      `crash test: ${exits} SIGKILLs, ${EVENTS} events, ${seen.length} deliveries, ${duplicates} duplicates (${((duplicates / EVENTS) * 100).toFixed(1)} %)`,
    );
    expect(missing.slice(0, 10), `${missing.length} events lost`).toEqual([]);
    expect(unique.size).toBe(EVENTS);
    // Kafka keeps a partition's order; keys map to partitions, so per-key order is the order read back.
    expect(orderViolations(seen).slice(0, 10)).toEqual([]);
  });
});
