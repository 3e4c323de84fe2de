import type { Config } from '../config/load.ts';
import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import { type BlockedAggregates, hasAggregate } from '../lifecycle/blocked-aggregates.ts';
import { failureBackoff, formatError, logOutcome } from '../lifecycle/failure-policy.ts';
import type { FailedRow, OutboxStore, StreamedRow } from '../lifecycle/outbox-store.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import type { BatchTracer } from '../observability/tracing.ts';
import { AckTracker, type TxnEntry } from '../replication/ack-tracker.ts';
import { ReplicationConnection, walStartOf } from '../replication/connection.ts';
import { OutboxDecoder } from '../replication/decoder.ts';
import { formatLsn, type Lsn } from '../replication/lsn.ts';
import { backoffDelay, sleep } from '../retry/backoff.ts';
import type { OutageLog } from '../retry/outage-log.ts';
import type { OutboundMessage } from '../route/event.ts';
import { type RouteConfig, RouteFailure, routeConfigOf, routeEvent } from '../route/router.ts';
import { type Classified, TOPIC_LEVEL_KAFKA_TYPES } from '../sinks/kafka-errors.ts';
import type { Sink } from '../sinks/sink.ts';
import { Heartbeat } from './heartbeat.ts';
import { MessageQueue, type Pending } from './message-queue.ts';

export interface SessionDeps {
  config: Config;
  /** Serialized (SerializedSink): the sweeper publishes through it too. */
  sink: Sink;
  store: OutboxStore;
  /** Strict ordering's blocked aggregates, shared with the sweeper. */
  blocked: BlockedAggregates;
  /** One span per publish attempt when OpenTelemetry is present (no-op otherwise). */
  tracer?: BatchTracer;
  log: Logger;
  metrics: RelayMetrics;
  outages: OutageLog;
}

/** Ends a session on purpose (stop requested). */
export class SessionStopped extends Error {}

