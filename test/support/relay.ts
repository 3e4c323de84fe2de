/**
 * Running the relay in tests: as a child process (the real CLI, for kill -9 and signal
 * tests) or in-process (for tests that read its state), plus outbox helpers.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { type Config, loadConfig } from '../../src/config/load.ts';
import { silentLogger } from '../../src/observability/logger.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import { migrate } from '../../src/store/migrate.ts';
import { Relay } from '../../src/supervisor/relay.ts';
import type { KafkaHarness } from './kafka.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLI = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export interface RelayProcess {
  child: ChildProcess;
  /** stderr (JSON logs) so far. */
  logs(): string;
  stdout(): string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<void>;
  kill(signal?: NodeJS.Signals): void;
}

/** Spawns `outbox-relay <command> ...args` with this Node (the project's Node 24). */
export function spawnCli(args: string[], env: Record<string, string> = {}): RelayProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    // Port 0: relays of parallel test files must not collide on the default metrics port.
    env: { ...process.env, LOG_FORMAT: 'json', OUTBOX_HTTP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let out = '';
  const waiters: { pattern: RegExp; resolve: () => void }[] = [];
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const w of [...waiters]) {
      if (w.pattern.test(err)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  });
  child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? signal ?? -1));
  });
  return {
    child,
    logs: () => err,
    stdout: () => out,
    exited,
    kill: (signal = 'SIGTERM') => {
      child.kill(signal);
    },
    waitForLog(pattern, timeoutMs = 30_000) {
      if (pattern.test(err)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(`no log matching ${pattern} within ${timeoutMs} ms; logs:\n${err.slice(-4000)}`),
            ),
          timeoutMs,
        );
        waiters.push({
          pattern,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`relay exited (${code}) before logging ${pattern}; logs:\n${err.slice(-4000)}`));
        });
      });
    },
  };
}

/** Every test relay: its database and slot, and short retry delays so outage tests stay fast. */
function baseArgs(db: { url: string; name: string }): string[] {
  return [
    '--database-url',
    db.url,
    '--slot',
    slotOf(db),
    '--retry-initial-ms',
    '50',
    '--retry-max-ms',
    '500',
    '--kafka-request-timeout-ms',
    '3000',
  ];
}

/**
 * The failure lifecycle at test speed: an event is dead after 2 attempts, retried after 100 –
 * 200 ms, by a sweeper passing every `sweepMs`.
 */
export function fastFailureArgs(sweepMs: number): string[] {
  return [
    '--max-attempts',
    '2',
    '--failure-backoff-ms',
    '100',
    '--failure-backoff-max-ms',
    '200',
    '--sweep-interval-ms',
    String(sweepMs),
  ];
}

/** Slot names are cluster-wide: each test database gets its own (its name is unique). */
export function slotOf(db: { name: string }): string {
  return db.name;
}

/** Where a test relay publishes: a Kafka harness (brokers + its topic namespace) or plain brokers. */
export type KafkaTarget = Pick<KafkaHarness, 'relayArgs'> | string[];

export function kafkaArgs(target: KafkaTarget): string[] {
  return Array.isArray(target) ? ['--kafka-brokers', target.join(',')] : target.relayArgs();
}

/** `run` with a Kafka sink at `kafka`, on the database's own slot. */
export function spawnRelay(
  db: { url: string; name: string },
  kafka: KafkaTarget,
  extra: string[] = [],
): RelayProcess {
  return spawnCli(['run', ...baseArgs(db), ...kafkaArgs(kafka), ...extra]);
}

