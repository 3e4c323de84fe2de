import type pg from 'pg';
import { withPresetTable } from '../compat/facts.ts';
import { presetOf } from '../compat/presets.ts';
import type { Config } from '../config/load.ts';
import { deliveryModeOf } from '../delivery/choose.ts';
import type { DeliveryMode } from '../delivery/mode.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import { parseIdRanges } from '../lifecycle/id-ranges.ts';
import { outcomesOnRows, readProgress } from '../lifecycle/progress.ts';
import type { Logger } from '../observability/logger.ts';
import { RelayMetrics, type RelayState } from '../observability/metrics.ts';
import { createBatchTracer } from '../observability/tracing.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { checkDatabase } from '../replication/preflight.ts';
import { privilegeError } from '../replication/privileges.ts';
import { backoffDelay, sleep } from '../retry/backoff.ts';
import { OutageLog } from '../retry/outage-log.ts';
import { outagePolicy } from '../retry/retry.ts';
import { SerializedSink } from '../sinks/serialized-sink.ts';
import type { Sink } from '../sinks/sink.ts';
import { codeOf, isTransientSqlState, SqlState } from '../store/pg-errors.ts';
import { createPool } from '../store/pool.ts';
import { type RecordedState, relayStateTable } from '../store/relay-state.ts';
import { describeTimeline } from '../store/timeline.ts';
import { ReplicationSession, type SessionDeps } from '../stream/session.ts';
import { Sweeper } from '../sweeper/sweeper.ts';
import { Components, SinkComponent } from './components.ts';
import { LeaderLock, lockKeyText } from './leader-lock.ts';
import { canBePoison, describePoison, POISON_REPEATS, type Poison, PoisonDetector } from './poison.ts';
import { type OpenedSlot, SlotOpener } from './slot-opener.ts';
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
  /** The slot, opened at every round, and its recovery. */
  readonly #slots: SlotOpener;
  /** The current round: the leader lock it took (lost: the round ends), its slot, whether it streamed. */
  #round: { lost: AbortSignal | null; slot: OpenedSlot | null; streamed: boolean } = {
    lost: null,
    slot: null,
    streamed: false,
  };
  /** Sessions run so far (each after the first is a reconnect). */
  #sessions = 0;
  readonly #timelines: TimelineWatch;
  /** How batches are cut and committed (delivery/mode.ts): chosen here, once. */
  readonly #delivery: DeliveryMode;

  constructor(o: RelayOptions) {
    this.#c = o.config;
    this.#sink = new SerializedSink(o.sink);
    this.#log = o.log.child({ slot: o.config.slot });
    this.metrics = o.metrics ?? new RelayMetrics();
    this.#outages = new OutageLog(this.#log);
    this.#timelines = new TimelineWatch(this.#log, this.metrics);
    this.#delivery = deliveryModeOf(this.#c, this.#sink, this.#log, this.metrics, this.#timelines);
    this.#slots = new SlotOpener(this.#c, this.#log, this.metrics, this.#timelines, this.#stop.signal);
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

  /**
   * The relay's loop: one round after another until stopped. A round starts the components in
   * order (#components): the database pool, the preflight and leader lock, the relay-state row,
   * the slot, the sink, the delivery mode's sync, the blocked aggregates, the slot's recovery,
   * then the stream (with the sweeper) until it ends. A failed round waits (#roundFailed) and the
   * next one starts them again; at the end they stop in reverse order.
   */
  async #run(): Promise<void> {
    const stop = this.#stop.signal;
    const components = await this.#components();
    const ticker = setInterval(() => this.#tick(), 1000);
    this.#setState('starting');
    try {
      while (!stop.aborted) {
        this.#round = { lost: null, slot: null, streamed: false };
        const round = this.#round;
        try {
          // A round ends early when stopped or when the leader lock it took is lost.
          await components.start(() => stop.aborted || round.lost?.aborted === true);
        } catch (err) {
          await this.#roundFailed(err, round.streamed);
        }
      }
    } finally {
      clearInterval(ticker);
      this.#setState('stopping');
      await this.#recorder?.flush();
      await components.stop();
    }
  }

  /** The relay's components, in start order (the stop order is the reverse). */
  async #components(): Promise<Components> {
    const c = this.#c;
    const pool = createPool({ connectionString: c.databaseUrl, max: 3, application_name: 'pg-outbox-relay' });
    // The table preset (compat/): the outbox table, or Debezium's, whose failures go to a side table.
    const preset = presetOf(c, pool);
    const store = preset.store;
    const blocked = new BlockedAggregates();
    this.#blocked = blocked;
    // What the stream, the recovery and the sweeper share.
    const deps = {
      config: c,
      sink: this.#sink,
      store,
      blocked,
      log: this.#log,
      metrics: this.metrics,
      outages: this.#outages,
      tracer: await createBatchTracer(),
      delivery: this.#delivery,
    };
    // A fatal finding of the sweeper (the slot was invalidated) ends the session, then the relay.
    // The sweeper works over the preset's failed rows (the outbox table's, or a side table's).
    const sweeper = new Sweeper({
      config: c,
      sink: this.#sink,
      store: preset.sweepStore,
      blocked,
      log: this.#log,
      metrics: this.metrics,
      retryHeaders: this.#delivery.retryHeaders,
      onFatal: (e) => this.#session?.fail(e),
    });
    const lock = new LeaderLock({
      databaseUrl: c.databaseUrl,
      slot: c.slot,
      checkIntervalMs: c.standbyPollMs,
    });
    const recorder = this.#stateRecorder(pool, lock);
    this.#recorder = recorder;
    const round = () => this.#round;
    return new Components(
      [
        { name: 'database pool', start: async () => {}, stop: () => pool.end().catch(() => {}) },
        {
          name: 'leader lock',
          // Database checks, privileges included (a standby fails fast on them too), then the lock.
          start: async () => {
            await this.#preflight(pool, lock);
            round().lost = lock.lost;
          },
          stop: () => lock.release(),
        },
        {
          name: 'relay-state row',
          start: async () => {},
          stop: async () => {
            this.#setState('stopped');
            await recorder.flush();
            this.#recorder = null;
          },
        },
        // Only now, with every check passed (nothing left that ends the relay), the slot:
        // created as early as that, so no event committed meanwhile is missed.
        {
          name: 'slot',
          start: async () => {
            round().slot = await this.#slots.openSlot(pool, store);
          },
        },
        new SinkComponent(this.#sink, this.#outages, this.metrics, c.sinkStartTimeoutMs),
        // Exactly-once: what Kafka committed (read after fencing older producers) joins
        // PostgreSQL's progress record before anything is streamed or recovered.
        { name: 'delivery mode', start: () => this.#delivery.sync(store) },
        {
          name: 'blocked aggregates',
          // Which aggregates are blocked survives restarts where the preset keeps failures (the
          // table, or a side table): without it a later event of a failed aggregate would be
          // published before the failed one (strict ordering).
          start: async () => blocked.replace(await preset.sweepStore.heldAll()),
        },
        {
          name: 'slot recovery',
          // A slot this relay had to create (lost, dropped, or never there): the rows it cannot
          // stream — committed before it existed and recorded nowhere — come from the table. A
          // preset without a progress record has no table to recover from (the events may exist
          // only in the WAL). Stopped meanwhile: the round ends (the mark stays; the next start
          // repeats the pass).
          start: async () => {
            const recovery = round().slot!.recovery;
            if (preset.progressRecord && recovery) await this.#slots.recover(recovery, deps);
          },
        },
        {
          name: 'stream',
          start: () => this.#stream({ ...deps, preset: preset.stream }, preset.progressRecord, sweeper, lock),
        },
        // Stopped after every round's stream already; here only in case the stream never ran.
        { name: 'sweeper', start: async () => {}, stop: () => sweeper.stop() },
      ],
      this.#log,
    );
  }

  /** The relay-state row's writer (state-recorder.ts): the lock holder only writes it. */
  #stateRecorder(pool: pg.Pool, lock: LeaderLock): StateRecorder {
    const c = this.#c;
    return new StateRecorder({
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
  }

  /**
   * One replication session from the round's slot, until stopped (drained), the leader lock is
   * lost (drained like a stop), or the stream fails (thrown). The sweeper runs while it streams.
   */
  async #stream(
    deps: SessionDeps,
    progressRecord: boolean,
    sweeper: Sweeper,
    lock: LeaderLock,
  ): Promise<void> {
    const c = this.#c;
    const round = this.#round;
    const slot = round.slot!;
    // Rows the progress record covers are settled: the stream skips them (after a recovery,
    // rows the table pass published; after a crash, rows recorded but not yet confirmed).
    // Rows whose failure is on the row but not in the record (a crash between the two) are
    // the sweeper's: the stream skips them too.
    const { store } = deps;
    const pool = store.db;
    const recorded = progressRecord ? await readProgress(pool, store.progress, c.slot) : null;
    const onRows = progressRecord
      ? await outcomesOnRows(pool, store.table, store.progress, c.slot)
      : new Set<string>();
    const session = new ReplicationSession(
      deps,
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
    if (this.#sessions++ > 0) this.metrics.replicationReconnects.inc();
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
        AbortSignal.any([this.#stop.signal, lost]),
        () => {
          if (lost.aborted) return;
          round.streamed = true;
          // While poisoned the state stays 'waiting' until the position is passed (#tick).
          if (!this.#poison.poison) this.#setState('streaming');
          // Only the leader sweeps: a standby never retries, prunes or releases.
          sweeper.start();
        },
        (timeline) => {
          // The slot was opened, and a promotion looked for, on one server; the stream reached
          // another: a standby promoted in between (the pool and the replication connection are
          // two connections). Not observed: the next round's opening then sees the promotion and
          // runs its table pass, and no position read from the old primary is confirmed here.
          if (timeline !== slot.timeline) {
            this.#log.warn(
              { opened: slot.timeline, stream: timeline },
              `the database changed between the slot's opening (${describeTimeline(slot.timeline)}) and the stream's start (${describeTimeline(timeline)}): opening the slot again`,
            );
            session.fail(
              new RelayError(
                ErrorCode.TIMELINE_CHANGED,
                `the stream started on ${describeTimeline(timeline)}, the slot was opened on ${describeTimeline(slot.timeline)}`,
                { retriable: true },
              ),
            );
            return;
          }
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
  }

  /**
   * A round failed: decides what comes next — the next round after the right wait (a promotion,
   * standby, a lost slot to recover, back-off, a poison position), or the relay's end (thrown:
   * a fatal error, or exactly-once fenced).
   */
  async #roundFailed(err: unknown, streamed: boolean): Promise<void> {
    const c = this.#c;
    const stop = this.#stop.signal;
    const session = this.#session;
    if (session) this.#lastConfirmed = session.confirmedLsn;
    this.#tick(); // the session's last progress counts before it is judged
    // Poison is judged by the position alone (a long catch-up before the error is no progress).
    const moved = session !== null && this.#current !== null && session.confirmedLsn > this.#current.startLsn;
    this.#session = null;
    this.#current = null;
    const e = toRelayError(err);
    if (stop.aborted) return;
    if (e.code === ErrorCode.TIMELINE_CHANGED) {
      // A promotion: not an outage; the next round starts from the new primary's state
      // (after the usual back-off, which only a healthy session resets: never a hot loop).
      this.#timelines.dropped(e);
      await sleep(backoffDelay(outagePolicy(c), ++this.#attempt), stop);
      return;
    }
    // Exactly-once: fenced while the session ended for another reason: exit 75, not standby.
    const fatal = this.#delivery.fatal();
    if (fatal) throw fatal;
    // Lost while streaming (the sweeper saw wal_status = lost): the next round recovers it.
    if (e.code === ErrorCode.SLOT_INVALIDATED && c.slotRecovery) {
      this.#log.warn({ err: e.message }, 'replication slot lost while streaming; recovering it');
      return;
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
      return;
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
      return;
    }
    this.#setState('waiting', e.message, dependency);
    // Not retryUntilAborted: each round of this loop decides anew (standby, poison, lost
    // slot, back-off reset by progress); it waits with the same outage policy.
    await sleep(backoffDelay(outagePolicy(c), this.#attempt), stop);
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
      await checkDatabase(client, withPresetTable(this.#c)).catch((e) => {
        // A lost slot is the leader's to recover (SlotOpener.openSlot), unless recovery is off.
        if (!(isRelayError(e, ErrorCode.SLOT_INVALIDATED) && this.#c.slotRecovery)) throw e;
      });
      await this.#lead(lock);
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
    this.#recorder?.tick();
  }
}
