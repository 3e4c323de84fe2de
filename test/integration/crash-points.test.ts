/**
 * Issue 11, "status exact after crashes at every point of the batch cycle", with real parts only:
 * real PostgreSQL, the run's real Kafka broker, and the real relay CLI killed with SIGKILL. No test
 * hook in the relay: it is stopped at each point by a lock the test holds on what its next
 * statement must change.
 *
 * The batch cycle (src/stream/session.ts, #publishLoop → #recordAndSettle → #writeOutcome):
 *   publish (broker ack, or a permanent refusal) → failure outcomes on their rows ('failed', then
 *   'parked' under strict ordering) → one progress statement adds every id of the batch to the
 *   slot's int8multirange record → the slot position is confirmed.
 *
 * The crash points, and how the relay is held at each:
 *   (a) acknowledged, nothing written: the test holds A1's row (FOR UPDATE), so the 'failed' UPDATE
 *       waits;
 *   (b) 'failed' written, 'parked' not (strict): the test holds A2's row, so the 'parked' UPDATE
 *       waits (the 'failed' one, on A1, went through);
 *   (c) failure outcomes written, progress not: the test holds the slot's progress row, so the
 *       progress UPDATE waits (strict and relaxed);
 *   (d) progress written, position not confirmed: as (c), then the relay is frozen (SIGSTOP) and the
 *       lock released, so its progress UPDATE commits while the relay cannot read the result, let
 *       alone confirm.
 * The relay is killed only once pg_stat_activity shows its backend waiting for that lock on that
 * statement. Its backends are then terminated BEFORE the lock is released: PostgreSQL does not
 * notice a dead client during a lock wait, and the orphaned statement would otherwise still run
 * (moving the crash to the next point).
 *
 * One batch: the relay is streaming and frozen (SIGSTOP) while the transaction is inserted and the
 * lock taken, and continued (SIGCONT) once the walsender has sent the whole transaction: it is read,
 * decoded and taken as one batch (a read ending mid-transaction would split it, and each crash point
 * would then be reached with a different record).
 *
 * The transaction, in this order: A1, A2 (aggregate A; its topic does not exist and auto-creation
 * is off: refused for good, UNKNOWN_TOPIC_OR_PARTITION, before any Produce request) and B1, B2
 * (aggregate B, an existing topic: acknowledged). Strict ordering: A1 failed, A2 parked behind it;
 * relaxed: both failed.
 *
 * Each test checks, at the crash point, after the crash, after the restart and after the topic is
 * created: the truthful status of every event (the view, and `outbox-relay status` / `events
 * count`), the row's own column, the progress record, the slot position, what the broker holds
 * (nothing lost, per-key order, failed events not on the broker, duplicates ≤ the batch's
 * acknowledged events), and that the sweeper publishes the failed events once the topic exists.
 *
 * What each test catches — each mutation was applied to a private copy of session.ts and this file
 * run against it (all five tests pass on the real relay):
 *   - the progress statement before the failure outcomes: all five fail at the crash point — the
 *     record covers A1, A2 while their rows still say 'pending', so the view says 'published' for
 *     events the broker refused ((a), (b), (d)), or A1 is not 'failed' while the progress statement
 *     waits ((c)). Without the crash-point checks, `outbox-relay status` after the crash says
 *     'published' too, and after the restart the stream skips the recorded ids: A1, A2 are never
 *     failed nor retried, 'published' for ever without being on the broker (the wait times out);
 *   - 'parked' written before 'failed': (b) fails (A1 not 'failed' while the 'parked' UPDATE waits);
 *   - the position confirmed before the outcomes are durable: all five fail (slot confirmed past the
 *     transaction at the crash point; after a restart nothing would be re-streamed or written);
 *   - a restarted stream that publishes again what the record covers: (d) fails (2 duplicates, 0 allowed).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KafkaHarness, startKafka } from '../support/kafka.ts';
import { createTestDatabase, type TestDatabase, waitFor } from '../support/postgres.ts';
import {
  insertEvents,
  migrateDb,
  orderViolations,
  type RelayProcess,
  slotOf,
  spawnCli,
  spawnRelay,
} from '../support/relay.ts';

let kafka: KafkaHarness;
const running = new Set<RelayProcess>();
/** Duplicates per crash point, printed at the end. */
const duplicates: string[] = [];

beforeAll(async () => {
  kafka = await startKafka();
});

