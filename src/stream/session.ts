import { type EventGate, OUTBOX_STREAM, type PresetSession, type StreamPreset } from '../compat/preset.ts';
import type { Config } from '../config/load.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { sortedRangesCover } from '../lifecycle/id-ranges.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { decideBatch } from '../outcome/decide.ts';
import type { Outcome, OutcomeDeps } from '../outcome/outcome.ts';
import { unroutable } from '../outcome/outcome.ts';
import { OutcomeRecorder } from '../outcome/record.ts';
import { AckTracker, type TxnEntry } from '../replication/ack-tracker.ts';
import { ReplicationConnection, walStartOf } from '../replication/connection.ts';
import { OutboxDecoder } from '../replication/decoder.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { sleep } from '../retry/backoff.ts';
import type { OutboxEvent } from '../route/event.ts';
import { type RouteConfig, RouteFailure, routeConfigOf, routeEvent } from '../route/router.ts';
import type { PublishOptions, Sink } from '../sinks/sink.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { Heartbeat } from './heartbeat.ts';
import { MessageQueue, type Pending } from './message-queue.ts';

/** What a batch's outcome needs (outcome/), and the whole configuration and store. */
export interface SessionDeps extends OutcomeDeps {
  config: Config;
  /** Serialized (SerializedSink): the sweeper publishes through it too. */
  sink: Sink;
  store: OutboxStore;
  /** The table preset's part in the stream (compat/preset.ts); the outbox table's when absent. */
  preset?: StreamPreset;
}

/** Ends a session on purpose (stop requested). */
export class SessionStopped extends Error {}

/**
 * One replication session: stream from the slot, route, publish, record progress, confirm.
 *
 * The acknowledgement rule (design.md §3) lives in AckTracker; this class feeds it:
 * begin/commit in stream order, one settle per event once the broker acknowledged it
 * and its outcome is recorded (outcome/: decideBatch, OutcomeRecorder), keepalive positions
 * when idle. Only tracker.confirmable is ever sent as the flush position.
 *
 * A session never recovers in place: any stream error ends it, unsettled work is
 * dropped, and the next session resumes from the server's confirmed_flush_lsn
 * (duplicates possible, losses not).
 */
