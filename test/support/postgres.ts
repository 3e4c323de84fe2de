/**
 * Per-test-file databases on the run's Postgres (see global-setup.ts), and polling.
 *
 *   const db = useTestDatabase();            // beforeAll creates, afterAll drops
 *   it('…', async () => { await db.query('SELECT 1'); });
 */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject } from 'vitest';
import { ProgressDeadline } from './progress.ts';

export type TestDatabase = {
  /** URL of the fresh database (same server and credentials as the admin URL). */
  url: string;
  name: string;
  /** Small pool on that database. */
  pool: pg.Pool;
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  /** Ends the pool, terminates its backends, drops its replication slots and the database. Idempotent. */
  close(): Promise<void>;
};

export function adminUrl(): string {
  const url = inject('pgAdminUrl');
  if (!url) {
    throw new Error(
      'no pgAdminUrl: run the tests through vitest with globalSetup test/support/global-setup.ts',
    );
  }
  return url;
}

/** The run's server_version_num (e.g. 180004): for tests whose expected behaviour differs per version. */
export function pgVersionNum(): number {
  const n = inject('pgVersionNum');
  if (!n)
    throw new Error(
      'no pgVersionNum: run the tests through vitest with globalSetup test/support/global-setup.ts',
    );
  return n;
}

function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/\.test\.[cm]?[jt]s$/, '')
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 40);
}

function databaseName(name?: string): string {
  let base = name ? slug(name) : '';
  if (!base) {
    const testPath = expect.getState().testPath;
    base = testPath ? slug(basename(testPath)) : '';
  }
  return `t_${base ? `${base}_` : ''}${randomBytes(4).toString('hex')}`;
}

function urlFor(admin: string, database: string): string {
  const url = new URL(admin);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.toString();
}

async function withAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `promise`, or `fallback` once `ms` have passed (the timer is cleared either way). */
function orAfter<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export interface TestDatabaseOptions {
  name?: string;
  /** A SQL_ASCII database (text columns hold any bytes), instead of the cluster's default encoding. */
  sqlAscii?: boolean;
}

export async function createTestDatabase(opts: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const name = databaseName(opts.name);
  const ident = pg.escapeIdentifier(name);
  const encoding = opts.sqlAscii
    ? ` ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'`
    : '';
  await withAdmin(async (admin) => {
    // Concurrent CREATE DATABASE can hit "source database is being accessed by other users".
    for (let attempt = 1; ; attempt++) {
      try {
        await admin.query(`CREATE DATABASE ${ident}${encoding}`);
        return;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006' || attempt >= 10) throw err;
        await sleep(100 * attempt);
      }
    }
  });

  const url = urlFor(adminUrl(), name);
  const pool = new pg.Pool({ connectionString: url, max: 5, idleTimeoutMillis: 10_000 });
  pool.on('error', () => {}); // idle clients killed by close() must not crash the run
  let closing: Promise<void> | undefined;

  return {
    url,
    name,
    pool,
    async query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
      return (await pool.query(sql, params)).rows as T[];
    },
    close: () => (closing ??= dropTestDatabase(name, pool)),
  };
}

async function dropTestDatabase(name: string, pool: pg.Pool): Promise<void> {
  // A test that never released a client would make pool.end() wait forever; its backend is terminated below.
  await orAfter(pool.end(), 5_000, undefined);
  await withAdmin(async (admin) => {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount === 0) return;
    const ident = pg.escapeIdentifier(name);
    await admin.query(`ALTER DATABASE ${ident} ALLOW_CONNECTIONS false`);
    await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [name],
    );
    await dropReplicationSlots(admin, name);
    await admin.query(`DROP DATABASE IF EXISTS ${ident} WITH (FORCE)`);
  });
}

/**
 * Drops `slot` once the server let it go. A relay that just stopped (or exited) closed its
 * connection, and its walsender releases the slot a moment later: dropped at once, the server may
 * still answer "replication slot … is active for PID …" (55006; seen in CI on PostgreSQL 16).
 */
