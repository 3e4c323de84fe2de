import type pg from 'pg';
import { presetOf } from '../compat/presets.ts';
import type { Config } from '../config/load.ts';
import { deliveryModeOf } from '../delivery/choose.ts';
import type { DeliveryMode } from '../delivery/mode.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import { parseIdRanges } from '../lifecycle/id-ranges.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { markRecovery, outcomesOnRows, pendingRecovery, readProgress } from '../lifecycle/progress.ts';
import type { Logger } from '../observability/logger.ts';
import { RelayMetrics, type RelayState } from '../observability/metrics.ts';
import { createBatchTracer } from '../observability/tracing.ts';
import { failoverSlotsPossible, turnOnSlotFailover } from '../replication/failover.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { checkDatabase, checkSlot, ensureSlot } from '../replication/preflight.ts';
import { privilegeError } from '../replication/privileges.ts';
import { backoffDelay, sleep } from '../retry/backoff.ts';
import { OutageLog } from '../retry/outage-log.ts';
import { outagePolicy } from '../retry/retry.ts';
import { SerializedSink } from '../sinks/serialized-sink.ts';
import type { Sink } from '../sinks/sink.ts';
import { codeOf, isTransientSqlState, SqlState } from '../store/pg-errors.ts';
import { createPool } from '../store/pool.ts';
import { type RecordedState, relayStateTable } from '../store/relay-state.ts';
import { dropSlotOfThisDatabase } from '../store/slots.ts';
import { currentTimeline } from '../store/timeline.ts';
import { ReplicationSession } from '../stream/session.ts';
import { Sweeper } from '../sweeper/sweeper.ts';
import { LeaderLock, lockKeyText } from './leader-lock.ts';
import { canBePoison, describePoison, POISON_REPEATS, type Poison, PoisonDetector } from './poison.ts';
import { publishUnrecorded } from './slot-recovery.ts';
import { StateRecorder } from './state-recorder.ts';
import { TimelineWatch } from './timeline-watch.ts';

export interface RelayOptions {
  config: Config;
  sink: Sink;
  log: Logger;
  metrics?: RelayMetrics;
}

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
  // 42501 and friends: a configuration error (exit 78) whose fix line is the GRANT.
  const denied = privilegeError(e);
  if (denied) return denied;
  // codeOf: only a string code (a SQLSTATE or a Node system error's); kafkajs' codes are numbers.
  const code = codeOf(e);
  const msg = errorMessage(e);
  if (
    (code && (isTransientSqlState(code) || RETRIABLE_NODE.has(code))) ||
    /Connection terminated|connection timeout|ended unexpectedly/i.test(msg)
  ) {
    return new RelayError(ErrorCode.DATABASE_UNAVAILABLE, `database unavailable: ${msg}`, {
      retriable: true,
      cause: e,
    });
  }
  if (
    code === SqlState.INVALID_PASSWORD ||
    code === SqlState.INVALID_AUTHORIZATION_SPECIFICATION ||
    code === SqlState.INVALID_CATALOG_NAME
  ) {
    return new RelayError(ErrorCode.CONFIG_INVALID, `cannot connect with --database-url: ${msg}`, {
      cause: e,
    });
  }
  return new RelayError(ErrorCode.PROTOCOL_VIOLATION, msg, { cause: e });
}

/** A session that streamed this long without failing counts as healthy for the back-off. */
const HEALTHY_SESSION_MS = 5000;