export class ReplicationSession {
  readonly #d: SessionDeps;
  readonly #tracker: AckTracker;
  readonly #queue = new MessageQueue();
  readonly #decoder: OutboxDecoder;
  readonly #route: RouteConfig;
  readonly #preset: StreamPreset;
  /** The preset's part in this session (set when run() starts). */
  #presetSession: PresetSession = {};
  /** The preset's filter of the stream's events (the cutover from Debezium), or null. */
  #gate: EventGate | null = null;
  readonly #abort = new AbortController();
  #conn: ReplicationConnection | null = null;
  #received: Lsn;
  /** The last XLogData message (its bytes and where its pgoutput message starts), not yet in #received. */
  #lastData: Buffer | null = null;
  #lastStart = 0;
  #lastSentFlush: Lsn = -1n;
  /** performance.now() of the last status update sent; a pending one waits on #confirmTimer. */
  #lastStatusAt = Number.NEGATIVE_INFINITY;
  #confirmTimer: NodeJS.Timeout | null = null;
  #inflightBytes = 0;
  #paused = false;
  #warnedOtherTable = false;
  #lastProgressAt = Date.now();
  /** Messages received (data and keepalives): the silence check compares it tick to tick. */
  #receivedCount = 0;
  /** Commit LSN of the last transaction whose BEGIN arrived (names a poison position's transaction). */
  #lastBeginLsn: Lsn | null = null;
  /** The stream's timeline key (IDENTIFY_SYSTEM): outcomes are recorded only while the server is on it. */
  #timeline: string | null = null;
  readonly #recorder: OutcomeRecorder;
  /** Rejected by fail(): ends run() with that error (e.g. the sweeper found the slot lost). */
  #rejectFailed: (e: RelayError) => void = () => {};
  readonly #failed = new Promise<never>((_, reject) => {
    this.#rejectFailed = reject;
  });

  /**
   * The slot's progress record when the session started (sorted, disjoint [lo, hi) id ranges):
   * events it covers are settled — broker-acknowledged, or their failure is on the row — so the
   * stream skips them. After a crash between the progress write and the confirmation they come
   * again; after a lost-slot recovery, the new slot sends rows the table pass already published.
   */
  readonly #recorded: readonly [bigint, bigint][];

  /**
   * Rows whose failure outcome was written but not yet recorded when the session started (a crash
   * between the two statements): the sweeper owns them, so the stream skips them too — sending
   * one again would publish a 'failed' row behind the sweeper's back (progress.ts outcomesOnRows).
   */
  readonly #outcomesOnRows: ReadonlySet<string>;

  /** deps for deciding batches: exactly-once, the sink's publishes carry the stream's progress. */
  readonly #outcomeDeps: OutcomeDeps;

  /**
   * Exactly-once: a batch (one Kafka transaction) holds whole PostgreSQL transactions
   * (#takeTransactions); at-least-once takes batches regardless of commits.
   */
  readonly #wholeTransactions: boolean;
  /** Stopping: a transaction still arriving is not waited for. */
  #draining = false;

  constructor(
    deps: SessionDeps,
    startLsn: Lsn,
    recorded: readonly [bigint, bigint][] = [],
    outcomesOnRows: ReadonlySet<string> = new Set(),
  ) {
    this.#d = deps;
    const sink = deps.sink;
    // The stream's own attempts (a destination just found missing is refused without asking
    // again); exactly-once: its batches join the slot's Kafka progress.
    const opts: PublishOptions = sink.exactlyOnce ? { progress: true, stream: true } : { stream: true };
    this.#outcomeDeps = {
      ...deps,
      sink: {
        publish: (b) => sink.publish(b, opts),
        classify: (e) => sink.classify(e),
        ...(sink.destinationOf ? { destinationOf: (m) => sink.destinationOf!(m) } : {}),
      },
    };
    this.#wholeTransactions = sink.exactlyOnce !== undefined;
    this.#recorded = recorded;
    this.#outcomesOnRows = outcomesOnRows;
    this.#recorder = new OutcomeRecorder(deps);
    this.#tracker = new AckTracker(startLsn);
    this.#received = startLsn;
    const c = deps.config;
    this.#preset = deps.preset ?? OUTBOX_STREAM;
    this.#decoder = new OutboxDecoder(c.schema, c.table, this.#preset.columns);
    this.#route = routeConfigOf(c);
  }

  get confirmedLsn(): Lsn {
    return this.#tracker.confirmable;
  }

  get lastProgressAt(): number {
    return this.#lastProgressAt;
  }

  get lastBeginLsn(): Lsn | null {
    return this.#lastBeginLsn;
  }

  /** The timeline key of the server streamed from (store/timeline.ts); null before the stream started. */
  get timeline(): string | null {
    return this.#timeline;
  }

  /** Ends the session with `e` (not drained: for fatal conditions such as an invalidated slot). */
  fail(e: RelayError): void {
    this.#rejectFailed(e);
  }

  /**
   * Runs until `stop` aborts (then drains for up to shutdownTimeoutMs and returns) or the
   * stream fails (then throws a retriable DATABASE_UNAVAILABLE). `onStreaming` is called once the
   * server has started the stream (the slot is active).
   */
  async run(
    stop: AbortSignal,
    onStreaming: () => void,
    onTimeline: (key: string) => void = () => {},
  ): Promise<void> {
    const { config: c, log } = this.#d;
    const conn = await ReplicationConnection.open(c.databaseUrl).catch((e) => {
      throw new RelayError(
        ErrorCode.DATABASE_UNAVAILABLE,
        `replication connection failed: ${errorMessage(e)}`,
        {
          retriable: true,
          cause: e,
        },
      );
    });
    this.#conn = conn;
    const preset = await this.#preset.open(this.#d.store.db);
    this.#presetSession = preset;
    if (preset.route) this.#route.presetRoute = preset.route;
    this.#gate = preset.gate ?? null;
    const streamDone = conn.stream(
      {
        slot: c.slot,
        publication: c.publication,
        messages: c.heartbeatIntervalMs > 0,
        // Rows read by column name are read as PostgreSQL's text (columns-tuple.ts).
        text: this.#preset.columns !== null,
      },
      {
        onData: (data, start, end) => this.#onData(data, start, end),
        onKeepalive: (end, reply) => this.#onKeepalive(end, reply),
        onStart: ({ stableBuffers, unconverted, serverVersion, options, binary, timeline }) => {
          this.#decoder.keepViews = stableBuffers;
          this.#decoder.checkUtf8 = unconverted;
          this.#timeline = timeline;
          onTimeline(timeline);
          // What this server was asked for: said at every start, so a log shows it per version.
          const o = Object.fromEntries(options);
          log.info(
            {
              server_version: serverVersion,
              proto_version: Number(o.proto_version),
              binary,
              messages: !!o.messages,
            },
            `replication on PostgreSQL ${serverVersion ?? '(version unknown)'}: pgoutput proto_version ${o.proto_version}, ${binary ? 'binary' : 'text'} values${o.messages ? ', logical messages (heartbeats)' : ''}${unconverted ? ', SQL_ASCII unconverted' : ''}`,
          );
        },
        // Streaming once the server answered: the slot is active then (before, the relay said
        // 'streaming' — /readyz 200, the console's "active" — while the slot was not yet taken).
        onStreaming: () => {
          onStreaming();
          log.info({ lsn: formatLsn(this.#tracker.confirmable) }, 'streaming from the slot');
        },
      },
    );
    // Errors surface through the race below; this only marks the promise as handled.
    streamDone.catch(() => {});
    // The periodic update asks for a reply: the server answers with a keepalive carrying its
    // WAL end, which is how an idle outbox lets the slot advance while other tables churn
    // (otherwise keepalives come only every wal_sender_timeout / 2).
    const silence = { seen: -1, sinceMs: 0 };
    const timer = setInterval(() => {
      this.#sendStatus(true);
      this.#checkSilence(silence);
    }, c.statusIntervalMs);
    const publisher = this.#publishLoop();
    publisher.catch(() => {});
    this.#failed.catch(() => {});
    const heartbeat = new Heartbeat(this.#d.store.db, c.heartbeatIntervalMs, c.slot, log);
    heartbeat.start();

    const stopped = new Promise<'stop'>((resolve) => {
      if (stop.aborted) resolve('stop');
      stop.addEventListener('abort', () => resolve('stop'), { once: true });
    });
    try {
      const first = await Promise.race([
        streamDone.then(() => 'ended' as const),
        publisher.then(() => 'publisher-ended' as const),
        this.#failed,
        stopped,
      ]);
      if (first === 'stop') {
        await this.#drain(publisher);
        return;
      }
      throw new RelayError(ErrorCode.DATABASE_UNAVAILABLE, 'the server ended the replication stream', {
        retriable: true,
      });
    } catch (e) {
      if (e instanceof RelayError) throw e;
      throw classifyStreamError(e);
    } finally {
      clearInterval(timer);
      if (this.#confirmTimer) clearTimeout(this.#confirmTimer);
      await heartbeat.stop();
      this.#abort.abort();
      await publisher.catch(() => {});
      await conn.close();
    }
  }

  /**
   * Every status tick asks the server for a reply; a server that sent nothing for
   * --replication-timeout-ms while the socket was read is gone (a host lost without a reset, as
   * at a failover), however long TCP would keep the connection: the session ends, as PostgreSQL's
   * walreceiver does after wal_receiver_timeout. A paused socket is not read: no silence then.
   */
  #checkSilence(s: { seen: number; sinceMs: number }): void {
    const limit = this.#d.config.replicationTimeoutMs;
    if (limit <= 0) return;
    const now = performance.now();
    if (this.#paused || s.seen !== this.#receivedCount) {
      s.seen = this.#receivedCount;
      s.sinceMs = now;
      return;
    }
    if (now - s.sinceMs < limit) return;
    this.fail(
      new RelayError(
        ErrorCode.DATABASE_UNAVAILABLE,
        `the server sent nothing on the replication connection for ${Math.round((now - s.sinceMs) / 1000)} s although asked to reply every ${this.#d.config.statusIntervalMs / 1000} s (--replication-timeout-ms): the connection is taken as dead`,
        { retriable: true },
      ),
    );
  }

  /** Stop reading, let in-flight events settle (bounded), confirm what settled. */
  async #drain(publisher: Promise<void>): Promise<void> {
    const { config: c, log } = this.#d;
    this.#conn?.pause();
    this.#draining = true;
    this.#queue.nudge();
    // A publisher that ended for good (exactly-once: fenced) settles nothing more: no wait, and
    // its error ends the relay after the drain.
    let fatal: RelayError | null = null;
    let ended = false;
    void publisher.then(
      () => {
        ended = true;
      },
      (e: unknown) => {
        ended = true;
        if (isRelayError(e) && !e.retriable) fatal = e;
      },
    );
    const deadline = Date.now() + c.shutdownTimeoutMs;
    while (this.#tracker.unsettled > 0 && !ended && Date.now() < deadline) {
      await sleep(20);
    }
    if (this.#tracker.unsettled > 0) {
      log.warn(
        { unsettled: this.#tracker.unsettled },
        'shutdown timeout: unsettled events will be sent again on restart',
      );
    }
    this.#abort.abort();
    await publisher.catch(() => {});
    this.#sendStatus(false);
    log.info({ lsn: formatLsn(this.#tracker.confirmable) }, 'final position confirmed');
    this.#presetSession.end?.(log);
    if (fatal) throw fatal;
  }

  /**
   * The replication callback. Nothing may escape it: an exception here would leave the pg
   * connection's event handler and end the process, and the slot would send the same data again
   * after the restart (a crash loop). A row's values cannot throw (routeEvent is the per-event
   * exception boundary); anything else ends the session with an error.
   */
  #onData(data: Buffer, start: number, end: number): void {
    try {
      this.#onMessage(data, start, end);
    } catch (e) {
      this.fail(
        new RelayError(
          ErrorCode.DATABASE_UNAVAILABLE,
          `could not process the replication message at ${formatLsn(walStartOf(data, start))}: ${errorMessage(e)}`,
          { retriable: true, cause: e },
        ),
      );
    }
  }

  #onMessage(data: Buffer, start: number, end: number): void {
    this.#receivedCount++;
    // The position received is read from the last message only when a status update reports it.
    this.#lastData = data;
    this.#lastStart = start;
    const d = this.#decoder.decode(data, start, end);
    switch (d.kind) {
      case 'begin':
        this.#gate?.begin(d.commitLsn);
        this.#lastBeginLsn = d.commitLsn;
        this.#tracker.begin();
        return;
      case 'commit':
        if (this.#gate) for (const e of this.#gate.commit()) this.#onEvent(e);
        this.#tracker.commit(d.endLsn);
        if (this.#wholeTransactions) this.#queue.nudge();
        this.#maybeConfirm();
        return;
      case 'event':
        if (this.#gate) {
          for (const e of this.#gate.event(d.event, BigInt(d.event.id))) this.#onEvent(e);
        } else this.#onEvent(d.event);
        return;
      case 'message':
        // A non-transactional message (the heartbeat, or anyone's) outside a transaction is a
        // position like a keepalive's: settled, confirmable behind what is in flight, never
        // published. Transactional ones belong to their transaction and are ignored.
        if (!d.transactional) {
          this.#tracker.noteServerPosition(d.lsn);
          this.#maybeConfirm();
        }
        return;
      case 'other-table':
        if (!this.#warnedOtherTable) {
          this.#warnedOtherTable = true;
          this.#d.log.warn(
            { table: d.table },
            'the publication sends rows of another table; they are ignored (fix the publication)',
          );
        }
        return;
      default:
        return;
    }
  }

  /** A row of the outbox table: queued in its transaction, routed (never throws). */
  #onEvent(event: OutboxEvent): void {
    // Settled before (recorded, or its failure is on the row): not an event of its transaction.
    if (sortedRangesCover(this.#recorded, event.id)) return;
    if (this.#outcomesOnRows.size > 0 && this.#outcomesOnRows.has(event.id)) return;
    const txn = this.#tracker.addEvent();
    this.#presetSession.queued?.(event);
    const routed = routeEvent(event, this.#route);
    // Unroutable (a bad row, an illegal topic): permanent for this event; recorded 'failed' like a broker refusal.
    const p: Pending =
      routed instanceof RouteFailure ? { ...unroutable(event, routed), txn } : { message: routed, txn };
    this.#queue.push(p);
    this.#inflightBytes += p.message.bytes;
    this.#applyBackpressure();
  }

  #onKeepalive(walEnd: Lsn, replyRequested: boolean): void {
    this.#receivedCount++;
    if (walEnd > this.#received) this.#received = walEnd;
    this.#tracker.noteServerPosition(walEnd);
    if (replyRequested) this.#sendStatus(false);
    else this.#maybeConfirm();
  }

  #applyBackpressure(): void {
    const c = this.#d.config;
    const over = this.#tracker.unsettled >= c.maxInflightEvents || this.#inflightBytes >= c.maxInflightBytes;
    if (over && !this.#paused) {
      this.#paused = true;
      this.#conn?.pause();
      this.#queue.nudge();
    } else if (
      this.#paused &&
      this.#tracker.unsettled <= c.maxInflightEvents / 2 &&
      this.#inflightBytes <= c.maxInflightBytes / 2
    ) {
      this.#paused = false;
      this.#conn?.resume();
    }
  }

  /**
   * Sends the confirmable position if it moved — at most once per CONFIRM_INTERVAL_MS: a live
   * stream settles a batch per event or two, and a status update per batch was a socket write
   * (and the server's work to read it) per event. A position held back goes out by a timer.
   */
  #maybeConfirm(): void {
    if (this.#tracker.confirmable === this.#lastSentFlush || this.#confirmTimer) return;
    const wait = this.#lastStatusAt + CONFIRM_INTERVAL_MS - performance.now();
    if (wait <= 0) this.#sendStatus(false);
    else
      this.#confirmTimer = setTimeout(() => {
        this.#confirmTimer = null;
        this.#maybeConfirm();
      }, wait);
  }

  #sendStatus(replyRequested: boolean): void {
    const conn = this.#conn;
    if (!conn) return;
    const flush = this.#tracker.confirmable;
    if (this.#lastData) {
      const w = walStartOf(this.#lastData, this.#lastStart);
      if (w > this.#received) this.#received = w;
      this.#lastData = null;
    }
    try {
      conn.sendStatus(this.#received, flush, replyRequested);
    } catch {
      return; // the stream's own error ends the session
    }
    this.#lastStatusAt = performance.now();
    if (flush !== this.#lastSentFlush) {
      this.#lastSentFlush = flush;
      this.#d.metrics.confirmedLsn.set(Number(flush));
    }
  }

  async #publishLoop(): Promise<void> {
    const c = this.#d.config;
    const signal = this.#abort.signal;
    /** Published batches whose outcomes wait for the recorder, in stream order. */
    const published: { batch: Pending[]; outcomes: Outcome[] }[] = [];
    let recorder: Promise<void> | null = null;
    // Records while the next batches are published; settles only once the record is durable.
    // Batches published meanwhile are recorded together: one progress statement for all of them.
    const record = async (): Promise<void> => {
      // Also when aborted: #recordAndSettle then writes nothing but gives up the batch's decisions.
      while (published.length > 0) {
        // Small batches (a live stream's, an event or two each): wait a moment for more, so that
        // one statement records many. Only the slot's confirmation waits for it (the broker has
        // the events); not while reading is paused, which only settling lifts.
        if (!signal.aborted && !this.#paused && eventCount(published) * 2 < c.batchSize)
          await sleep(PROGRESS_LINGER_MS, signal);
        const ready = published.splice(0, published.length);
        const batch = ready.length === 1 ? ready[0]!.batch : ready.flatMap((r) => r.batch);
        const outcomes = ready.length === 1 ? ready[0]!.outcomes : ready.flatMap((r) => r.outcomes);
        await this.#recordAndSettle(batch, outcomes, signal);
      }
      recorder = null;
    };
    // A recorder that cannot go on (the timeline changed under it) ends the session with its error.
    const recordOrFail = () =>
      record().catch((e: unknown) => {
        recorder = null;
        this.fail(isRelayError(e) ? e : classifyStreamError(e));
      });
    let busy = false;
    while (!signal.aborted) {
      // Woken by the next push or by the abort: no timer per wait (a live stream waits per commit).
      if (this.#queue.length === 0) await this.#queue.wait(1, Number.POSITIVE_INFINITY, signal);
      if (signal.aborted) break;
      if (this.#queue.length === 0) continue;
      // Adaptive linger: an idle stream's events go out at once (a lone commit is not held back
      // for lingerMs); while the stream is busy — the last batch was at least half full — wait up
      // to lingerMs for a full one. Never while reading is paused (nothing more comes until this
      // one settles). Batches also fill by themselves while one is in flight.
      if (busy && c.lingerMs > 0 && !this.#paused) await this.#queue.wait(c.batchSize, c.lingerMs, signal);
      const batch = this.#wholeTransactions
        ? await this.#takeTransactions(signal)
        : this.#queue.take(c.batchSize, c.batchBytes);
      if (batch.length === 0) continue;
      busy = batch.length * 2 >= c.batchSize || batchBytes(batch) * 2 >= c.batchBytes;
      const outcomes = await decideBatch(this.#outcomeDeps, batch, signal);
      if (!outcomes) break;
      this.#lastProgressAt = Date.now();
      published.push({ batch, outcomes });
      recorder ??= recordOrFail();
    }
    await recorder;
  }

  /**
   * Exactly-once: the next batch, of whole PostgreSQL transactions (MessageQueue.takeTransactions).
   * A transaction still arriving is waited for — its commit, or enough of it to fill a batch —
   * but never wedges the stream: it is split when reading is paused (nothing more arrives until a
   * batch settles), when stopping, or once it has been waited for OPEN_TRANSACTION_WAIT_MS.
   */
  async #takeTransactions(signal: AbortSignal): Promise<Pending[]> {
    const c = this.#d.config;
    const deadline = performance.now() + OPEN_TRANSACTION_WAIT_MS;
    for (;;) {
      const late = performance.now() >= deadline;
      const split = late || this.#paused || this.#draining;
      // One Kafka transaction of up to --kafka-transaction-batches batches (the sink sends each
      // batch's worth as one produce request inside it), and at most half the in-flight window:
      // the next transaction is read while this one is in flight (a transaction filling the
      // window would pause reading, and the next one would be only what fitted beside it).
      const k = c.kafkaTransactionBatches;
      const size = Math.max(c.batchSize, Math.min(c.batchSize * k, Math.floor(c.maxInflightEvents / 2)));
      const bytes = Math.max(c.batchBytes, Math.min(c.batchBytes * k, Math.floor(c.maxInflightBytes / 2)));
      const batch = this.#queue.takeTransactions(size, bytes, split);
      if (batch.length > 0 || split || signal.aborted) return batch;
      await this.#queue.waitForMore(deadline - performance.now(), signal);
      // The timer can fire before data already on the socket is read (a stalled event loop runs
      // timers first): one turn of the loop reads it before the transaction is called late.
      if (performance.now() >= deadline) await new Promise((r) => setImmediate(r));
    }
  }

  /** Records the batch's outcomes (outcome/record.ts), then settles it: only what is durable is confirmed. */
  async #recordAndSettle(batch: Pending[], outcomes: Outcome[], signal: AbortSignal): Promise<void> {
    // The timeline is known before any event arrives (onStart precedes START_REPLICATION).
    if (!(await this.#recorder.record(batch, outcomes, signal, this.#timeline!))) return; // aborted: nothing of this batch settles
    // Exactly-once: PostgreSQL holds these ids now; Kafka's progress record may drop them.
    this.#d.sink.exactlyOnce?.recorded(batch.map((p) => p.message.event.id));
    // A transaction's events are settled together (they are consecutive in a batch).
    let txn: TxnEntry | null = null;
    let ofTxn = 0;
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      if (p.txn !== txn) {
        if (txn) this.#tracker.settle(txn, ofTxn);
        txn = p.txn;
        ofTxn = 0;
      }
      ofTxn++;
      this.#inflightBytes -= p.message.bytes;
    }
    if (txn) this.#tracker.settle(txn, ofTxn);
    // Updated per settled batch, not per decoded event (the per-event path stays lean).
    this.#d.metrics.inflightEvents.set(this.#tracker.unsettled);
    this.#applyBackpressure();
    this.#maybeConfirm();
  }
}

function eventCount(batches: readonly { batch: readonly Pending[] }[]): number {
  let n = 0;
  for (const b of batches) n += b.batch.length;
  return n;
}

/**
 * How long the recorder waits for more small batches before it writes their progress, and the
 * shortest time between two status updates: at 2,000 single-row commits/s, one progress
 * statement and one status update per 20 events instead of per event. The slot is confirmed at
 * most this much later; nothing reaches the broker later.
 */
const PROGRESS_LINGER_MS = 10;
const CONFIRM_INTERVAL_MS = 10;

/**
 * Exactly-once: how long a batch waits for the rest of a PostgreSQL transaction whose first
 * events arrived (its commit, or enough events to fill the batch) before that part goes out as a
 * Kafka transaction of its own. pgoutput sends a transaction only once it committed, so the rest
 * is normally milliseconds behind; only the server's decoding of a large transaction with other
 * tables' changes between its outbox rows takes longer.
 */
const OPEN_TRANSACTION_WAIT_MS = 1000;

function batchBytes(batch: readonly Pending[]): number {
  let n = 0;
  for (const p of batch) n += p.message.bytes;
  return n;
}

function classifyStreamError(e: unknown): RelayError {
  // object_in_use: the slot is active for another PID (another relay took it).
  if (sqlStateOf(e) === SqlState.OBJECT_IN_USE) {
    return new RelayError(ErrorCode.SLOT_ACTIVE_ELSEWHERE, errorMessage(e), { retriable: true, cause: e });
  }
  // undefined_object: the slot was dropped under us; the next session's #openSlot recovers it (relay.ts).
  return new RelayError(ErrorCode.DATABASE_UNAVAILABLE, `replication stream failed: ${errorMessage(e)}`, {
    retriable: true,
    cause: e,
  });
}
