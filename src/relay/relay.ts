import pg from 'pg';
import type { Config } from '../config/load.ts';
import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { RelayMetrics, type RelayState } from '../observability/metrics.ts';
import { createBatchTracer } from '../observability/tracing.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { checkDatabase, ensureSlot } from '../replication/preflight.ts';
import { SerializedSink } from '../sinks/serialized-sink.ts';
import type { Sink } from '../sinks/sink.ts';
import { OutboxStore } from '../store/outbox-store.ts';
import { Sweeper } from '../sweeper/sweeper.ts';
import { backoffDelay, sleep } from './backoff.ts';
import { BlockedAggregates } from './blocked-aggregates.ts';
import { LeaderLock, lockKeyText } from './leader-lock.ts';
import { OutageLog } from './outage-log.ts';
import { ReplicationSession } from './session.ts';

export interface RelayOptions {
  config: Config;
  sink: Sink;
  log: Logger;
  metrics?: RelayMetrics;
}

/** SQLSTATE classes and codes after which a retry can succeed. */
const RETRIABLE_SQLSTATE = /^(08|53|57P|40|55P03|58)/;
const RETRIABLE_NODE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
]);

/** Maps a driver error to the error model: connection trouble is retriable, the rest is not. */
export function toRelayError(e: unknown): RelayError {
  if (e instanceof RelayError) return e;
  const code = (e as { code?: string }).code;
  const msg = errorMessage(e);
  if (
    (code && (RETRIABLE_SQLSTATE.test(code) || RETRIABLE_NODE.has(code))) ||
    /Connection terminated|connection timeout|ended unexpectedly/i.test(msg)
  ) {
    return new RelayError(ErrorCode.DATABASE_UNAVAILABLE, `database unavailable: ${msg}`, {
      retriable: true,
      cause: e,
    });
  }
  if (code === '28P01' || code === '28000' || code === '3D000') {
    return new RelayError(ErrorCode.CONFIG_INVALID, `cannot connect with --database-url: ${msg}`, {
      cause: e,
    });
  }
  return new RelayError(ErrorCode.PROTOCOL_VIOLATION, msg, { cause: e });
}

/**
 * The relay's lifecycle: preflight, leader lock, slot, sink, then replication sessions, one
 * after another, until stopped. Transient failures (database or broker down) are retried
 * forever with back-off (state 'waiting'); anything else ends the relay with a RelayError that
 * names the fix.
 *
 * Hot standby: of several relays on one database and slot, only the holder of the leader lock
 * (leader-lock.ts) streams and sweeps. The others are in state 'standby' and try the lock every
 * --standby-poll-ms, so one takes over within about that long after the active relay dies.
 * A slot still active for another process (e.g. the dead relay's walsender, for a moment)
 * also means standby. Losing the lock's connection ends the session at once.
 */
export class Relay {
  readonly metrics: RelayMetrics;
  readonly #c: Config;
  readonly #sink: Sink;
  readonly #log: Logger;
  readonly #outages: OutageLog;
  readonly #stop = new AbortController();
  #running: Promise<void> | null = null;
  #state: RelayState = 'stopped';
  #session: ReplicationSession | null = null;
  #lastConfirmed: Lsn | null = null;
  #waitingReason: string | null = null;

  constructor(o: RelayOptions) {
    this.#c = o.config;
    this.#sink = new SerializedSink(o.sink);
    this.#log = o.log.child({ slot: o.config.slot });
    this.metrics = o.metrics ?? new RelayMetrics();
    this.#outages = new OutageLog(this.#log);
  }

  get state(): RelayState {
    return this.#state;
  }

  /** Why the relay is not streaming, when it is waiting. */
  get waitingReason(): string | null {
    return this.#waitingReason;
  }

  get confirmedLsn(): string | null {
    const l = this.#session?.confirmedLsn ?? this.#lastConfirmed;
    return l === null ? null : formatLsn(l);
  }

  get lastProgressAt(): number | null {
    return this.#session?.lastProgressAt ?? null;
  }

  /** Starts the relay in the background; resolves at once. Idempotent. Use done() for the outcome. */
  start(): Promise<void> {
    if (!this.#running) {
      this.#running = this.#run();
      this.#running.catch(() => {});
    }
    return Promise.resolve();
  }