/**
 * The relay's lifecycle: preflight (privileges included), leader lock, slot, sink, then
 * replication sessions, one after another, until stopped. Transient failures (database or broker down) are
 * retried forever with back-off (state 'waiting'); anything else ends the relay with a RelayError
 * that names the fix.
 *
 * The slot is created only after every check that can end the relay passed (configuration,
 * privileges, publication, the leader lock): a relay that dies on privileges or bad
 * configuration leaves no slot behind retaining WAL. A broker outage after that is retried,
 * like one during streaming.
 *
 * Back-off grows with every failure and resets only after real progress: the session's
 * confirmed position moved, or it streamed for HEALTHY_SESSION_MS. A stream error that merely
 * reconnects (START_REPLICATION sent, then the same error) is not progress.
 *
 * Poison position: when the server fails the stream with the same error (same SQLSTATE and
 * message, a data error rather than a connection one) at the same confirmed position
 * POISON_REPEATS times in a row, retrying cannot help (e.g. a publication row filter that
 * fails on one row). The relay says so once (log error, outbox_poison_position = 1, waiting reason,
 * /readyz reason `poison-position`, the relay-state row read by `status`) and keeps retrying at
 * the longest back-off, so it resumes by itself once an operator has moved the slot past it
 * (docs/operations.md#poison-position).
 *
 * Hot standby: of several relays on one database and slot, only the holder of the leader lock
 * (leader-lock.ts) streams and sweeps. The others are in state 'standby' and try the lock every
 * --standby-poll-ms, so one takes over within about that long after the active relay dies.
 * A slot still active for another process (e.g. the dead relay's walsender, for a moment)
 * also means standby. Losing the lock's connection ends the session at once.
 *
 * The relay-state row (state-recorder.ts) is written by the lock holder only.
 */
/** A listener of the relay's state changes: the new state, and when the relay-state row says it. */
export type StateListener = (state: RelayState, recorded: Promise<void>) => void;