/** spawnRelay with its HTTP server on an ephemeral loopback port; `get(path)` reads an endpoint. */
export async function spawnRelayWithHttp(
  db: { url: string; name: string },
  kafka: KafkaTarget | 'stdout',
  extra: string[] = [],
) {
  const http = ['--http-port', '0', '--http-host', '127.0.0.1', ...extra];
  const relay =
    kafka === 'stdout'
      ? spawnCli(['run', ...baseArgs(db), '--sink', 'stdout', ...http])
      : spawnRelay(db, kafka, http);
  await relay.waitForLog(/"msg":"http server listening/);
  const line = relay
    .logs()
    .split('\n')
    .find((l) => l.includes('"msg":"http server listening'))!;
  const { port } = JSON.parse(line) as { port: number };
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${port}${path}`);
    const text = await r.text();
    return { status: r.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };
  return { relay, port, get };
}

/** A resolved config for an in-process relay; `argv` as on the command line. */
export function testConfig(
  db: { url: string; name: string },
  argv: string[] = [],
  kafka: KafkaTarget = [],
): Config {
  const args = baseArgs(db);
  if (!Array.isArray(kafka) || kafka.length > 0) args.push(...kafkaArgs(kafka));
  else args.push('--sink', 'stdout');
  return loadConfig('run', [...args, ...argv], {}).config;
}

export async function startRelayInProcess(config: Config, sink: Sink): Promise<Relay> {
  const relay = new Relay({
    config,
    sink,
    log: process.env.RELAY_TEST_LOGS ? (await import('pino')).default() : silentLogger(),
  });
  await relay.start();
  return relay;
}

export async function migrateDb(
  db: { pool: pg.Pool; name: string },
  target: { schema?: string; table?: string; publication?: string } = {},
) {
  const client = await db.pool.connect();
  try {
    await migrate(client, {
      schema: target.schema ?? 'public',
      table: target.table ?? 'outbox',
      publication: target.publication ?? 'outbox_pub',
      slot: slotOf(db),
    });
  } finally {
    client.release();
  }
}

export interface EventRow {
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  payload: Buffer | string | null;
  contentType?: string;
  headers?: Record<string, unknown>;
  traceparent?: string | null;
}

/** Inserts rows in one transaction with one multi-row INSERT; returns their ids. */
export async function insertEvents(
  pool: pg.Pool | pg.PoolClient,
  rows: EventRow[],
  table = 'public.outbox',
): Promise<string[]> {
  if (rows.length === 0) return [];
  const values: unknown[] = [];
  const tuples = rows.map((r, i) => {
    values.push(
      r.aggregateType,
      r.aggregateId,
      r.eventType,
      typeof r.payload === 'string' ? Buffer.from(r.payload) : r.payload,
      r.contentType ?? 'application/json',
      JSON.stringify(r.headers ?? {}),
      r.traceparent ?? null,
    );
    const b = i * 7;
    return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}::jsonb, $${b + 7})`;
  });
  const res = await pool.query<{ id: string }>(
    `INSERT INTO ${table} (aggregate_type, aggregate_id, event_type, payload, content_type, headers, traceparent)
     VALUES ${tuples.join(', ')} RETURNING id`,
    values,
  );
  return res.rows.map((r) => r.id);
}

/**
 * Inserts rows in one transaction and returns, besides their ids, the start LSN of that
 * transaction's commit record (read with pg_walinspect; on PostgreSQL 14, which has none, from
 * pgoutput: commitLsnFromPgoutput). It is the exact bound a slot's confirmed_flush_lsn must not
 * pass while the rows are unpublished: on restart the server skips every transaction whose
 * commit record starts below confirmed_flush_lsn.
 */
