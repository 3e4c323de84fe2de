import { type EventGate, OUTBOX_STREAM, type PresetSession, type StreamPreset } from '../compat/preset.ts';
import type { Config } from '../config/load.ts';
import type { DeliveryMode } from '../delivery/mode.ts';
import { ErrorCode, errorMessage, isRelayError, RelayError } from '../errors.ts';
import { sortedRangesCover } from '../lifecycle/id-ranges.ts';
import type { OutboxStore } from '../lifecycle/outbox-store.ts';
import { decideBatch } from '../outcome/decide.ts';
import type { Outcome, OutcomeDeps } from '../outcome/outcome.ts';
import { unroutable } from '../outcome/outcome.ts';
import { OutcomeRecorder } from '../outcome/record.ts';
import { AckTracker } from '../replication/ack-tracker.ts';
import { ReplicationConnection, walStartOf } from '../replication/connection.ts';
import { OutboxDecoder } from '../replication/decoder.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { sleep } from '../retry/backoff.ts';
import type { OutboxEvent } from '../route/event.ts';
import { type RouteConfig, RouteFailure, routeConfigOf, routeEvent } from '../route/router.ts';
import type { Sink } from '../sinks/sink.ts';
import { Heartbeat } from './heartbeat.ts';
import { MessageQueue, type Pending } from './message-queue.ts';
import { RecordBehind, settleBatch } from './record-behind.ts';
import { logStreamStart } from './start-log.ts';
import { StatusUpdates } from './status-updates.ts';
import { classifyStreamError, SilenceCheck } from './stream-errors.ts';

/** What a batch's outcome needs (outcome/), and the whole configuration and store. */
export interface SessionDeps extends OutcomeDeps {
  config: Config;
  /** Serialized (SerializedSink): the sweeper publishes through it too. */
  sink: Sink;
  store: OutboxStore;
  /** How batches are cut and committed (delivery/mode.ts), chosen at start. */
  delivery: DeliveryMode;
  /** The table preset's part in the stream (compat/preset.ts); the outbox table's when absent. */
  preset?: StreamPreset;
}

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
  /** Aborted when a stop starts draining: the recorder lingers no more (the last batches are recorded at once). */
  readonly #noLinger = new AbortController();
  #conn: ReplicationConnection | null = null;
  readonly #status: StatusUpdates;
  #inflightBytes = 0;
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

  /** deps for deciding batches: the sink as the delivery mode publishes the stream's batches. */
  readonly #outcomeDeps: OutcomeDeps;

  /** Reading paused (backpressure); stopping (a transaction still arriving is not waited for). */
  readonly #flow = { paused: false, draining: false };

  constructor(
    deps: SessionDeps,
    startLsn: Lsn,
    recorded: readonly [bigint, bigint][] = [],
    outcomesOnRows: ReadonlySet<string> = new Set(),
  ) {
    this.#d = deps;
    this.#outcomeDeps = { ...deps, sink: deps.delivery.streamSink(deps.sink) };
    this.#recorded = recorded;
    this.#outcomesOnRows = outcomesOnRows;
    this.#recorder = new OutcomeRecorder(deps);
    this.#tracker = new AckTracker(startLsn);
    this.#status = new StatusUpdates(this.#tracker, deps.metrics, startLsn);
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
      const m = `replication connection failed: ${errorMessage(e)}`;
      throw new RelayError(ErrorCode.DATABASE_UNAVAILABLE, m, { retriable: true, cause: e });
    });
    this.#conn = conn;
    this.#status.attach(conn);
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
        onStart: (start) => {
          this.#decoder.keepViews = start.stableBuffers;
          this.#decoder.checkUtf8 = start.unconverted;
          this.#timeline = start.timeline;
          onTimeline(start.timeline);
          logStreamStart(log, start);
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
    const silence = new SilenceCheck(c.replicationTimeoutMs, c.statusIntervalMs);
    const timer = setInterval(() => {
      this.#status.send(true);
      const dead = silence.tick(this.#receivedCount, this.#flow.paused);
      if (dead) this.fail(dead);
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
      this.#status.stop();
      await heartbeat.stop();
      this.#abort.abort();
      await publisher.catch(() => {});
      await conn.close();
    }
  }

  /** Stop reading, let in-flight events settle (bounded), confirm what settled. */
  async #drain(publisher: Promise<void>): Promise<void> {
    const { config: c, log } = this.#d;
    this.#conn?.pause();
    this.#flow.draining = true;
    this.#noLinger.abort();
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
    this.#status.send(false);
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
    this.#status.sawData(data, start);
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
        this.#d.delivery.committed(this.#queue);
        this.#status.maybeConfirm();
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
          this.#status.maybeConfirm();
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
    this.#status.sawServerEnd(walEnd);
    this.#tracker.noteServerPosition(walEnd);
    if (replyRequested) this.#status.send(false);
    else this.#status.maybeConfirm();
  }

  #applyBackpressure(): void {
    const c = this.#d.config;
    const over = this.#tracker.unsettled >= c.maxInflightEvents || this.#inflightBytes >= c.maxInflightBytes;
    if (over && !this.#flow.paused) {
      this.#flow.paused = true;
      this.#conn?.pause();
      this.#queue.nudge();
    } else if (
      this.#flow.paused &&
      // A graceful stop reads no more (#drain paused the socket): settling events must not resume it.
      !this.#flow.draining &&
      this.#tracker.unsettled <= c.maxInflightEvents / 2 &&
      this.#inflightBytes <= c.maxInflightBytes / 2
    ) {
      this.#flow.paused = false;
      this.#conn?.resume();
    }
  }

  async #publishLoop(): Promise<void> {
    const c = this.#d.config;
    const signal = this.#abort.signal;
    // Records while the next batches are published; settles only once the record is durable.
    const behind = new RecordBehind({
      batchSize: c.batchSize,
      signal: AbortSignal.any([signal, this.#noLinger.signal]),
      paused: () => this.#flow.paused,
      record: (batch, outcomes) => this.#recordAndSettle(batch, outcomes, signal),
      fail: (e) => this.fail(isRelayError(e) ? e : classifyStreamError(e)),
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
      if (busy && c.lingerMs > 0 && !this.#flow.paused)
        await this.#queue.wait(c.batchSize, c.lingerMs, signal);
      const batch = await this.#d.delivery.nextBatch(this.#queue, this.#flow, signal);
      if (batch.length === 0) continue;
      busy = batch.length * 2 >= c.batchSize || batchBytes(batch) * 2 >= c.batchBytes;
      const outcomes = await decideBatch(this.#outcomeDeps, batch, signal);
      if (!outcomes) break;
      this.#lastProgressAt = Date.now();
      behind.push(batch, outcomes);
    }
    await behind.done();
  }

  /** Records the batch's outcomes (outcome/record.ts), then settles it: only what is durable is confirmed. */
  async #recordAndSettle(batch: Pending[], outcomes: Outcome[], signal: AbortSignal): Promise<void> {
    // The timeline is known before any event arrives (onStart precedes START_REPLICATION).
    if (!(await this.#recorder.record(batch, outcomes, signal, this.#timeline!))) return; // aborted: nothing of this batch settles
    this.#d.delivery.recorded(batch);
    this.#inflightBytes -= settleBatch(this.#tracker, batch);
    // Updated per settled batch, not per decoded event (the per-event path stays lean).
    this.#d.metrics.inflightEvents.set(this.#tracker.unsettled);
    this.#applyBackpressure();
    this.#status.maybeConfirm();
  }
}

function batchBytes(batch: readonly Pending[]): number {
  let n = 0;
  for (const p of batch) n += p.message.bytes;
  return n;
}