afterAll(async () => {
  for (const r of running) r.kill('SIGKILL');
  if (duplicates.length > 0) console.log(`crash points, duplicates on the broker: ${duplicates.join('; ')}`);
  await kafka?.stop();
});

type Ordering = 'strict' | 'relaxed';
type Statement = 'failed' | 'parked' | 'progress';

/** The relay statement of each step, as pg_stat_activity shows it (lifecycle/outbox-store.ts, progress.ts). */
const STATEMENT: Record<Statement, RegExp> = {
  failed: /^UPDATE "public"\."outbox" AS o\s+SET status = 'failed'/,
  parked: /^UPDATE "public"\."outbox" SET status = 'parked'/,
  progress: /^UPDATE "public"\."outbox_relay_progress" SET published = published \+/,
};

interface CrashPoint {
  /** Names the test's database and topics. */
  tag: string;
  ordering: Ordering;
  /** What the test holds FOR UPDATE: an event's row, or the slot's progress row. */
  hold: 'A1' | 'A2' | 'progress';
  /** The relay's statement that must be waiting for that lock when it is killed. */
  waiting: Statement;
  /**
   * The refused events' topic is created before the restart: the restarted stream must not send
   * the rows whose failure is written (the sweeper owns them), or they are published twice.
   */
  topicBeforeRestart?: boolean;
  /** (d): let the held statement commit while the relay is frozen, then kill it. */
  commitWhileFrozen?: boolean;
  /** Truthful statuses of A1, A2, B1, B2 at the crash point (the view). */
  atCrash: string;
  /** The rows' own status column at the crash point. */
  rowsAtCrash: string;
  /** Whether the progress record covers the transaction's ids at the crash point (else it is empty). */
  recordedAtCrash: boolean;
  /** Most duplicates the restart may cause: the batch's events the broker acknowledged before the crash. */
  maxDuplicates: number;
}

/** After the restart, before the missing topic exists. */
const SETTLED: Record<Ordering, string> = {
  strict: 'failed,parked,published,published',
  relaxed: 'failed,failed,published,published',
};

const RELAY_ARGS = (ordering: Ordering) => [
  '--ordering',
  ordering,
  '--max-attempts',
  '0',
  '--failure-backoff-ms',
  '1000',
  '--failure-backoff-max-ms',
  '1000',
  '--sweep-interval-ms',
  '100',
  '--status-interval-ms',
  '300',
];