/**
 * One replication session: stream from the slot, route, publish, record progress, confirm.
 *
 * The acknowledgement rule (design.md §3) lives in AckTracker; this class feeds it:
 * begin/commit in stream order, one settle per event once the broker acknowledged it
 * and its outcome is recorded (lifecycle/progress.ts), keepalive positions when idle. Only tracker.confirmable is
 * ever sent as the flush position.
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
  /** Commit LSN of the last transaction whose BEGIN arrived (names a poison position's transaction). */
  #lastBeginLsn: Lsn | null = null;
  /** Since when outcome statements have been waiting for rows to become visible; null = not waiting. */
  #invisibleSince: number | null = null;
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
  readonly #recordedEnd: bigint;

  /**
   * Rows whose failure outcome was written but not yet recorded when the session started (a crash
   * between the two statements): the sweeper owns them, so the stream skips them too — sending
   * one again would publish a 'failed' row behind the sweeper's back (progress.ts outcomesOnRows).
   */
  readonly #outcomesOnRows: ReadonlySet<string>;

  constructor(
    deps: SessionDeps,
    startLsn: Lsn,
    recorded: readonly [bigint, bigint][] = [],
    outcomesOnRows: ReadonlySet<string> = new Set(),
  ) {
    this.#d = deps;
    this.#recorded = recorded;
    this.#outcomesOnRows = outcomesOnRows;
    this.#recordedEnd = recorded.length ? recorded[recorded.length - 1]![1] : 0n;
    this.#tracker = new AckTracker(startLsn);
    this.#received = startLsn;
    this.#decoder = new OutboxDecoder(deps.config.schema, deps.config.table);
    this.#route = routeConfigOf(deps.config);
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

  /** Ends the session with `e` (not drained: for fatal conditions such as an invalidated slot). */
  fail(e: RelayError): void {
    this.#rejectFailed(e);
  }

  /**
   * Runs until `stop` aborts (then drains for up to shutdownTimeoutMs and returns) or the
   * stream fails (then throws a retriable DATABASE_UNAVAILABLE).
   */
  async run(stop: AbortSignal, onStreaming: () => void): Promise<void> {
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
    const streamDone = conn.stream(
      { slot: c.slot, publication: c.publication, messages: c.heartbeatIntervalMs > 0 },
      {
        onData: (data, start, end) => this.#onData(data, start, end),
        onKeepalive: (end, reply) => this.#onKeepalive(end, reply),
        onStart: ({ stableBuffers }) => {
          this.#decoder.keepViews = stableBuffers;
        },
      },
    );
    // Errors surface through the race below; this only marks the promise as handled.
    streamDone.catch(() => {});
    // The periodic update asks for a reply: the server answers with a keepalive carrying its
    // WAL end, which is how an idle outbox lets the slot advance while other tables churn
    // (otherwise keepalives come only every wal_sender_timeout / 2).
    const timer = setInterval(() => this.#sendStatus(true), c.statusIntervalMs);
    const publisher = this.#publishLoop();
    publisher.catch(() => {});
    this.#failed.catch(() => {});
    const heartbeat = new Heartbeat(this.#d.store.db, c.heartbeatIntervalMs, c.slot, log);
    heartbeat.start();
    onStreaming();
    log.info({ lsn: formatLsn(this.#tracker.confirmable) }, 'streaming from the slot');

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

  /** Stop reading, let in-flight events settle (bounded), confirm what settled. */
  async #drain(publisher: Promise<void>): Promise<void> {
    const { config: c, log } = this.#d;
    this.#conn?.pause();
    const deadline = Date.now() + c.shutdownTimeoutMs;
    while (this.#tracker.unsettled > 0 && Date.now() < deadline) {
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
    // The position received is read from the last message only when a status update reports it.
    this.#lastData = data;
    this.#lastStart = start;
    const d = this.#decoder.decode(data, start, end);
    switch (d.kind) {
      case 'begin':
        this.#lastBeginLsn = d.commitLsn;
        this.#tracker.begin();
        return;
      case 'commit':
        this.#tracker.commit(d.endLsn);
        this.#maybeConfirm();
        return;
      case 'event': {
        // Settled before (recorded, or its failure is on the row): not an event of its transaction.
        if (this.#isRecorded(d.event.id)) return;
        if (this.#outcomesOnRows.size > 0 && this.#outcomesOnRows.has(d.event.id)) return;
        const txn = this.#tracker.addEvent();
        const routed = routeEvent(d.event, this.#route);
        // Unroutable (a bad row, an illegal topic): permanent for this event; recorded 'failed' like a broker refusal.
        const message: Pending['message'] =
          routed instanceof RouteFailure
            ? {
                topic: '',
                key: '',
                value: null,
                headers: {},
                timestamp: 0,
                event: d.event,
                bytes: 0,
              }
            : routed;
        this.#queue.push(
          routed instanceof RouteFailure
            ? {
                message,
                txn,
                routeError: { class: 'permanent', reason: routed.reason, message: routed.error },
              }
            : { message, txn },
        );
        this.#inflightBytes += message.bytes;
        this.#applyBackpressure();
        return;
      }
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

  /** Whether the progress record covered this id when the session started (binary search). */
  #isRecorded(id: string): boolean {
    if (this.#recorded.length === 0) return false;
    let x: bigint;
    try {
      x = BigInt(id);
    } catch {
      return false; // not an id the record can cover: the event goes its normal way
    }
    if (x >= this.#recordedEnd) return false;
    let lo = 0;
    let hi = this.#recorded.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const [a, b] = this.#recorded[mid]!;
      if (x < a) hi = mid - 1;
      else if (x >= b) lo = mid + 1;
      else return true;
    }
    return false;
  }

  #onKeepalive(walEnd: Lsn, replyRequested: boolean): void {
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
    let busy = false;
    while (!signal.aborted) {
      if (this.#queue.length === 0) await this.#queue.wait(1, 1000, signal);
      if (signal.aborted) break;
      if (this.#queue.length === 0) continue;
      // Adaptive linger: an idle stream's events go out at once (a lone commit is not held back
      // for lingerMs); while the stream is busy — the last batch was at least half full — wait up
      // to lingerMs for a full one. Never while reading is paused (nothing more comes until this
      // one settles). Batches also fill by themselves while one is in flight.
      if (busy && c.lingerMs > 0 && !this.#paused) await this.#queue.wait(c.batchSize, c.lingerMs, signal);
      const batch = this.#queue.take(c.batchSize, c.batchBytes);
      if (batch.length === 0) continue;
      busy = batch.length * 2 >= c.batchSize || batchBytes(batch) * 2 >= c.batchBytes;
      const outcomes = await this.#publish(batch, signal);
      if (!outcomes) break;
      this.#lastProgressAt = Date.now();
      published.push({ batch, outcomes });
      recorder ??= record();
    }
    await recorder;
  }

  /**
   * Decides every event of the batch, in stream order: published, failed (permanent for
   * that event) or parked (strict ordering, behind a failed event of its aggregate).
   * Transient failures are retried forever with back-off. null = aborted.
   *
   * The decision is complete before the next batch is sent, so a later event of an
   * aggregate can never overtake the failure of an earlier one.
   */
  async #publish(batch: Pending[], signal: AbortSignal): Promise<Outcome[] | null> {
    const { config: c, blocked } = this.#d;
    const strict = c.ordering === 'strict';
    const outcomes: Outcome[] = new Array(batch.length);
    // Indexed loops: this runs once per batch, too seldom for V8 to optimize an iterator away.
    // toSend: the indexes sent — all of the batch (null) unless some event is decided before
    // sending (a blocked aggregate's, an unroutable row).
    let toSend: number[] | null = null;
    if (blocked.size > 0 || batch.some((p) => p.routeError !== undefined)) {
      toSend = [];
      for (let i = 0; i < batch.length; i++) {
        const p = batch[i]!;
        const e = p.message.event;
        if (strict && hasAggregate(e) && blocked.has(e.aggregateType, e.aggregateId)) {
          outcomes[i] = PARKED;
          blocked.parkDecided(e.aggregateType, e.aggregateId);
        } else if (p.routeError !== undefined) {
          outcomes[i] = { failed: p.routeError };
          if (strict && hasAggregate(e)) blocked.blockDecided(e.aggregateType, e.aggregateId);
        } else {
          toSend.push(i);
        }
      }
      if (toSend.length === 0) return outcomes;
    }
    const messages: OutboundMessage[] = new Array(toSend ? toSend.length : batch.length);
    for (let k = 0; k < messages.length; k++) messages[k] = batch[toSend ? toSend[k]! : k]!.message;
    const all = await this.#sendWithRetry(messages, signal);
    if (all === null) return null;
    if (all === true) {
      if (toSend) for (let k = 0; k < toSend.length; k++) outcomes[toSend[k]!] = PUBLISHED;
      else outcomes.fill(PUBLISHED);
      return outcomes;
    }
    const indexes = toSend ?? batch.map((_, i) => i);
    // Some event of the batch is refused for good: find which, one at a time and in order,
    // so strict ordering can park the later events of a failed aggregate before they go out.
    // A refusal of the topic itself (missing, not authorized) in a batch for one topic is every
    // event's: sent one by one, each would be refused the same way, after ~1.4 s of kafkajs
    // metadata retries each.
    const topic = batch[indexes[0]!]!.message.topic;
    const topicWide =
      TOPIC_LEVEL_KAFKA_TYPES.has(all.reason) && indexes.every((i) => batch[i]!.message.topic === topic);
    for (const i of indexes) {
      const m = batch[i]!.message;
      const e = m.event;
      if (strict && blocked.has(e.aggregateType, e.aggregateId)) {
        outcomes[i] = PARKED;
        blocked.parkDecided(e.aggregateType, e.aggregateId);
        continue;
      }
      const one = topicWide ? all : await this.#sendWithRetry([m], signal);
      if (one === null) {
        // Aborted mid-way: the decisions taken so far are never written.
        this.#decisionsDone(batch, outcomes);
        return null;
      }
      if (one === true) outcomes[i] = PUBLISHED;
      else {
        outcomes[i] = { failed: one };
        if (strict) blocked.blockDecided(e.aggregateType, e.aggregateId);
      }
    }
    return outcomes;
  }

  /** true = acknowledged; Classified = permanently refused; null = aborted. Transient errors retry forever. */
  async #sendWithRetry(messages: OutboundMessage[], signal: AbortSignal): Promise<true | Classified | null> {
    const { sink, metrics, outages, config: c } = this.#d;
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) return null;
      const startMs = Date.now();
      try {
        const t0 = performance.now();
        await sink.publish(messages);
        metrics.publishBatchSeconds.observe((performance.now() - t0) / 1000);
        this.#d.tracer?.record({ messages, outcome: 'published', startMs, endMs: Date.now() });
        outages.recovered('broker');
        metrics.brokerOutage.set(0);
        return true;
      } catch (e) {
        const cls = sink.classify(e);
        this.#d.tracer?.record({
          messages,
          outcome: 'failed',
          startMs,
          endMs: Date.now(),
          error: cls.reason,
        });
        if (cls.class === 'permanent') return cls;
        metrics.transientErrors.inc({ dependency: 'broker', reason: cls.reason });
        metrics.brokerOutage.set(1);
        outages.failed('broker', cls.reason, cls.message, { events: messages.length, attempt });
        await sleep(
          backoffDelay({ initialMs: c.retryInitialMs, maxMs: c.retryMaxMs, factor: 2 }, attempt),
          signal,
        );
      }
    }
  }

  /**
   * The strict-ordering decisions of a batch (parks, blocking failures) are written — or given
   * up with the session, whose successor reloads the blocked set from the table.
   */
  #decisionsDone(batch: Pending[], outcomes: Outcome[]): void {
    const strict = this.#d.config.ordering === 'strict';
    batch.forEach((p, i) => {
      const o = outcomes[i];
      const e = p.message.event;
      if (hasAggregate(e) && (o === PARKED || (strict && o !== undefined && o !== PUBLISHED)))
        this.#d.blocked.written(e.aggregateType, e.aggregateId);
    });
  }

  /**
   * Writes the batch's outcomes, then settles it. Failure outcomes (failed / parked) go on their
   * rows first; then one statement adds every id of the batch to the slot's progress record
   * (lifecycle/progress.ts) — the published ones and the failed ones alike, whose rows now show their
   * own status, which wins. On the happy path that is the batch's only statement. An outcome is
   * settled only once it is durable (design.md §3): a row statement that matches fewer rows than
   * it names is not done — the rows may not be visible yet (design.md §7) — and is repeated for
   * the rows still 'pending' or still invisible, until each is written or has moved on; the
   * progress statement must report its one row.
   */
  async #recordAndSettle(batch: Pending[], outcomes: Outcome[], signal: AbortSignal): Promise<void> {
    const { config: c, store, metrics, log } = this.#d;
    const settled: StreamedRow[] = [];
    const parked: StreamedRow[] = [];
    const failed: (FailedRow & StreamedRow)[] = [];
    for (let i = 0; i < batch.length; i++) {
      const o = outcomes[i]!;
      const e = batch[i]!.message.event;
      settled.push(e); // an event is a StreamedRow (id, xid): no object per event on the happy path
      if (o === PARKED) parked.push({ id: e.id, xid: e.xid });
      else if (o !== PUBLISHED)
        failed.push({ id: e.id, xid: e.xid, error: formatError(o.failed), retryInMs: failureBackoff(c, 1) });
    }
    // Failures first: the unlikely crash between statements then leaves a failed head, never
    // parked orphans; and both before the progress record covers their ids.
    const written =
      (await this.#writeOutcome(
        {
          what: 'failed',
          rows: failed,
          write: (rows) => store.recordFailed(rows),
          unrecordable: (rows, why) =>
            store.recordUnrecordable(rows.map((r) => ({ id: r.id, error: `${r.error}; ${why}` }))),
        },
        signal,
      )) &&
      (await this.#writeOutcome(
        {
          what: 'parked',
          rows: parked,
          write: (rows) => store.recordParked(rows.map((r) => r.id)),
          unrecordable: (rows, why) =>
            store.recordUnrecordable(
              rows.map((r) => ({ id: r.id, error: `parked behind a failed event of its aggregate; ${why}` })),
            ),
        },
        signal,
      )) &&
      (await this.#writeOutcome(
        {
          what: 'progress',
          rows: settled,
          write: async (rows) => {
            const n = await store.recordProgress(
              c.slot,
              rows.map((r) => r.id),
            );
            if (n !== 1) throw new Error(`the progress record of slot ${c.slot} was not written (${n} rows)`);
            return rows.length;
          },
        },
        signal,
      ));
    this.#decisionsDone(batch, outcomes);
    if (!written) return; // aborted: nothing of this batch settles
    if (this.#invisibleSince !== null) {
      log.info(
        { waitedMs: Date.now() - this.#invisibleSince },
        'outbox rows are visible again; outcomes recorded',
      );
      this.#invisibleSince = null;
    }
    const now = Date.now();
    // Runs of events with the same topic and the same lag (a transaction's) are counted once each.
    let topic = '';
    let published = 0;
    let lagMs = -1;
    let lagged = 0;
    // A transaction's events are settled together (they are consecutive in a batch).
    let txn: TxnEntry | null = null;
    let ofTxn = 0;
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      const o = outcomes[i]!;
      const e = p.message.event;
      if (p.txn !== txn) {
        if (txn) this.#tracker.settle(txn, ofTxn);
        txn = p.txn;
        ofTxn = 0;
      }
      ofTxn++;
      this.#inflightBytes -= p.message.bytes;
      if (o === PUBLISHED) {
        if (p.message.topic !== topic) {
          if (published > 0) metrics.eventsPublished.inc({ topic }, published);
          topic = p.message.topic;
          published = 0;
        }
        published++;
        const lag = Math.max(0, now - e.commitTimeMs);
        if (lag !== lagMs) {
          if (lagged > 0) metrics.endToEndLagSeconds.observe(lagMs / 1000, lagged);
          lagMs = lag;
          lagged = 0;
        }
        lagged++;
      } else if (o === PARKED) {
        logOutcome(log, e, p.message.topic, 0, 'parked');
      } else {
        metrics.failures.eventsFailed.inc({ reason: o.failed.reason });
        logOutcome(log, e, p.message.topic, 1, 'retry', o.failed);
      }
    }
    if (txn) this.#tracker.settle(txn, ofTxn);
    if (published > 0) metrics.eventsPublished.inc({ topic }, published);
    if (lagged > 0) metrics.endToEndLagSeconds.observe(lagMs / 1000, lagged);
    // Updated per settled batch, not per decoded event (the per-event path stays lean).
    metrics.inflightEvents.set(this.#tracker.unsettled);
    this.#applyBackpressure();
    this.#maybeConfirm();
  }

  /**
   * Runs one outcome statement until every row it names is written or has moved on (see
   * OutboxStore.unwritten). Database errors and rows not visible yet are transient: back off
   * and repeat, never settle past them. false = aborted.
   *
   * One database error is permanent for a row: 54000 (program_limit_exceeded), a hostile row
   * whose aggregate columns are too long for the table's index of failed/dead/parked rows. The
   * batch is then written row by row, and a row PostgreSQL refuses on its own is recorded with
   * `unrecordable` (a status outside that index, with the reason) so the stream goes on.
   */
  async #writeOutcome<R extends StreamedRow>(o: OutcomeWrite<R>, signal: AbortSignal): Promise<boolean> {
    const { config: c, store, metrics, outages, log } = this.#d;
    let todo = o.rows;
    for (let attempt = 1; todo.length > 0; attempt++) {
      if (signal.aborted) return false;
      let delay: number;
      try {
        const n = await o.write(todo);
        outages.recovered('database');
        if (n === todo.length) return true;
        const still = new Set(await store.unwritten(todo));
        todo = todo.filter((r) => still.has(r.id));
        if (todo.length === 0) return true;
        metrics.transientErrors.inc({ dependency: 'database', reason: 'ROWS_NOT_VISIBLE' });
        if (this.#invisibleSince === null) {
          this.#invisibleSince = Date.now();
          log.warn(
            { rows: todo.length, outcome: o.what, ids: todo.slice(0, 10).map((r) => r.id) },
            `outbox rows the stream delivered are not visible yet (their commit is still in progress, e.g. waiting for a synchronous standby); their '${o.what}' outcome waits and the slot is not confirmed past them`,
          );
        }
        // Usually a window of microseconds: retry soon, but back off for a held commit.
        delay = backoffDelay({ initialMs: 10, maxMs: Math.min(1000, c.retryMaxMs), factor: 2 }, attempt);
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code === PROGRAM_LIMIT_EXCEEDED && o.unrecordable) {
          if (todo.length > 1) {
            for (const r of todo) if (!(await this.#writeOutcome({ ...o, rows: [r] }, signal))) return false;
            return true;
          }
          const why = `PostgreSQL cannot record it '${o.what}' (${errorMessage(e)}: its aggregate columns are too long for the index of failed, dead and parked rows), so it is recorded 'discarded'; if it should still be published, correct the row and re-insert it (\`outbox-relay replay --since <created_at> --event-id <event_id>\`)`;
          log.error({ id: todo[0]!.id, outcome: o.what, err: errorMessage(e) }, why);
          const fallback = o.unrecordable;
          return this.#writeOutcome(
            { what: 'discarded', rows: todo, write: (rows) => fallback(rows, why) },
            signal,
          );
        }
        metrics.transientErrors.inc({ dependency: 'database', reason: code ?? 'UNKNOWN' });
        outages.failed('database', 'RECORD_OUTCOMES', errorMessage(e), { events: todo.length, attempt });
        delay = backoffDelay({ initialMs: c.retryInitialMs, maxMs: c.retryMaxMs, factor: 2 }, attempt);
      }
      await sleep(delay, signal);
    }
    return true;
  }
}

/** One outcome statement of a batch (see #writeOutcome). */
interface OutcomeWrite<R extends StreamedRow> {
  what: string;
  rows: R[];
  write(rows: R[]): Promise<number>;
  /** For a row PostgreSQL refuses this outcome for good (54000): record it otherwise, with `why`. */
  unrecordable?(rows: R[], why: string): Promise<number>;
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

function batchBytes(batch: readonly Pending[]): number {
  let n = 0;
  for (const p of batch) n += p.message.bytes;
  return n;
}

/** SQLSTATE 54000: e.g. "index row requires 24040 bytes, maximum size is 8191". */
const PROGRAM_LIMIT_EXCEEDED = '54000';

const PUBLISHED = 'published' as const;
const PARKED = 'parked' as const;
type Outcome = typeof PUBLISHED | typeof PARKED | { failed: Classified };

function classifyStreamError(e: unknown): RelayError {
  const code = (e as { code?: string }).code;
  // 55006: object_in_use — the slot is active for another PID (another relay took it).
  if (code === '55006') {
    return new RelayError(ErrorCode.SLOT_ACTIVE_ELSEWHERE, errorMessage(e), { retriable: true, cause: e });
  }
  // 42704: the slot was dropped under us; the next session's #openSlot recovers it (relay.ts).
  return new RelayError(ErrorCode.DATABASE_UNAVAILABLE, `replication stream failed: ${errorMessage(e)}`, {
    retriable: true,
    cause: e,
  });
}