export async function insertEventsReportingCommit(
  db: { pool: pg.Pool },
  rows: EventRow[],
): Promise<{ ids: string[]; commitLsn: string }> {
  const version = await db.pool.query<{ n: number }>(
    "SELECT current_setting('server_version_num')::int AS n",
  );
  const walinspect = version.rows[0]!.n >= 150_000;
  if (walinspect) await db.pool.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  else await ensureCommitSlot(db.pool);
  const client = await db.pool.connect();
  let ids: string[];
  let xid: string;
  let from: string;
  try {
    await client.query('BEGIN');
    const x = await client.query<{ xid: string; lsn: string }>(
      'SELECT (pg_current_xact_id()::text::bigint % 4294967296)::text AS xid, pg_current_wal_insert_lsn()::text AS lsn',
    );
    xid = x.rows[0]!.xid;
    from = x.rows[0]!.lsn;
    ids = await insertEvents(client, rows);
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
  // The test clusters run with synchronous_commit=off: pg_walinspect reads only flushed WAL.
  await waitUntilFlushed(db.pool, await currentInsertLsn(db.pool));
  if (!walinspect) return { ids, commitLsn: await commitLsnFromPgoutput(db.pool, xid) };
  const r = await db.pool.query<{ lsn: string }>(
    `SELECT start_lsn::text AS lsn FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn())
      WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%' AND xid::text = $2`,
    [from, xid],
  );
  const lsn = r.rows[0]?.lsn;
  if (!lsn) throw new Error(`commit record of transaction ${xid} not found in the WAL after ${from}`);
  return { ids, commitLsn: lsn };
}

/**
 * PostgreSQL 14 (no pg_walinspect): a slot of the database, `tc_<database>`, with a publication of
 * no table (`test_commits`: pgoutput then sends only each transaction's Begin and Commit). Created
 * before the first transaction it reports on; dropped with the test database.
 */
async function ensureCommitSlot(pool: pg.Pool): Promise<void> {
  await pool.query(
    `DO $$ BEGIN
       IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'test_commits') THEN CREATE PUBLICATION test_commits; END IF;
     END $$`,
  );
  // A statement of its own: a slot cannot be created in a transaction that has written.
  await pool.query(
    `SELECT pg_create_logical_replication_slot(left('tc_' || current_database(), 63), 'pgoutput')
      WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = left('tc_' || current_database(), 63))`,
  );
}

/** pgoutput's Begin message carries final_lsn, the start of the transaction's commit record. */
async function commitLsnFromPgoutput(pool: pg.Pool, xid: string): Promise<string> {
  const r = await pool.query<{ data: Buffer }>(
    `SELECT data FROM pg_logical_slot_get_binary_changes(left('tc_' || current_database(), 63), NULL, NULL,
       'proto_version', '1', 'publication_names', 'test_commits')`,
  );
  // Begin: 'B', final_lsn (Int64), commit timestamp (Int64), xid (Int32).
  const begin = r.rows.find((x) => x.data[0] === 0x42 && String(x.data.readUInt32BE(17)) === xid);
  if (!begin) throw new Error(`transaction ${xid} not found in the slot tc_<database> (pgoutput)`);
  const lsn = begin.data.readBigUInt64BE(1);
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

async function currentInsertLsn(pool: pg.Pool): Promise<string> {
  return (await pool.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0]!.l;
}

async function waitUntilFlushed(pool: pg.Pool, lsn: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const r = await pool.query<{ ok: boolean }>('SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn AS ok', [
      lsn,
    ]);
    if (r.rows[0]!.ok) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error(`WAL not flushed up to ${lsn} within 5 s`);
}

export async function slotPosition(db: { pool: pg.Pool; name: string }) {
  const slot = slotOf(db);
  const r = await db.pool.query<{ confirmed: string; active: boolean; retained: string; current: string }>(
    `SELECT confirmed_flush_lsn::text AS confirmed, active,
            pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS retained,
            pg_current_wal_lsn()::text AS current
       FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  const row = r.rows[0];
  if (!row) throw new Error(`slot ${slot} does not exist`);
  return {
    confirmed: row.confirmed,
    active: row.active,
    retainedBytes: Number(row.retained),
    current: row.current,
  };
}

/**
 * Per-key order check that tolerates at-least-once replays: when seq s of a key is seen,
 * every seq below s of that key must have been seen before. Returns the violations.
 */
export function orderViolations(seen: { key: string; seq: number }[]): string[] {
  const maxSeen = new Map<string, Set<number>>();
  const out: string[] = [];
  for (const { key, seq } of seen) {
    let set = maxSeen.get(key);
    if (!set) maxSeen.set(key, (set = new Set()));
    for (let s = 0; s < seq; s++) {
      if (!set.has(s)) {
        out.push(`key ${key}: seq ${seq} arrived before seq ${s}`);
        break;
      }
    }
    set.add(seq);
  }
  return out;
}

/**
 * What a consumer saw of a stream of `{ seq }` events over keys `${prefix}${k}` (k < nextSeq.length):
 * deliveries, distinct events, the events never delivered, and duplicates (at-least-once).
 */
export function deliveryReport(
  records: readonly { key: Buffer | null; value: Buffer | null }[],
  nextSeq: readonly number[],
  prefix: string,
) {
  const seen = records.map((m) => ({
    key: m.key!.toString(),
    seq: JSON.parse(m.value!.toString()).seq as number,
  }));
  const unique = new Set(seen.map((s) => `${s.key}#${s.seq}`));
  const missing: string[] = [];
  nextSeq.forEach((n, k) => {
    for (let s = 0; s < n; s++) if (!unique.has(`${prefix}${k}#${s}`)) missing.push(`${prefix}${k}#${s}`);
  });
  return { seen, unique, missing, duplicates: seen.length - unique.size };
}