async function crashAt(p: CrashPoint): Promise<void> {
  const db = await createTestDatabase({ name: `crash_${p.tag}` });
  const holder = new pg.Client({ connectionString: db.url });
  const gone = `Gone${p.tag}`;
  const ok = `Ok${p.tag}`;
  let relay: RelayProcess | null = null;
  const start = async () => {
    relay = spawnRelay(db, kafka, RELAY_ARGS(p.ordering));
    running.add(relay);
    await relay.waitForLog(/streaming from the slot/, 30_000);
    return relay;
  };
  try {
    await migrateDb(db);
    await kafka.createTopic(`outbox.event.${ok}`, 1);
    await holder.connect();

    const first = await start();
    // The walsender has taken the slot: what is committed from now on goes into the relay's socket.
    await waitFor(async () => (await slotActive(db)) === true, { message: 'slot active' });
    first.kill('SIGSTOP');
    const ids = await insertEvents(db.pool, [
      ev(gone, 'a', 0),
      ev(gone, 'a', 1),
      ev(ok, 'b', 0),
      ev(ok, 'b', 1),
    ]);
    const afterInsert = (await db.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l'))[0]!
      .l;
    await holder.query('BEGIN');
    if (p.hold === 'progress')
      await holder.query('SELECT 1 FROM outbox_relay_progress WHERE slot_name = $1 FOR UPDATE', [slotOf(db)]);
    else await holder.query('SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE', [ids[p.hold === 'A1' ? 0 : 1]]);
    // The walsender has decoded the commit, so the whole transaction is in the frozen relay's socket
    // (its sent_lsn passes the commit only once the transaction's messages are written).
    await waitFor(async () => await sentPast(db, afterInsert), { message: 'the transaction sent' });
    first.kill('SIGCONT');

    await waitFor(async () => (await waitingStatements(db)).some((q) => STATEMENT[p.waiting].test(q)), {
      timeoutMs: 20_000,
      message: async () =>
        `the relay's '${p.waiting}' statement waiting for the test's lock; relay backends: ${JSON.stringify(await relayBackends(db))}`,
    });
    // Only that statement waits (the sweeper's compaction may wait on the progress row too: not a relay outcome).
    expect(
      (await waitingStatements(db)).filter((q) => Object.values(STATEMENT).some((s) => s.test(q))),
    ).toEqual([expect.stringMatching(STATEMENT[p.waiting])]);
    // Every outcome statement comes after the broker's answer: B1, B2 are acknowledged already.
    expect(await seqs(ok, 'b')).toEqual([0, 1]);
    expect(await kafka.readAll(`outbox.event.${gone}`)).toEqual([]);

    if (p.commitWhileFrozen) {
      first.kill('SIGSTOP');
      await holder.query('ROLLBACK');
      await waitFor(async () => await covers(db, ids), {
        message: async () =>
          `the progress statement committed (record ${await progress(db)}, ids ${ids}; relay backends: ${JSON.stringify(await relayBackends(db))})`,
      });
    }

    const atCrash = async (when: string) => {
      expect(await statuses(db, ids), `truthful statuses ${when}`).toBe(p.atCrash);
      expect(await rowStatuses(db, ids), `the rows' own column ${when}`).toBe(p.rowsAtCrash);
      expect(await progress(db), `the progress record ${when}`).toBe(
        p.recordedAtCrash ? recordOf(ids) : '{}',
      );
      expect(await confirmedBefore(db, afterInsert), `slot not confirmed past the transaction ${when}`).toBe(
        true,
      );
    };
    await atCrash('at the crash point');

    first.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    running.delete(first);
    await terminateRelayBackends(db);
    if (!p.commitWhileFrozen) await holder.query('ROLLBACK');
    // The dead relay's statement did not run after all; the operator's view agrees.
    await atCrash('after the crash');
    const crashed = await ops(db, ['status']);
    expect(crashed.json.counts, 'outbox-relay status after the crash').toEqual(countsOf(p.atCrash));

    if (p.topicBeforeRestart) await kafka.createTopic(`outbox.event.${gone}`, 1);
    const second = await start();
    if (!p.topicBeforeRestart) {
      await waitFor(
        async () =>
          (await statuses(db, ids)) === SETTLED[p.ordering] && !(await confirmedBefore(db, afterInsert)),
        {
          timeoutMs: 20_000,
          message: async () =>
            `settled after the restart and confirmed past the transaction (statuses ${await statuses(db, ids)}, confirmed before it: ${await confirmedBefore(db, afterInsert)})`,
        },
      );
      // The stream records what it settled; rows whose failure was already on them at the crash are
      // skipped by the restarted stream (the sweeper's; compaction covers them later).
      const rows = p.rowsAtCrash.split(',');
      expect(await progress(db), 'every id the restarted stream settled recorded').toBe(
        recordOf(p.recordedAtCrash ? ids : ids.filter((_, i) => rows[i] === 'pending')),
      );
      const [status, failedCount] = await Promise.all([
        ops(db, ['status']),
        ops(db, ['events', 'count', '--status', 'failed']),
      ]);
      expect(status.json.counts, 'outbox-relay status after the restart').toEqual(
        countsOf(SETTLED[p.ordering]),
      );
      expect(failedCount.json.count, 'outbox-relay events count --status failed').toBe(
        SETTLED[p.ordering].split(',').filter((s) => s === 'failed').length,
      );
      // Failed and parked events are not published (not even re-streamed ones), and not pending for ever:
      // the sweeper retries them once the topic exists.
      expect(await kafka.readAll(`outbox.event.${gone}`)).toEqual([]);
      await kafka.createTopic(`outbox.event.${gone}`, 1);
    }
    await waitFor(async () => (await statuses(db, ids)) === 'published,published,published,published', {
      timeoutMs: 20_000,
      message: async () => `everything published once the topic exists (is ${await statuses(db, ids)})`,
    });

    if (p.topicBeforeRestart)
      await waitFor(async () => !(await confirmedBefore(db, afterInsert)), {
        timeoutMs: 20_000,
        message: 'the slot confirmed past the transaction after the restart',
      });
    // A1, A2 by the sweeper (their rows say so); B1, B2 by the stream (the record says so).
    expect(await rowStatuses(db, ids)).toBe('published,published,pending,pending');

    // The broker: nothing lost, per-key order kept, duplicates only of the acknowledged events.
    const okRecords = await kafka.readAll(`outbox.event.${ok}`);
    const seenB = okRecords.map((m) => ({
      key: m.key!.toString(),
      seq: JSON.parse(m.value!.toString()).seq as number,
    }));
    expect(new Set(seenB.map((s) => `${s.key}#${s.seq}`))).toEqual(new Set(['b#0', 'b#1']));
    expect(orderViolations(seenB)).toEqual([]);
    const goneSeqs = await seqs(gone, 'a');
    // Published by the sweeper, once each; in order under strict ordering.
    if (p.ordering === 'strict') expect(goneSeqs).toEqual([0, 1]);
    else expect([...goneSeqs].sort((x, y) => x - y)).toEqual([0, 1]);
    const dups = okRecords.length - 2;
    duplicates.push(`(${p.tag}) ${dups}`);
    expect(dups).toBeLessThanOrEqual(p.maxDuplicates);
    second.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    running.delete(second);
  } finally {
    if (relay) (relay as RelayProcess).kill('SIGKILL');
    await holder.end().catch(() => {});
    await db.close();
  }
}

describe('status exact after a crash at every point of the batch cycle', () => {
  it('(a) after the broker acknowledged, before any outcome is written', async () => {
    // A progress-first relay records A1, A2 here: they would read 'published' (refused by the broker).
    await crashAt({
      tag: 'A',
      ordering: 'relaxed',
      hold: 'A1',
      waiting: 'failed',
      atCrash: 'pending,pending,pending,pending',
      rowsAtCrash: 'pending,pending,pending,pending',
      recordedAtCrash: false,
      maxDuplicates: 2,
    });
  });

  it("(b) strict: after the 'failed' row, before the 'parked' rows", async () => {
    // A progress-first relay records A2 here: 'published' while parked-to-be. Parked-before-failed:
    // A1 would not be 'failed' yet.
    await crashAt({
      tag: 'B',
      ordering: 'strict',
      hold: 'A2',
      waiting: 'parked',
      atCrash: 'failed,pending,pending,pending',
      rowsAtCrash: 'failed,pending,pending,pending',
      recordedAtCrash: false,
      maxDuplicates: 2,
    });
  });

  for (const ordering of ['strict', 'relaxed'] as const) {
    it(`(c) ${ordering}: after the failure outcomes, before the progress statement`, async () => {
      // A progress-first relay waits here with no failure written (A1 'pending').
      const settled = SETTLED[ordering].split(',').slice(0, 2).join(',');
      await crashAt({
        tag: `C${ordering[0]}`,
        ordering,
        hold: 'progress',
        waiting: 'progress',
        atCrash: `${settled},pending,pending`,
        rowsAtCrash: `${settled},pending,pending`,
        recordedAtCrash: false,
        maxDuplicates: 2,
      });
    });
  }

  it("(c') relaxed: after the failure outcomes, before the progress statement; the topic is fixed before the restart", async () => {
    // The restarted stream sees A1, A2 again with their rows 'failed' and the topic now there: a
    // stream that sent them would publish each twice (once itself, once by the sweeper that owns them).
    await crashAt({
      tag: 'E',
      ordering: 'relaxed',
      hold: 'progress',
      waiting: 'progress',
      topicBeforeRestart: true,
      atCrash: 'failed,failed,pending,pending',
      rowsAtCrash: 'failed,failed,pending,pending',
      recordedAtCrash: false,
      maxDuplicates: 2,
    });
  });

  it('(d) strict: after the progress statement, before the position is confirmed', async () => {
    // Recorded: the restarted stream skips the whole batch (no duplicate); the failed and parked rows
    // keep their status (the row wins over the record). A progress-first relay shows A1, A2 'published'.
    await crashAt({
      tag: 'D',
      ordering: 'strict',
      hold: 'progress',
      waiting: 'progress',
      commitWhileFrozen: true,
      atCrash: 'failed,parked,published,published',
      rowsAtCrash: 'failed,parked,pending,pending',
      recordedAtCrash: true,
      maxDuplicates: 0,
    });
  });
});

const ev = (type: string, key: string, seq: number) => ({
  aggregateType: type,
  aggregateId: key,
  eventType: 'E',
  payload: JSON.stringify({ seq }),
});

async function seqs(type: string, key: string): Promise<number[]> {
  return (await kafka.readAll(`outbox.event.${type}`))
    .filter((m) => m.key?.toString() === key)
    .map((m) => JSON.parse(m.value!.toString()).seq as number);
}

/** Truthful statuses (the view), in id order, comma-separated. */
async function statuses(db: TestDatabase, ids: string[]): Promise<string> {
  const r = await db.query<{ status: string }>(
    'SELECT status FROM outbox_with_status o WHERE o.id = ANY($1::bigint[]) ORDER BY o.id',
    [ids],
  );
  return r.map((x) => x.status).join();
}

async function rowStatuses(db: TestDatabase, ids: string[]): Promise<string> {
  const r = await db.query<{ status: string }>(
    'SELECT status FROM outbox WHERE id = ANY($1::bigint[]) ORDER BY id',
    [ids],
  );
  return r.map((x) => x.status).join();
}

/** { status: count } over the four events, as `outbox-relay status` counts them (absent when 0). */
function countsOf(list: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of list.split(',')) out[s] = (out[s] ?? 0) + 1;
  return out;
}

