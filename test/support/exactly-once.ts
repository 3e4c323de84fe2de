/**
 * Shared by the exactly-once tests (single broker and 3-node cluster): relays spawned with
 * --delivery exactly-once, a zombie's takeover and resume, a seeded writer of keyed events, and
 * the wait for every row to settle.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { ensureKafkaJars, javaBinary, kafkaVersionFromEnv } from '../../src/dev/local-kafka.ts';
import type { KafkaHarness } from './kafka.ts';
import { type TestDatabase, waitFor } from './postgres.ts';
import { type EventRow, insertEvents, type RelayProcess, ROOT, spawnRelay } from './relay.ts';

/** EOS_TEST_DELIVERY=at-least-once runs the same faults without transactions (the duplicates they remove). */
export const DELIVERY = process.env.EOS_TEST_DELIVERY ?? 'exactly-once';

/** Relays of one test file: spawned exactly-once, killed (SIGKILL) together after a test. */
export class EosRelays {
  readonly #db: TestDatabase;
  readonly #running = new Set<RelayProcess>();

  constructor(db: TestDatabase) {
    this.#db = db;
  }

  spawn(target: KafkaHarness, extra: string[] = []): RelayProcess {
    const r = spawnRelay(this.#db, target, [
      '--delivery',
      DELIVERY,
      '--kafka-progress-topic',
      target.topic('progress'),
      '--standby-poll-ms',
      '300',
      ...extra,
    ]);
    this.#running.add(r);
    void r.exited.then(() => this.#running.delete(r));
    return r;
  }

  /** A failed test must not leave its relay holding the slot for the next one. */
  async killAll(): Promise<void> {
    const left = [...this.#running];
    for (const r of left) r.kill('SIGKILL');
    await Promise.all(left.map((r) => r.exited));
  }
}

/** The producer instance a relay logged at start (the first part of its progress tokens). */
export function instanceOf(p: RelayProcess): string {
  return (/"instance":"([0-9a-f]+)"/.exec(p.logs()) ?? [])[1] ?? '(none)';
}

/**
 * The takeover a lost network causes: the server drops the (frozen) relays' sessions — their
 * leader lock and walsender — so that another relay can take lock, slot and transactional id.
 */
export async function dropRelaySessions(db: TestDatabase): Promise<void> {
  await db.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND application_name LIKE 'pg-outbox-relay%'`,
  );
}

/**
 * SIGCONT for a SIGSTOPped relay whose slot and lock were taken over: its exit code (75 when a
 * request of its open transaction tells it it was fenced), 'standby' when it learns of the
 * takeover from its database sessions first (its Kafka requests timed out while it was frozen,
 * so it never sends another: it stands by for the lock, and would read the successor's progress
 * record — and exit 75 — before publishing anything), or 'running' if neither within 120 s
 * (generous: on a loaded machine a resumed process may wait long for a core).
 */
export async function resumeZombie(r: RelayProcess): Promise<number | string> {
  r.kill('SIGCONT');
  return Promise.race([
    r.exited,
    r.waitForLog(/standby: another process is active on the slot/, 120_000).then(
      () => 'standby',
      () => 'running',
    ),
  ]);
}

export function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
}

/**
 * Writes `events` events of `aggregateType` over `aggregates` keys `${prefix}${k}` in
 * transactions of 1–40 rows, 20–60 ms apart; the sequence per key in nextSeq.
 */
export async function writeEvents(
  db: TestDatabase,
  events: number,
  aggregates: number,
  nextSeq: number[],
  seed: number,
  prefix = 'acct-',
  aggregateType = 'Account',
): Promise<void> {
  const rnd = rng(seed);
  let produced = 0;
  while (produced < events) {
    const size = Math.min(events - produced, 1 + Math.floor(rnd() * 40));
    const rows: EventRow[] = [];
    for (let i = 0; i < size; i++) {
      const a = Math.floor(rnd() * aggregates);
      rows.push({
        aggregateType,
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

/**
 * writeEvents in rounds of 50 events (seeds seed, seed + 1, …) until the returned stop(), which
 * resolves once the round under way is written (and rejects with a write's error).
 */
export function keepWriting(
  db: TestDatabase,
  aggregates: number,
  nextSeq: number[],
  seed: number,
  prefix: string,
  aggregateType?: string,
): () => Promise<void> {
  let writing = true;
  // A write's error is stop()'s: a test that failed before stopping it must not leave an
  // unhandled rejection (its database closes under the writer).
  let failed: { error: unknown } | null = null;
  const done = (async () => {
    for (let round = 0; writing; round++)
      await writeEvents(db, 50, aggregates, nextSeq, seed + round, prefix, aggregateType);
  })().catch((error: unknown) => {
    failed = { error };
  });
  return async () => {
    writing = false;
    await done;
    if (failed) throw (failed as { error: unknown }).error;
  };
}

/**
 * Every row settled (none pending): bounded by progress — fails after 120 s in which the pending
 * count did not change (a wedge), not after 120 s in all (a busy machine after a broker restart).
 */
export async function settled(db: TestDatabase): Promise<void> {
  const pending = async () =>
    (
      await db.query<{ n: string }>(
        `SELECT count(*)::text AS n FROM outbox_with_status WHERE status = 'pending'`,
      )
    )[0]!.n;
  await waitFor(async () => (await pending()) === '0', {
    timeoutMs: 120_000,
    intervalMs: 300,
    message: async () => `no row pending (${await pending()} pending)`,
    progress: pending,
    capMs: 600_000,
  });
}

/** Kafka's own admin client (kafka-transactions.sh's describe / abort): test/support/java/Transactions.java. */
export async function kafkaTransactions(args: string[]): Promise<{ status: number | null; out: string }> {
  const libs = await ensureKafkaJars(kafkaVersionFromEnv());
  const r = spawnSync(
    javaBinary(),
    ['-cp', join(libs, '*'), join(ROOT, 'test/support/java/Transactions.java'), ...args],
    { encoding: 'utf8', timeout: 120_000 },
  );
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() };
}

/**
 * Another producer's transaction, opened with one record on `topic` and kept open far longer than
 * a relay's transaction timeout: it stands in for a hanging one (its coordinator no longer knows
 * it). `end()` aborts it (if still open) and disconnects.
 */
export async function openForeignTransaction(
  brokers: string[],
  topic: string,
  idPrefix: string,
): Promise<{ abort(): Promise<void>; end(): Promise<void> }> {
  const producer = new Kafka({ brokers, logLevel: logLevel.NOTHING }).producer({
    transactionalId: `${idPrefix}-${Date.now()}`,
    idempotent: true,
    maxInFlightRequests: 1,
    transactionTimeout: 600_000,
  });
  await producer.connect();
  const open = await producer.transaction();
  await open.send({ topic, messages: [{ key: 'other', value: '0' }] });
  return {
    abort: () => open.abort(),
    end: async () => {
      await open.abort().catch(() => {});
      await producer.disconnect();
    },
  };
}
