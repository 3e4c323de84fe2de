import { hostname } from 'node:os';
import pg from 'pg';
import { errorMessage } from '../errors.ts';

/**
 * The leader lock: which of several relays on one database and slot is the active one.
 *
 * A session-level advisory lock on a dedicated connection (never pooled: a session lock
 * belongs to its connection and ends with it), keyed by the slot name:
 *
 *   pg_try_advisory_lock(hashtext('pg-outbox-relay:' || <slot>))        -- one bigint key
 *
 * pg_locks shows it as locktype 'advisory', objsubid 1, with the key split into classid (high
 * 32 bits) and objid (low 32 bits); HOLDER_SQL below puts it together again (docs/deployment.md).
 * The relay streams, confirms and sweeps only while it holds the lock; the slot itself (active
 * for one server process at a time) is the second guard.
 *
 * Cases:
 *  - lock free → taken; held until release() or until its connection is lost
 *  - held by another relay → tryAcquire() names the holder's backend pid; poll again later
 *  - connection lost while held (server restart, network failure, pg_terminate_backend, or the
 *    periodic check fails or times out) → `lost` aborts at once. The server ends the session
 *    and frees the lock when it notices (at once for a closed socket; via the TCP keepalives
 *    below for a vanished host), so another relay may take over: this one must stop first.
 *  - this process killed (kill -9) → the kernel closes the socket, the backend ends, the lock
 *    is free for the standby's next poll.
 */
export const LOCK_NAMESPACE = 'pg-outbox-relay:';

/** The text whose hashtext() is the lock key. */
export function lockKeyText(slot: string): string {
  return `${LOCK_NAMESPACE}${slot}`;
}

/** The backend pid holding the lock of key text $1 in this database, if any. */
export const HOLDER_SQL = `SELECT l.pid FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtext($1)`;

const TRY_SQL = `SELECT pg_try_advisory_lock(hashtext($1)) AS got, (${HOLDER_SQL} LIMIT 1) AS holder`;
const CHECK_SQL = `SELECT EXISTS (${HOLDER_SQL} AND l.pid = pg_backend_pid()) AS held`;

/**
 * The server ends the backend of a vanished peer (no FIN: power loss, network partition) after
 * ~10 + 3 × 5 s, which frees the lock. Set as startup options, so a URL with its own
 * `options` parameter wins.
 */
const SERVER_KEEPALIVES = '-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3';

export interface LeaderLockOptions {
  databaseUrl: string;
  slot: string;
  /** How often the holder checks that its connection is alive and still holds the lock. */
  checkIntervalMs: number;
}

export type Attempt = { acquired: true } | { acquired: false; holderPid: number | null };

export class LeaderLock {
  readonly #o: LeaderLockOptions;
  #client: pg.Client | null = null;
  #held = false;
  #lost = new AbortController();
  #timer: NodeJS.Timeout | null = null;
  #checking = false;

  constructor(o: LeaderLockOptions) {
    this.#o = o;
  }

  get held(): boolean {
    return this.#held;
  }

  /** Aborts (with the reason) when the lock held since the last successful tryAcquire() is lost. */
  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  /** Takes the lock if it is free. Throws when the database cannot be reached. */
  async tryAcquire(): Promise<Attempt> {
    if (this.#held) return { acquired: true };
    const client = this.#client ?? (await this.#connect());
    let row: { got: boolean; holder: number | null };
    try {
      row = (await client.query<typeof row>(TRY_SQL, [lockKeyText(this.#o.slot)])).rows[0]!;
    } catch (e) {
      this.#loseConnection(errorMessage(e));
      throw e;
    }
    if (!row.got) return { acquired: false, holderPid: row.holder };
    this.#held = true;
    this.#lost = new AbortController();
    this.#timer = setInterval(() => void this.#check(), this.#o.checkIntervalMs);
    return { acquired: true };
  }

  /** Gives the lock up (ends its session). Idempotent. */
  async release(): Promise<void> {
    const client = this.#client;
    this.#held = false;
    this.#drop();
    if (client) {
      await Promise.race([client.end().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
    }
  }

  async #connect(): Promise<pg.Client> {
    const queryTimeout = Math.max(5000, 3 * this.#o.checkIntervalMs);
    const client = new pg.Client({
      connectionString: this.#o.databaseUrl,
      // Shows in pg_stat_activity which process and host leads (a URL's application_name wins).
      application_name: `pg-outbox-relay leader ${process.pid}@${hostname()}`.slice(0, 63),
      keepAlive: true,
      keepAliveInitialDelayMillis: 5000,
      options: SERVER_KEEPALIVES,
      connectionTimeoutMillis: queryTimeout,
      query_timeout: queryTimeout,
    });
    const gone = (why: string) => {
      if (this.#client === client) this.#loseConnection(why);
    };
    client.on('error', (e) => gone(errorMessage(e)));
    client.on('end', () => gone('connection ended'));
    try {
      await client.connect();
    } catch (e) {
      client.end().catch(() => {});
      throw e;
    }
    this.#client = client;
    return client;
  }

  /** The periodic check of the holder: the query fails, times out, or the lock is gone → lost. */
  async #check(): Promise<void> {
    const client = this.#client;
    if (!client || !this.#held || this.#checking) return;
    this.#checking = true;
    try {
      const r = await client.query<{ held: boolean }>(CHECK_SQL, [lockKeyText(this.#o.slot)]);
      if (!r.rows[0]?.held) this.#loseConnection('the lock is no longer held by this session');
    } catch (e) {
      if (this.#client === client) this.#loseConnection(`lock check failed: ${errorMessage(e)}`);
    } finally {
      this.#checking = false;
    }
  }

  #loseConnection(why: string): void {
    const wasHeld = this.#held;
    const client = this.#client;
    this.#held = false;
    this.#drop();
    client?.end().catch(() => {});
    if (wasHeld) this.#lost.abort(new Error(`lost the leader lock: ${why}`));
  }

  #drop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#client = null;
  }
}