async function progress(db: TestDatabase): Promise<string> {
  return (
    await db.query<{ p: string }>(
      'SELECT published::text AS p FROM outbox_relay_progress WHERE slot_name = $1',
      [slotOf(db)],
    )
  )[0]!.p;
}

/** The record of exactly these (consecutive) ids. */
function recordOf(ids: string[]): string {
  return `{[${ids[0]},${BigInt(ids.at(-1)!) + 1n})}`;
}

async function covers(db: TestDatabase, ids: string[]): Promise<boolean> {
  return (await progress(db)) === recordOf(ids);
}

async function slotActive(db: TestDatabase): Promise<boolean | undefined> {
  return (
    await db.query<{ active: boolean }>('SELECT active FROM pg_replication_slots WHERE slot_name = $1', [
      slotOf(db),
    ])
  )[0]?.active;
}

/** Whether the slot's walsender has sent everything before `lsn` (decoded and written to the socket). */
async function sentPast(db: TestDatabase, lsn: string): Promise<boolean> {
  const r = await db.query<{ past: boolean }>(
    `SELECT w.sent_lsn >= $2::pg_lsn AS past
       FROM pg_replication_slots s JOIN pg_stat_replication w ON w.pid = s.active_pid
      WHERE s.slot_name = $1`,
    [slotOf(db), lsn],
  );
  return r[0]?.past === true;
}