  /** Settles when the relay ends: resolves after stop(), rejects with a fatal RelayError. */
  done(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  /** Graceful stop: stop reading, drain in-flight (bounded by shutdownTimeoutMs), confirm, close. Idempotent. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running?.catch(() => {});
  }

  #setState(s: RelayState, reason: string | null = null): void {
    this.#state = s;
    this.#waitingReason = reason;
    this.metrics.setState(s);
  }

  async #run(): Promise<void> {
    const c = this.#c;
    const stop = this.#stop.signal;
    const pool = new pg.Pool({
      connectionString: c.databaseUrl,
      max: 3,
      application_name: 'pg-outbox-relay',
    });
    pool.on('error', () => {}); // idle-client errors surface on the next query
    const store = new OutboxStore(pool, c.schema, c.table);
    const blocked = new BlockedAggregates();
    const tracer = await createBatchTracer();
    // What the stream and the sweeper share; each session adds its own outage log and tracer.
    const shared = { config: c, sink: this.#sink, store, blocked, log: this.#log, metrics: this.metrics };
    // A fatal finding of the sweeper (the slot was invalidated) ends the session, then the relay.
    const sweeper = new Sweeper({ ...shared, onFatal: (e) => this.#session?.fail(e) });
    const lock = new LeaderLock({
      databaseUrl: c.databaseUrl,
      slot: c.slot,
      checkIntervalMs: c.standbyPollMs,
    });
    let sinkStarted = false;
    let sessions = 0;
    let attempt = 0;
    this.#setState('starting');
    try {
      while (!stop.aborted) {
        try {
          const slot = await this.#preflight(pool, lock);
          if (!sinkStarted) {
            await this.#sink.start().catch((e) => {
              throw new RelayError(
                ErrorCode.BROKER_UNAVAILABLE,
                `cannot connect to the ${this.#sink.name} sink: ${errorMessage(e)}`,
                {
                  retriable: true,
                  cause: e,
                },
              );
            });
            sinkStarted = true;
            this.#outages.recovered('broker');
          }
          if (stop.aborted) break;
          if (lock.lost.aborted) continue;
          // Which aggregates are blocked survives restarts in the table (strict ordering).
          await blocked.reload(pool, c.schema, c.table);
          const session = new ReplicationSession(
            { ...shared, outages: this.#outages, tracer },
            slot.confirmedFlushLsn,
          );
          this.#session = session;
          if (sessions++ > 0) this.metrics.replicationReconnects.inc();
          // Losing the lock ends the session (drained like a stop) and the sweeper at once: from
          // then on another relay may take the lock, and it must never find this one active.
          const lost = lock.lost;
          const onLost = () => {
            this.#log.warn({ err: errorMessage(lost.reason) }, 'leader lock lost; stopping the stream');
            this.#setState('waiting', errorMessage(lost.reason));
            void sweeper.stop();
          };
          lost.addEventListener('abort', onLost, { once: true });
          try {
            await session.run(AbortSignal.any([stop, lost]), () => {
              if (lost.aborted) return;
              attempt = 0;
              this.#outages.recovered('database');
              this.#setState('streaming');
              // Only the leader sweeps: a standby never retries, prunes or releases.
              sweeper.start();
            });
          } finally {
            lost.removeEventListener('abort', onLost);
            await sweeper.stop();
          }
          this.#lastConfirmed = session.confirmedLsn;
          this.#session = null;
        } catch (err) {
          if (this.#session) this.#lastConfirmed = this.#session.confirmedLsn;
          this.#session = null;
          const e = toRelayError(err);
          if (!e.retriable) throw e;
          if (stop.aborted) break;
          attempt++;
          if (e.code === ErrorCode.SLOT_ACTIVE_ELSEWHERE) {
            if (this.#state !== 'standby')
              this.#log.info(
                { err: e.message },
                'standby: another process is active on the slot; taking over when it stops',
              );
            this.#setState('standby', e.message);
            await sleep(c.standbyPollMs, stop);
            continue;
          }
          const dependency = e.code === ErrorCode.BROKER_UNAVAILABLE ? 'broker' : 'database';
          this.#outages.failed(dependency, e.code, e.message);
          this.metrics.transientErrors.inc({ dependency, reason: e.code });
          this.#setState('waiting', e.message);
          await sleep(
            backoffDelay({ initialMs: c.retryInitialMs, maxMs: c.retryMaxMs, factor: 2 }, attempt),
            stop,
          );
        }
      }
    } finally {
      this.#setState('stopping');
      if (sinkStarted)
        await this.#sink.stop().catch((e) => this.#log.warn({ err: errorMessage(e) }, 'sink stop failed'));
      await lock.release();
      await pool.end().catch(() => {});
      this.#setState('stopped');
    }
  }

  /** Database checks (a standby fails fast on bad config too), then the leader lock, then the slot. */
  async #preflight(pool: pg.Pool, lock: LeaderLock) {
    const client = await pool.connect();
    try {
      await checkDatabase(client, this.#c);
      await this.#lead(lock);
      const slot = await ensureSlot(client, this.#c.slot);
      if (slot.created) this.#log.info('replication slot created (pgoutput)');
      return slot;
    } finally {
      client.release();
    }
  }

  /** Takes the leader lock unless held; SLOT_ACTIVE_ELSEWHERE (standby) when another relay holds it. */
  async #lead(lock: LeaderLock): Promise<void> {
    if (lock.held) return;
    const got = await lock.tryAcquire();
    if (!got.acquired) {
      throw new RelayError(
        ErrorCode.SLOT_ACTIVE_ELSEWHERE,
        `slot ${this.#c.slot} is led by another relay (it holds the leader lock; server pid ${got.holderPid ?? 'unknown'})`,
        { retriable: true, details: { holderPid: got.holderPid } },
      );
    }
    this.#log.info({ lock: lockKeyText(this.#c.slot) }, 'leader lock acquired: this relay is the active one');
  }
}
