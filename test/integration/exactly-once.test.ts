import { spawnSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeProgress } from '../../src/sinks/kafka-progress.ts';
import { type DedicatedKafka, type KafkaHarness, startDedicatedKafka, startKafka } from '../support/kafka.ts';
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
 * --delivery exactly-once on the real broker (docs/delivery.md), read back read_committed
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

// A failed test must not leave its relay holding the slot for the next one.
afterEach(async () => {
  const left = [...running];
  for (const r of left) r.kill('SIGKILL');
  await Promise.all(left.map((r) => r.exited));
});

afterAll(async () => {
  await kafka?.stop();
});

/** EOS_TEST_DELIVERY=at-least-once runs the same faults without transactions (the duplicates they remove). */
const DELIVERY = process.env.EOS_TEST_DELIVERY ?? 'exactly-once';

function eos(extra: string[] = [], target: KafkaHarness = kafka): RelayProcess {
  const r = spawnRelay(db, target, [
    '--delivery',
    DELIVERY,
    '--kafka-progress-topic',
    target.topic('progress'),
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
    await new Promise((r) => setTimeout(r, 20 + Math.floor(rnd() * 40)));
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
    // librdkafka's consumer (kcat) agrees, read_committed (read_uncommitted would also show the
    // records of any transaction a kill left to be aborted: logged, not asserted).
    const kcat = (isolation: string): string[] | null => {
      const r = spawnSync(
        'kcat',
        [
          ...['-C', '-b', kafka.brokers.join(','), '-t', kafka.topic('outbox.event.Account')],
          ...['-X', `isolation.level=${isolation}`, '-o', 'beginning', '-e', '-q', '-f', '%k %s\\n'],
        ],
        { encoding: 'utf8', timeout: 120_000 },
      );
      if (r.error) return null; // no kcat here
      return r.stdout.split('\n').filter((l) => l.startsWith('acct-'));
    };
    const committed = kcat('read_committed');
    if (committed) {
      expect(committed.length).toBe(4000);
      expect(new Set(committed).size).toBe(4000);
      console.log(
        `kcat: read_committed ${committed.length}, read_uncommitted ${kcat('read_uncommitted')?.length}`,
      );
    }
    // Kafka holds the slot's progress, committed with the events.
    const progress = (await kafka.readAll('progress')).map((m) => decodeProgress(m.value));
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => p !== null)).toBe(true);
  }, 400_000);

  it('records a refused event inside a transaction as failed and delivers its neighbours once', async () => {
    const r = eos(['--max-attempts', '1']);
    await r.waitForLog(/streaming from the slot/, 60_000);
    const small = (i: number): EventRow => ({
      aggregateType: 'Big',
      aggregateId: `small-${i}`,
      eventType: 'Posted',
      payload: JSON.stringify({ seq: 0, pad: 'x'.repeat(100) }),
    });
    // One PostgreSQL transaction, one relay batch, one Kafka transaction: the oversized event in
    // the middle makes the broker refuse its partition's record batch.
    const rows = [...Array.from({ length: 20 }, (_, i) => small(i))];
    rows.splice(10, 0, {
      aggregateType: 'Big',
      aggregateId: 'huge',
      eventType: 'Posted',
      payload: JSON.stringify({ seq: 0, pad: 'y'.repeat(5000) }),
    });
    const ids = await insertEvents(db.pool, rows);
    await insertEvents(db.pool, [small(100)]);
    await settled();
    const huge = ids[10]!;
    const [row] = await db.query<{ status: string; last_error: string | null }>(
      'SELECT status, last_error FROM outbox_with_status WHERE id = $1',
      [huge],
    );
    expect(['failed', 'dead']).toContain(row!.status);
    expect(row!.last_error).toMatch(/MESSAGE_TOO_LARGE/);
    r.kill('SIGTERM');
    expect(await r.exited).toBe(0);
    const records = await kafka.readAll('outbox.event.Big');
    const keys = records.map((m) => m.key!.toString()).sort();
    const expected = [...Array.from({ length: 20 }, (_, i) => `small-${i}`), 'small-100'].sort();
    expect(keys).toEqual(expected);
  }, 200_000);
  it('survives the deletion of its progress topic: recreated, nothing lost, the fallback logged', async () => {
    const AGG = 10;
    const nextSeq = new Array<number>(AGG).fill(0);
    const r = eos();
    await r.waitForLog(/streaming from the slot/, 60_000);
    await write(200, AGG, nextSeq, 5, 'p-');
    await settled();
    const admin = await kafka.admin();
    await admin.deleteTopics({ topics: [kafka.topic('progress')], timeout: 30_000 });
    await write(200, AGG, nextSeq, 6, 'p-');
    await settled();
    await r.waitForLog(/progress topic was deleted/, 60_000);
    r.kill('SIGTERM');
    expect(await r.exited).toBe(0);
    // A restart reads the recreated topic's record (or none: then PostgreSQL's record, logged).
    const again = eos();
    await again.waitForLog(/streaming from the slot/, 60_000);
    await write(100, AGG, nextSeq, 7, 'p-');
    await settled();
    again.kill('SIGTERM');
    expect(await again.exited).toBe(0);
    const records = (await kafka.readAll('outbox.event.Account')).filter((m) =>
      m.key!.toString().startsWith('p-'),
    );
    const { unique, missing, duplicates } = deliveryReport(records, nextSeq, 'p-');
    expect(missing.slice(0, 10)).toEqual([]);
    expect(duplicates).toBe(0);
    expect(unique.size).toBe(500);
  }, 300_000);
});