/** Whether the slot's confirmed position is still before `lsn` (the transaction would be sent again). */
async function confirmedBefore(db: TestDatabase, lsn: string): Promise<boolean> {
  return (
    await db.query<{ before: boolean }>(
      'SELECT confirmed_flush_lsn < $2::pg_lsn AS before FROM pg_replication_slots WHERE slot_name = $1',
      [slotOf(db), lsn],
    )
  )[0]!.before;
}

const RELAY_BACKENDS = `datname = current_database() AND application_name LIKE 'pg-outbox-relay%'`;

async function relayBackends(db: TestDatabase) {
  return db.query<{ pid: number; state: string; wait_event_type: string | null; query: string }>(
    `SELECT pid, state, wait_event_type, left(query, 120) AS query FROM pg_stat_activity WHERE ${RELAY_BACKENDS}`,
  );
}

/** The queries of the relay's backends that wait for a lock. */
async function waitingStatements(db: TestDatabase): Promise<string[]> {
  return (await relayBackends(db)).filter((b) => b.wait_event_type === 'Lock').map((b) => b.query);
}

/** The killed relay's backends end too (a crash of the whole path): its waiting statement never runs. */
async function terminateRelayBackends(db: TestDatabase): Promise<void> {
  await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${RELAY_BACKENDS}`);
  await waitFor(async () => (await relayBackends(db)).length === 0, {
    message: async () => `the dead relay's backends gone: ${JSON.stringify(await relayBackends(db))}`,
  });
}

/** `outbox-relay <args> --json` against the test's database and slot (exits non-zero while unhealthy). */
async function ops(db: TestDatabase, args: string[]) {
  const p = spawnCli([...args, '--json', '--database-url', db.url, '--slot', slotOf(db)]);
  await p.exited;
  try {
    return { json: JSON.parse(p.stdout()) as { counts: Record<string, number>; count: number } };
  } catch {
    throw new Error(`outbox-relay ${args.join(' ')}: not one JSON object:\n${p.stdout()}\n${p.logs()}`);
  }
}