export async function dropSlotWhenReleased(
  db: { query: (sql: string, params?: unknown[]) => Promise<unknown> },
  slot: string,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await db.query('SELECT pg_drop_replication_slot($1)', [slot]);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '55006' || Date.now() > deadline) throw err;
    }
    await sleep(50);
  }
}

async function dropReplicationSlots(admin: pg.Client, database: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const { rows } = await admin.query<{ slot_name: string; active_pid: number | null }>(
      'SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = $1',
      [database],
    );
    if (rows.length === 0) return;
    for (const slot of rows) {
      try {
        if (slot.active_pid !== null) {
          await admin.query('SELECT pg_terminate_backend($1)', [slot.active_pid]);
        } else {
          await admin.query('SELECT pg_drop_replication_slot($1)', [slot.slot_name]);
        }
      } catch (err) {
        // 55006: the slot became active again, or it is being released: try again below.
        const code = (err as { code?: string }).code;
        if ((code !== '55006' && code !== '42704') || Date.now() > deadline) throw err;
      }
    }
    if (Date.now() > deadline) {
      throw new Error(`could not drop replication slots of ${database}: ${rows.map((r) => r.slot_name)}`);
    }
    await sleep(50);
  }
}

/**
 * A test database for the calling file: created in beforeAll, closed in afterAll. The handle
 * forwards to it, so it can be captured at the top of the file and used in tests and hooks.
 */
export function useTestDatabase(opts: TestDatabaseOptions = {}): TestDatabase {
  let current: TestDatabase | undefined;
  const get = (): TestDatabase => {
    if (!current)
      throw new Error('useTestDatabase(): the database exists only between its beforeAll and afterAll');
    return current;
  };
  beforeAll(async () => {
    current = await createTestDatabase(opts);
  });
  afterAll(async () => {
    await current?.close();
    current = undefined;
  });
  return {
    get url() {
      return get().url;
    },
    get name() {
      return get().name;
    },
    get pool() {
      return get().pool;
    },
    query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]> {
      return get().query<T>(sql, params);
    },
    close: () => get().close(),
  };
}

export type WaitForOptions = {
  /** Without `progress`: the whole wait. With it: the longest wait without progress. */
  timeoutMs?: number;
  intervalMs?: number;
  /**
   * A value that changes while the awaited thing is on its way (rows published, records read):
   * each change restarts the timeout, up to `capMs` in all. For waits whose length scales with
   * the machine's load.
   */
  progress?: () => unknown;
  /** With `progress`: the absolute limit. Default 6 × timeoutMs. */
  capMs?: number;
  /** What was being waited for; a function is evaluated at timeout (to report current state). */
  message?: string | (() => string | Promise<string>);
};

/**
 * Polls `fn` until it returns true; throws `message` after `timeoutMs` (default 10 s), or, with
 * `progress`, after `timeoutMs` without progress (test/support/progress.ts). A throwing `fn` counts
 * as "not yet"; the last error is attached as the timeout error's cause.
 */
export async function waitFor(
  fn: () => Promise<boolean> | boolean,
  { timeoutMs = 10_000, intervalMs = 50, message = 'condition', progress, capMs }: WaitForOptions = {},
): Promise<void> {
  const deadline = new ProgressDeadline({
    idleMs: timeoutMs,
    capMs: progress ? (capMs ?? timeoutMs * 6) : timeoutMs,
  });
  let lastError: unknown;
  for (;;) {
    try {
      // A hanging fn must not outlast the timeout.
      if (await orAfter(Promise.resolve(fn()), deadline.remaining(), false)) return;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (progress) {
      try {
        deadline.note(await orAfter(Promise.resolve(progress()), deadline.remaining(), undefined));
      } catch {
        // An unreadable progress value is no progress.
      }
    }
    if (deadline.expired()) break;
    await sleep(Math.min(intervalMs, deadline.remaining()));
  }
  const text = typeof message === 'function' ? await message() : message;
  const suffix = lastError ? ` (last error: ${(lastError as Error).message ?? lastError})` : '';
  const how = progress ? deadline.why() : `after ${timeoutMs} ms`;
  throw new Error(`waitFor timed out ${how}: ${text}${suffix}`, { cause: lastError });
}