export class Relay {
  readonly metrics: RelayMetrics;
  readonly #c: Config;
  readonly #sink: Sink;
  readonly #log: Logger;
  readonly #outages: OutageLog;
  readonly #stop = new AbortController();
  readonly #poison = new PoisonDetector();
  #running: Promise<void> | null = null;
  #state: RelayState = 'stopped';
  #session: ReplicationSession | null = null;
  /** The current session's start: its position and time, and whether it made progress yet. */
  #current: {
    startLsn: Lsn;
    startedAt: number;
    progressed: boolean;
    confirmed: Lsn;
    published: number;
  } | null = null;
  #lastConfirmed: Lsn | null = null;
  #waitingReason: string | null = null;
  #waitingDependency: 'broker' | 'database' | null = null;
  /** Last real progress (a position confirmed or a batch published), for the relay-state row. */
  #progressAt: number | null = null;
  #attempt = 0;
  #recorder: StateRecorder | null = null;
  #blocked: BlockedAggregates | null = null;
  /** This process has opened the slot before: finding it missing later means it was dropped. */
  #slotSeen = false;
  readonly #timelines: TimelineWatch;
  /** How batches are cut and committed (delivery/mode.ts): chosen here, once. */
  readonly #delivery: DeliveryMode;
  /** invalidation_reason of the slot #openSlot found lost, for #recover's log lines. */
  #lostReason: string | null = null;

  constructor(o: RelayOptions) {
    this.#c = o.config;
    this.#sink = new SerializedSink(o.sink);
    this.#log = o.log.child({ slot: o.config.slot });
    this.metrics = o.metrics ?? new RelayMetrics();
    this.#outages = new OutageLog(this.#log);
    this.#timelines = new TimelineWatch(this.#log, this.metrics);
    this.#delivery = deliveryModeOf(this.#c, this.#sink, this.#log, this.metrics, this.#timelines);
  }

  /** Aggregates the stream holds back in strict ordering (an earlier event failed, dead or parked). */
  get blockedAggregates(): number {
    return this.#blocked?.size ?? 0;
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

  /** The poison position the stream is stuck at, if any. */
  get poison(): Poison | null {
    return this.#poison.poison;
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

  #setState(
    s: RelayState,
    reason: string | null = null,
    dependency: 'broker' | 'database' | null = null,
  ): void {
    this.#state = s;
    this.#waitingReason = reason;
    this.#waitingDependency = dependency;
    this.metrics.setState(s);
    this.#recorder?.tick();
    const recorded = this.#recorder?.settled() ?? Promise.resolve();
    for (const l of this.#stateListeners) l(s, recorded);
  }

  readonly #stateListeners = new Set<StateListener>();

  /**
   * Hears every state change of the relay (starting, streaming, waiting, standby, stopping,
   * stopped), at once, with a promise that settles once the relay-state row says it (what
   * `outbox-relay status` reads). Returns the unsubscribe function.
   */
  onStateChange(listener: StateListener): () => void {
    this.#stateListeners.add(listener);
    return () => this.#stateListeners.delete(listener);
  }

  /** The relay's state as `status` shows it. */
  #recordedState(): RecordedState {
    if (this.#poison.poison) return 'poison-position';
    switch (this.#state) {
      case 'streaming':
        return this.#outages.isDown('broker') ? 'broker-outage' : 'active';
      case 'waiting':
        return this.#waitingDependency === 'broker' ? 'broker-outage' : 'database-outage';
      default:
        return this.#state;
    }
  }

  /**
   * Once a second (and on state changes): did the current session make real progress? Then the
   * back-off and any poison position are over. Then the relay-state row (written when due).
   */
  #tick(): void {
    const s = this.#session;
    const cur = this.#current;
    if (s && cur) {
      const confirmed = s.confirmedLsn;
      if (confirmed !== cur.confirmed || s.lastProgressAt !== cur.published) {
        cur.confirmed = confirmed;
        cur.published = s.lastProgressAt;
        this.#progressAt = Date.now();
      }
      if (!cur.progressed && (confirmed > cur.startLsn || Date.now() - cur.startedAt >= HEALTHY_SESSION_MS)) {
        cur.progressed = true;
        this.#attempt = 0;
        this.#outages.recovered('database');
        if (confirmed > cur.startLsn) this.#clearPoison('the confirmed position moved past it');
      }
    }
    this.#recorder?.tick();
  }

  #clearPoison(why: string): void {
    const p = this.#poison.poison;
    this.#poison.progressed();
    if (!p) return;
    this.metrics.poisonPosition.set(0);
    this.#log.info(
      { lsn: p.confirmedLsn, transactionLsn: p.transactionLsn },
      `poison position passed: ${why}`,
    );
    if (this.#state === 'waiting' && this.#session) this.#setState('streaming');
  }

  async #run(): Promise<void> {
    const c = this.#c;
    const stop = this.#stop.signal;
    const pool = createPool({
      connectionString: c.databaseUrl,
      max: 3,
      application_name: 'pg-outbox-relay',
    });
    // The table preset (compat/): the outbox table, or Debezium's, whose failures go to a side table.
    const preset = presetOf(c, pool);
    const store = preset.store;
    const blocked = new BlockedAggregates();
    this.#blocked = blocked;
    const tracer = await createBatchTracer();
    // What the stream and the sweeper share; each session adds its own outage log and tracer.
    const shared = { config: c, sink: this.#sink, store, blocked, log: this.#log, metrics: this.metrics };
    // A fatal finding of the sweeper (the slot was invalidated) ends the session, then the relay.
    // The sweeper works over the preset's failed rows (the outbox table's, or a side table's).
    const sweeper = new Sweeper({
      ...shared,
      store: preset.sweepStore,
      onFatal: (e) => this.#session?.fail(e),
    });
    const lock = new LeaderLock({
      databaseUrl: c.databaseUrl,
      slot: c.slot,
      checkIntervalMs: c.standbyPollMs,
    });
    this.#recorder = new StateRecorder({
      db: pool,
      stateTable: relayStateTable(c.schema, c.table),
      slot: c.slot,
      log: this.#log,
      canWrite: () => lock.held,
      view: () => {
        const f = this.#outages.lastFailure;
        const p = this.#poison.poison;
        return {
          state: this.#recordedState(),
          detail: this.#waitingReason,
          lastProgressAt: this.#progressAt === null ? null : new Date(this.#progressAt),
          confirmedLsn: this.confirmedLsn,
          lastError: f ? `${f.dependency}: [${f.reason}] ${f.message}` : null,
          lastErrorAt: f ? new Date(f.at) : null,
          poisonLsn: p ? (p.transactionLsn ?? p.confirmedLsn) : null,
        };
      },
    });
    const ticker = setInterval(() => this.#tick(), 1000);
    let sinkStarted = false;
    let sessions = 0;
    this.#setState('starting');
    try {
      while (!stop.aborted) {
        let streamed = false;
        try {
          await this.#preflight(pool, lock);
          // Only now, with every check passed (nothing left that ends the relay), the slot:
          // created as early as that, so no event committed meanwhile is missed.
          const slot = await this.#openSlot(pool, store);
          if (!sinkStarted) {
            await this.#sink.start().catch((e) => {
              // --kafka-topics verify found topics missing: the relay's own verdict, it ends the relay (exit 78).
              if (e instanceof RelayError && e.code === ErrorCode.KAFKA_TOPICS_NOT_READY) throw e;
              // E.g. CLUSTER_AUTHORIZATION_FAILED: the principal may not get a producer id. Not
              // about any event: nothing is failed, the relay waits and retries.
              const cls = this.#sink.classify(e);
              throw new RelayError(
                ErrorCode.BROKER_UNAVAILABLE,
                `cannot start the ${this.#sink.name} sink: ${cls.reason}: ${cls.message}`,
                { retriable: true, cause: e },
              );
            });
            sinkStarted = true;
            this.#outages.recovered('broker');
            this.metrics.brokerOutage.set(0);
          }
          if (stop.aborted) break;
          if (lock.lost.aborted) continue;
          // Exactly-once: what Kafka committed (read after fencing older producers) joins
          // PostgreSQL's progress record before anything is streamed or recovered.
          await this.#delivery.sync(store);
          // Which aggregates are blocked survives restarts where the preset keeps failures (the
          // table, or a side table): without it a later event of a failed aggregate would be
          // published before the failed one (strict ordering).
          blocked.replace(await preset.sweepStore.heldAll());
          // A slot this relay had to create (lost, dropped, or never there): the rows it cannot
          // stream — committed before it existed and recorded nowhere — come from the table.
          const outcomeDeps = { ...shared, outages: this.#outages, tracer, delivery: this.#delivery };
          // A preset without a progress record has no table to recover from (the events may exist only in the WAL).
          if (preset.progressRecord && slot.recovery && !(await this.#recover(slot.recovery, outcomeDeps)))
            break;
          // Rows the progress record covers are settled: the stream skips them (after a recovery,
          // rows the table pass published; after a crash, rows recorded but not yet confirmed).
          // Rows whose failure is on the row but not in the record (a crash between the two) are
          // the sweeper's: the stream skips them too.
          const recorded = preset.progressRecord ? await readProgress(pool, store.progress, c.slot) : null;
          const onRows = preset.progressRecord
            ? await outcomesOnRows(pool, store.table, store.progress, c.slot)
            : new Set<string>();
          const session = new ReplicationSession(
            { ...outcomeDeps, preset: preset.stream },
            slot.confirmedFlushLsn,
            recorded ? parseIdRanges(recorded) : [],
            onRows,
          );
          this.#session = session;
          this.#current = {
            startLsn: slot.confirmedFlushLsn,
            startedAt: Date.now(),
            progressed: false,
            confirmed: slot.confirmedFlushLsn,
            published: session.lastProgressAt,
          };
          // An operator moved the slot past the poison position: it is behind us.
          const p = this.#poison.poison;
          if (p && p.confirmedLsn !== formatLsn(slot.confirmedFlushLsn))
            this.#clearPoison(`the slot now starts at ${formatLsn(slot.confirmedFlushLsn)}`);
          if (sessions++ > 0) this.metrics.replicationReconnects.inc();
          // Losing the lock ends the session (drained like a stop) and the sweeper at once: from
          // then on another relay may take the lock, and it must never find this one active.
          const lost = lock.lost;
          const onLost = () => {
            this.#log.warn({ err: errorMessage(lost.reason) }, 'leader lock lost; stopping the stream');
            this.#setState('waiting', errorMessage(lost.reason), 'database');
            void sweeper.stop();
          };
          lost.addEventListener('abort', onLost, { once: true });
          try {
            await session.run(
              AbortSignal.any([stop, lost]),
              () => {
                if (lost.aborted) return;
                streamed = true;
                // While poisoned the state stays 'waiting' until the position is passed (#tick).
                if (!this.#poison.poison) this.#setState('streaming');
                // Only the leader sweeps: a standby never retries, prunes or releases.
                sweeper.start();
              },
              (timeline) => {
                this.#timelines.observe(timeline);
                const changed = this.#delivery.streamStarted(timeline);
                if (changed) session.fail(changed);
              },
            );
          } finally {
            lost.removeEventListener('abort', onLost);
            await sweeper.stop();
          }
          this.#lastConfirmed = session.confirmedLsn;
          this.#session = null;
          this.#current = null;
        } catch (err) {
          const session = this.#session;
          if (session) this.#lastConfirmed = session.confirmedLsn;
          this.#tick(); // the session's last progress counts before it is judged
          // Poison is judged by the position alone (a long catch-up before the error is no progress).
          const moved =
            session !== null && this.#current !== null && session.confirmedLsn > this.#current.startLsn;
          this.#session = null;
          this.#current = null;
          const e = toRelayError(err);
          if (stop.aborted) break;
          if (e.code === ErrorCode.TIMELINE_CHANGED) {
            // A promotion: not an outage; the next round starts from the new primary's state
            // (after the usual back-off, which only a healthy session resets: never a hot loop).
            this.#timelines.dropped(e);
            await sleep(backoffDelay(outagePolicy(c), ++this.#attempt), stop);
            continue;
          }
          // Exactly-once: fenced while the session ended for another reason: exit 75, not standby.
          const fatal = this.#delivery.fatal();
          if (fatal) throw fatal;
          // Lost while streaming (the sweeper saw wal_status = lost): the next round recovers it.
          if (e.code === ErrorCode.SLOT_INVALIDATED && c.slotRecovery) {
            this.#log.warn({ err: e.message }, 'replication slot lost while streaming; recovering it');
            continue;
          }
          if (!e.retriable) throw e;
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
          this.#attempt++;
          const poison = session && streamed && !moved ? this.#countPoison(e, session) : null;
          const dependency = e.code === ErrorCode.BROKER_UNAVAILABLE ? 'broker' : 'database';
          this.#outages.failed(dependency, e.code, e.message);
          if (dependency === 'broker') this.metrics.brokerOutage.set(1);
          this.metrics.transientErrors.inc({ dependency, reason: e.code });
          if (poison) {
            this.#setState('waiting', describePoison(poison), dependency);
            // Retrying cannot help until an operator acts: the longest back-off, no jitter needed.
            await sleep(c.retryMaxMs, stop);
            continue;
          }
          this.#setState('waiting', e.message, dependency);
          // Not retryUntilAborted: each round of this loop decides anew (standby, poison, lost
          // slot, back-off reset by progress); it waits with the same outage policy.
          await sleep(backoffDelay(outagePolicy(c), this.#attempt), stop);
        }
      }
    } finally {
      clearInterval(ticker);
      this.#setState('stopping');
      await this.#recorder.flush();
      if (sinkStarted)
        await this.#sink.stop().catch((e) => this.#log.warn({ err: errorMessage(e) }, 'sink stop failed'));
      this.#setState('stopped');
      await this.#recorder.flush();
      this.#recorder = null;
      await lock.release();
      await pool.end().catch(() => {});
    }
  }

  /** A stream failure with no progress: counts it towards a poison position; the poison once recognised. */
  #countPoison(e: RelayError, session: ReplicationSession): Poison | null {
    const sqlstate = (e.cause as { code?: string } | undefined)?.code;
    if (!canBePoison(sqlstate)) return null;
    const was = this.#poison.poison;
    const p = this.#poison.failed({
      confirmedLsn: session.confirmedLsn,
      sqlstate: sqlstate!,
      message: errorMessage(e.cause),
      transactionLsn: session.lastBeginLsn,
    });
    if (p && !was) {
      this.metrics.poisonPosition.set(1);
      this.#log.error(
        {
          code: ErrorCode.POISON_POSITION,
          lsn: p.confirmedLsn,
          transactionLsn: p.transactionLsn,
          sqlstate: p.sqlstate,
          repeats: POISON_REPEATS,
        },
        new RelayError(ErrorCode.POISON_POSITION, describePoison(p)).explanation,
      );
    }
    return p;
  }

  /** Database checks, privileges included (a standby fails fast on them too), then the leader lock. Creates nothing. */
  async #preflight(pool: pg.Pool, lock: LeaderLock): Promise<void> {
    const client = await pool.connect();
    try {
      await checkDatabase(client, this.#c).catch((e) => {
        // A lost slot is the leader's to recover (#openSlot), unless recovery is off.
        if (!(isRelayError(e, ErrorCode.SLOT_INVALIDATED) && this.#c.slotRecovery)) throw e;
      });
      await this.#lead(lock);
    } finally {
      client.release();
    }
  }

  /**
   * The slot, created if missing (with the publication, the only thing the relay creates), and
   * whether the rows it cannot stream must first come from the table (`recovery`). Cases:
   *  - exists, usable → stream from its confirmed position (recovery null);
   *  - missing, the slot's progress record empty → first start: created; the table pass publishes
   *    rows committed before the slot existed, if any (recovery 'created');
   *  - missing although the progress record shows it streamed (or this process streamed from
   *    it) → someone dropped it, or a failover to a server without it: created (recovery 'dropped');
   *  - wal_status = 'lost' (max_slot_wal_keep_size, idle timeout) → dropped and created again
   *    (recovery 'invalidated');
   *  - a recovery marked in the progress row and not finished (the relay died during the table
   *    pass) → that recovery again, whatever the slot.
   * The recovery is marked in the progress row BEFORE the new slot is created, and cleared after
   * the table pass (#recover), so a crash in between repeats the pass instead of leaving a gap.
   * With --no-slot-recovery a lost or dropped slot ends the relay (SLOT_INVALIDATED, exit 69).
   */
  async #openSlot(pool: pg.Pool, store: OutboxStore) {
    const c = this.#c;
    const client = await pool.connect();
    try {
      let recovery = await pendingRecovery(client, store.progress, c.slot);
      const state = await checkSlot(client, c.slot).catch(async (e) => {
        if (!(isRelayError(e, ErrorCode.SLOT_INVALIDATED) && c.slotRecovery)) throw e;
        recovery = 'invalidated';
        const reason = String(e.details?.reason ?? 'wal_removed');
        this.#lostReason = reason;
        this.metrics.slotInvalidations.inc({ reason });
        this.#log.warn(
          { err: e.message, invalidation_reason: reason },
          `replication slot invalidated (wal_status = lost, invalidation_reason = ${reason}): dropping it to recover`,
        );
        await markRecovery(client, store.progress, c.slot, recovery);
        await dropSlotOfThisDatabase(client, c.slot).catch((d) => {
          // object_in_use: still active (the invalidated session's walsender is on its way out): the
          // next round tries again — the mark above says a recovery is due.
          throw new RelayError(
            ErrorCode.DATABASE_UNAVAILABLE,
            `cannot drop the lost slot yet: ${errorMessage(d)}`,
            {
              retriable: true,
              cause: d,
            },
          );
        });
        return 'missing' as const;
      });
      // A promotion under a slot that continues (PostgreSQL 17+'s synced failover slot): what
      // this relay published from the old primary and recorded there may be past the synced
      // slot's position but not in the new primary's progress record (its WAL did not reach the
      // standby): those rows would stay 'pending' for ever. The table pass covers them (the
      // rule of store/timeline.ts: the new primary's own state decides; duplicates, not losses).
      if (state !== 'missing' && recovery === null && c.slotRecovery) {
        const now = await currentTimeline(client);
        const was = this.#timelines.current;
        if (was !== null && was !== now) {
          recovery = 'promoted';
          await markRecovery(client, store.progress, c.slot, recovery);
        }
      }
      if (state === 'missing' && recovery === null) {
        const recorded = await readProgress(client, store.progress, c.slot);
        recovery = this.#slotSeen || (recorded !== null && recorded !== '{}') ? 'dropped' : 'created';
        if (recovery === 'dropped' && !c.slotRecovery)
          throw new RelayError(
            ErrorCode.SLOT_INVALIDATED,
            `slot ${c.slot} is gone although this relay had streamed from it (dropped, or a failover to a server without it); events committed since its last position would be missed. --no-slot-recovery is set, so the relay stops instead of recovering from the table.`,
            { details: { slot: c.slot } },
          );
        if (c.slotRecovery) await markRecovery(client, store.progress, c.slot, recovery);
        else recovery = null;
      }
      const failover = c.slotFailover && (await failoverSlotsPossible(client));
      const slot = await ensureSlot(client, c.slot, { failover });
      this.#slotSeen = true;
      if (slot.created) this.#log.info({ recovery, failover }, 'replication slot created (pgoutput)');
      else if (failover) await turnOnSlotFailover(client, c.databaseUrl, c.slot, this.#log);
      return { ...slot, recovery };
    } finally {
      client.release();
    }
  }

  /**
   * Publishes from the table every row no progress record covers (slot-recovery.ts) before
   * streaming from a slot this relay created, then clears the recovery mark. A lost slot is
   * logged and counted; on a first start this finds only rows committed before the slot existed.
   * false = stopped meanwhile (the mark stays: the next start repeats the pass).
   */
  async #recover(recovery: string, d: Parameters<typeof publishUnrecorded>[0]): Promise<boolean> {
    const t0 = Date.now();
    if (recovery === 'promoted') return this.#recoverAfterPromotion(d, t0);
    const lost = recovery !== 'created';
    // The reason PostgreSQL gave, when this process saw the invalidation (not after a restart mid-recovery).
    const reason = recovery === 'invalidated' ? this.#lostReason : null;
    this.#lostReason = null;
    const why = reason ? `${recovery}: ${reason}` : recovery;
    if (lost) {
      this.metrics.slotRecoveries.inc();
      this.#log.warn(
        { recovery, ...(reason && { invalidation_reason: reason }) },
        `replication slot lost (${why}): recovering without a gap — a new slot exists; publishing from the table every row no progress record covers, in id order, then streaming from the new slot`,
      );
    }
    const r = await publishUnrecorded(d, this.#stop.signal);
    if (!r) return false;
    await markRecovery(d.store.db, d.store.progress, this.#c.slot, null);
    if (lost || r.published + r.failed + r.parked > 0)
      this.#log[lost ? 'warn' : 'info'](
        { recovery, ...(reason && { invalidation_reason: reason }), ...r, ms: Date.now() - t0 },
        lost
          ? `slot recovery done (${why}): ${r.published} rows published from the table (those the old slot had sent but not recorded are duplicates), ${r.failed} failed, ${r.parked} parked`
          : `published ${r.published} rows committed before the slot existed`,
      );
    return true;
  }

  /** The table pass after a promotion the slot survived (see #openSlot). */
  async #recoverAfterPromotion(d: Parameters<typeof publishUnrecorded>[0], t0: number): Promise<boolean> {
    this.#log.warn(
      { recovery: 'promoted' },
      "after a promotion the slot continued on the new primary: publishing from the table every row the new primary's progress record does not cover (outcomes recorded only on the old primary did not reach it), then streaming",
    );
    const r = await publishUnrecorded(d, this.#stop.signal);
    if (!r) return false;
    await markRecovery(d.store.db, d.store.progress, this.#c.slot, null);
    this.#log.warn(
      { recovery: 'promoted', ...r, ms: Date.now() - t0 },
      `table pass after the promotion done: ${r.published} rows published (duplicates where the old primary had published them), ${r.failed} failed, ${r.parked} parked`,
    );
    return true;
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
    this.#recorder?.tick();
  }
}