describe('exactly-once on a broker of its own (faults)', () => {
  let ded: DedicatedKafka;
  beforeAll(async () => {
    ded = await startDedicatedKafka({ proxy: true });
    await ded.createTopic('outbox.event.Account', 3);
  }, 180_000);
  afterAll(async () => {
    await ded?.stop();
  });

  it('delivers every event once when the only broker is killed and restarted mid-stream', async () => {
    const AGG = 30;
    const nextSeq = new Array<number>(AGG).fill(0);
    const r = eos([], ded);
    await r.waitForLog(/streaming from the slot/, 60_000);
    const writing = write(3000, AGG, nextSeq, 77, 'b-');
    await new Promise((res) => setTimeout(res, 3000));
    await ded.cluster.kill(1);
    await new Promise((res) => setTimeout(res, 2000));
    await ded.cluster.start(1);
    await writing;
    await settled();
    r.kill('SIGTERM');
    expect(await r.exited).toBe(0);
    const records = await ded.readAll('outbox.event.Account');
    const { seen, unique, missing, duplicates } = deliveryReport(records, nextSeq, 'b-');
    console.log(`exactly-once broker restart: ${seen.length} read, ${duplicates} duplicates`);
    expect(missing.slice(0, 10)).toEqual([]);
    expect(duplicates).toBe(0);
    expect(unique.size).toBe(3000);
    expect(orderViolations(seen).slice(0, 10)).toEqual([]);
  }, 400_000);

  it('fences a zombie: a SIGSTOPped relay whose lock and slot were taken over commits nothing after it resumes', async () => {
    const AGG = 20;
    const nextSeq = new Array<number>(AGG).fill(0);
    const a = eos([], ded);
    await a.waitForLog(/streaming from the slot/, 60_000);
    const instanceOf = (p: RelayProcess) => (/"instance":"([0-9a-f]+)"/.exec(p.logs()) ?? [])[1] ?? '(none)';
    let writing = true;
    const writer = (async () => {
      for (let round = 0; writing; round++) await write(50, AGG, nextSeq, 1000 + round, 'z-');
    })();
    await waitFor(async () => (await ded.readAll('outbox.event.Account')).length > 0, {
      timeoutMs: 120_000,
      message: 'the first relay publishing',
    });
    // A slow broker path: each request takes 0.6 s, so the relay is inside a transaction (produced,
    // not committed) nearly all the time, and is frozen there.
    ded.proxies[0]!.setLatency(600);
    await new Promise((res) => setTimeout(res, 2500));
    a.kill('SIGSTOP');
    ded.proxies[0]!.setLatency(0);
    // The takeover a lost network would cause: the server drops the frozen relay's sessions
    // (its leader lock and its walsender), and a second relay takes lock, slot and transactional id.
    await db.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'pg-outbox-relay%'`,
    );
    const b = eos([], ded);
    await b.waitForLog(/streaming from the slot/, 60_000);
    // The successor has committed a transaction of its own before the zombie resumes.
    await waitFor(
      async () =>
        (await ded.readAll('progress')).some((m) =>
          decodeProgress(m.value)?.token.startsWith(`${instanceOf(b)}:`),
        ),
      { timeoutMs: 120_000, message: "the successor's first commit" },
    );
    a.kill('SIGCONT');
    // The zombie resumes with whatever it had in flight: fenced at its next request, it exits
    // (bounded generously: on a loaded machine a resumed process may wait long for a core).
    const aExit = await Promise.race([
      a.exited,
      new Promise((res) => setTimeout(() => res('running'), 120_000)),
    ]);
    writing = false;
    await writer;
    await settled();
    b.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    if (aExit === 'running') {
      a.kill('SIGTERM');
      await a.exited;
    }
    console.log(
      `zombie: exit ${aExit}; ${a.logs().includes('PRODUCER_FENCED') ? 'fenced' : 'not told it was fenced'}`,
    );
    // Not a single progress record of the zombie after the first one of its successor: the
    // events are in the same transactions.
    const progress = (await ded.readAll('progress'))
      .map((m) => decodeProgress(m.value))
      .filter((p) => p?.id.endsWith(`/${db.name}`));
    const aId = instanceOf(a);
    const bId = instanceOf(b);
    expect(aId).not.toBe(bId);
    const firstB = progress.findIndex((p) => p!.token.startsWith(`${bId}:`));
    expect(firstB).toBeGreaterThanOrEqual(0);
    expect(progress.slice(firstB).filter((p) => p!.token.startsWith(`${aId}:`))).toEqual([]);
    const records = (await ded.readAll('outbox.event.Account')).filter((m) =>
      m.key!.toString().startsWith('z-'),
    );
    const { unique, missing, duplicates } = deliveryReport(records, nextSeq, 'z-');
    expect(missing.slice(0, 10)).toEqual([]);
    expect(duplicates).toBe(0);
    expect(unique.size).toBe(nextSeq.reduce((x, y) => x + y, 0));
    // Frozen inside a transaction, it learns it was fenced at its next request and exits 75.
    expect(aExit).toBe(75);
  }, 300_000);
});
