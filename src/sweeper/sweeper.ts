import type pg from 'pg';
import type { Config } from '../config/load.ts';
import type { Classified } from '../errors.ts';
import { errorMessage, RelayError } from '../errors.ts';
import type { BlockedAggregates } from '../lifecycle/blocked-aggregates.ts';
import { failureBackoff, formatError, logOutcome } from '../lifecycle/failure-policy.ts';
import { compactProgress } from '../lifecycle/progress.ts';
import { pendingCount, storedSettledCounts, tableBytes } from '../lifecycle/queries.ts';
import { Retention } from '../lifecycle/retention.ts';
import { UNHEALTHY } from '../lifecycle/statuses.ts';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { countSweep } from '../outcome/count.ts';
import { publishOnce } from '../outcome/publish.ts';
import { sleep } from '../retry/backoff.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Sink } from '../sinks/sink.ts';
import { ensurePartitions } from '../store/partitions.ts';
import { codeOf, SqlState } from '../store/pg-errors.ts';
import { withTransaction } from '../store/transaction.ts';
import { FailoverWatch } from './failover-watch.ts';
import { SlotWatch } from './slot-watch.ts';
import { SweepLoop } from './sweep-loop.ts';
import type { Rerouted, SweepStore } from './sweep-store.ts';

export interface SweeperDeps {
  config: Config;
  sink: Sink;
  /** Where the failed and parked rows live: the outbox table, or the Debezium preset's side table. */
  store: SweepStore;
  blocked: BlockedAggregates;
  log: Logger;
  metrics: RelayMetrics;
  /**
   * Headers on every message the sweeper publishes (retries, dead-letter copies): the delivery
   * mode's (delivery/mode.ts retryHeaders: exactly-once marks them at-least-once).
   */
  retryHeaders: Readonly<Record<string, string>>;
  /** A condition the relay cannot go on with (the slot was invalidated): the sweep loop ends. */
  onFatal?: (e: RelayError) => void;
}

/** A transient broker failure during a sweep: stop, burn no attempts, try again next round. */
class TransientDuringSweep extends Error {
  /** The destination of the message that met it (Sweeper #destinationOf). */
  readonly destination: string;
  constructor(message: string, destination: string) {
    super(message);
    this.destination = destination;
  }
}

/** Destinations refusing for now in one round before the round stops (#retryDue). */
const MAX_DOWN_DESTINATIONS = 3;

/** One row's retry: error null = acknowledged. */
type Published = { routed: Rerouted; topic: string; error: Classified | null };

const STATUS_REFRESH_MS = 30_000;

/**
 * The status gauges' counts that read many rows (the pending rows outside the progress record —
 * the whole backlog while the relay catches up — and the table scan for published/discarded) are
 * repeated no sooner than this many times their last duration: counting costs PostgreSQL at most
 * 0.5 % of one backend, however large the table or the backlog. A count of 60 ms (a 100,000-row
 * backlog) is then repeated after 12 s instead of every sweep.
 */
const COUNT_COST_FACTOR = 200;

/**
 * The first counts have no duration to go by: they are estimated from the table's size (a scan
 * read ~0.7 ms per MB here: 48 ms for the pending rows of a 70 MB table, 40 ms for its status
 * scan), so a large table is not counted at once while a restarted relay catches up — at most
 * FIRST_COUNT_MAX_DELAY_MS after the start. A small table is counted in the first round.
 */
const COUNT_MS_PER_MB = 0.7;
const FIRST_COUNT_MAX_DELAY_MS = 60_000;

/**
 * What the stream cannot do: retry failed events with back-off, mark hopeless ones dead
 * (and copy them to the dead-letter topic), release parked events in order once their
 * aggregate's head is resolved, and keep the status gauges current. One sweeper for every table
 * that holds failures (sweep-store.ts): the outbox table, or the Debezium preset's side table;
 * the outbox table's own upkeep (progress record, retention, pending counts) only where there is one.
 *
 * Runs in the relay process while it holds the slot; one round at a time (re-entry guard);
 * stop() aborts between steps and waits for the round in progress.
 */
export class Sweeper {
  readonly #d: SweeperDeps;
  readonly #loop: SweepLoop;
  #lastStatusRefresh = 0;
  /** Not before: the next settled-status scan (cost-bounded, COUNT_COST_FACTOR). */
  #statusScanAfter = 0;
  /** Not before: the next pending count, and the last one's result (cost-bounded). */
  #pendingAfter = 0;
  #pending = 0;
  /** Whether the first counts' time has been set (from the table's size). */
  #countsScheduled = false;
  readonly #slotWatch: SlotWatch;
  readonly #failoverWatch: FailoverWatch;
  /**
   * One pruning round of the table the sweeper works on — the outbox table's (Retention), or the
   * store's own (a side table: SweepStore.pruneSettled) — true when more is due; null: none.
   */
  readonly #prune: ((signal: AbortSignal) => Promise<boolean>) | null;
  #lastSlotCheck = 0;
  #lastPrune = 0;
  #lastPartitions = 0;
  readonly #failingSteps = new Set<string>();

  constructor(deps: SweeperDeps) {
    this.#d = deps;
    const c = deps.config;
    this.#loop = new SweepLoop((signal) => this.sweepOnce(signal), {
      intervalMs: c.sweepIntervalMs,
      log: deps.log,
      failed: 'sweep failed; retrying next round',
      quiet: (e) => e instanceof TransientDuringSweep,
      onFatal: (e) => deps.onFatal?.(e),
    });
    this.#slotWatch = new SlotWatch({
      db: deps.store.db,
      slot: c.slot,
      thresholds: { warnBytes: c.slotWarnBytes, criticalBytes: c.slotCriticalBytes },
      metrics: deps.metrics.slot,
      log: deps.log,
    });
    this.#failoverWatch = new FailoverWatch({
      db: deps.store.db,
      slot: c.slot,
      ...(c.standbyUrl ? { standbyUrl: c.standbyUrl } : {}),
      metrics: deps.metrics.slot,
      log: deps.log,
    });
    this.#prune = this.#pruneOf(deps);
  }

  #pruneOf({
    store,
    config: c,
    metrics,
    log,
  }: SweeperDeps): ((signal: AbortSignal) => Promise<boolean>) | null {
    const outbox = store.outboxTable;
    if (outbox) {
      const retention = new Retention({
        db: store.db,
        table: outbox.table,
        tableName: `${c.schema}.${c.table}`,
        progress: outbox.progress,
        publishedRetentionMs: c.retentionPublishedMs,
        ...(c.retentionDeadMs === undefined ? {} : { deadRetentionMs: c.retentionDeadMs }),
        batchSize: c.pruneBatchSize,
        metrics,
        log,
      });
      return async (signal) => (await retention.pruneOnce(signal))?.more ?? false;
    }
    const pruneSettled = store.pruneSettled;
    if (!pruneSettled) return null;
    const window = {
      publishedMs: c.retentionPublishedMs,
      ...(c.retentionDeadMs === undefined ? {} : { deadMs: c.retentionDeadMs }),
    };
    return async () => {
      const deleted = await pruneSettled.call(store, window, c.pruneBatchSize);
      for (const [status, n] of Object.entries(deleted)) metrics.pruned.inc({ status }, n);
      const total = Object.values(deleted).reduce((a, b) => a + b, 0);
      if (total > 0) log.info({ deleted }, 'retention: pruned the side table');
      return total >= c.pruneBatchSize; // a full batch: more may be due
    };
  }

  start(): void {
    this.#loop.start();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    // This instance no longer holds the slot: its slot gauges would only be stale.
    this.#d.metrics.slot.clear();
  }

  /**
   * One round: slot health and retention (each at its own interval, first: they matter most
   * while the broker is down, which aborts the rest of the round), due retries, releases, gauges.
   */
  async sweepOnce(signal: AbortSignal = new AbortController().signal): Promise<void> {
    await this.#maintain(signal);
    if (signal.aborted) return;
    try {
      const released = await this.#retryDue(signal);
      if (signal.aborted) return;
      await this.#releaseParked(released, signal);
    } catch (e) {
      // A round the broker stopped still counts what the outbox holds: the failed and pending
      // gauges are read most during an outage, and must not freeze at its start.
      if (e instanceof TransientDuringSweep && !signal.aborted)
        await this.#step('status gauges', () => this.#refreshGauges());
      throw e;
    }
    if (signal.aborted) return;
    await this.#reconcileBlocked();
    if (signal.aborted) return;
    await this.#refreshGauges();
  }

  async #maintain(signal: AbortSignal): Promise<void> {
    const c = this.#d.config;
    if (Date.now() - this.#lastSlotCheck >= c.slotCheckIntervalMs) {
      this.#lastSlotCheck = Date.now();
      await this.#step('slot check', () => this.#slotWatch.check());
      await this.#step('failover check', () => this.#failoverWatch.check());
    }
    const outbox = this.#d.store.outboxTable;
    if (outbox && !signal.aborted) {
      // Cheap (one or two short statements a round): keeps the progress record a few ranges.
      await this.#step('progress compaction', async () => {
        const r = await compactProgress(this.#d.store.db, outbox.table, outbox.progress, c.slot);
        if (r.filled > 0)
          this.#d.log.debug({ filled: r.filled, ranges: r.ranges }, 'progress record compacted');
      });
    }
    // A partitioned outbox: its partitions ahead of now, with or without --prune (an insert whose
    // created_at has no partition fails in the application).
    if (outbox && !signal.aborted && Date.now() - this.#lastPartitions >= c.pruneIntervalMs) {
      this.#lastPartitions = Date.now();
      await this.#step('partitions', () => this.#premakePartitions());
    }
    const prune = this.#prune;
    if (prune && c.prune && !signal.aborted && Date.now() - this.#lastPrune >= c.pruneIntervalMs) {
      this.#lastPrune = Date.now();
      await this.#step('retention', async () => {
        // A round cut short (a large backlog) continues at the next sweep, between retries.
        if (await prune(signal)) this.#lastPrune = 0;
      });
    }
  }

  /** Creates a partitioned outbox's missing partitions ahead (store/partitions.ts); nothing for a plain table. */
  async #premakePartitions(): Promise<void> {
    const c = this.#d.config;
    const client = await this.#d.store.db.connect();
    let broken: Error | undefined;
    try {
      const made = await ensurePartitions(client, c, {
        ahead: c.partitionPremake,
        interval: c.partitionInterval,
      });
      if (made.length) this.#d.log.info({ partitions: made }, 'partitions created ahead');
    } catch (e) {
      broken = e as Error;
      throw e;
    } finally {
      client.release(broken);
    }
  }

  /**
   * A maintenance step whose failure must not hold up retries and releases: logged once per
   * streak (e.g. the relay's role lacks DELETE for retention) and tried again at its next turn.
   * Fatal errors (the slot was invalidated) go through.
   */
  async #step(name: string, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
      if (this.#failingSteps.delete(name)) this.#d.log.info({ step: name }, `${name} works again`);
    } catch (e) {
      if (e instanceof RelayError && !e.retriable) throw e;
      if (!this.#failingSteps.has(name)) {
        const code = codeOf(e);
        const hint =
          code !== SqlState.INSUFFICIENT_PRIVILEGE
            ? ''
            : name === 'retention'
              ? " (grant the relay DELETE on the table it prunes — the outbox table, or with --compat debezium its _relay_failed side table — or turn pruning off with --no-prune; a partitioned outbox: the relay's role must own it to drop partitions)"
              : name === 'partitions'
                ? " (creating a partition needs the partitioned table's owner: GRANT <owner role> TO <relay role>, or run `outbox-relay migrate` on a schedule; docs/outbox-table.md#partitioning)"
                : '';
        this.#d.log.warn({ step: name, err: errorMessage(e), code }, `${name} failed${hint}; retrying`);
      }
      this.#failingSteps.add(name);
    }
  }

  /** Publishes one rerouted event: error null = acknowledged, else why it was refused for good. */
  async #publishRouted(routed: Rerouted): Promise<Published> {
    if ('error' in routed) return { routed, topic: '', error: routed.error };
    Object.assign(routed.message.headers, this.#d.retryHeaders);
    return { routed, topic: routed.message.topic, error: await this.#send(routed.message) };
  }

  /** Where a message goes: the sink's destination (a URL, a stream, a queue, an exchange), else its topic. */
  #destinationOf(m: OutboundMessage): string {
    return this.#d.sink.destinationOf?.(m) ?? m.topic;
  }

  /** Publishes one message; transient failures abort the round (no attempt is burned). */
  async #send(m: OutboundMessage): Promise<Classified | null> {
    const r = await publishOnce(this.#d, [m]);
    if (r === true) return null;
    if (r.class === 'transient') {
      this.#d.log.warn(
        { reason: r.reason, err: r.message },
        'broker unavailable during sweep; retrying next round',
      );
      throw new TransientDuringSweep(r.message, this.#destinationOf(m));
    }
    return r;
  }

  /** Claims due failed rows (oldest first, SKIP LOCKED) and publishes them again. Returns aggregates whose head got published. */
  async #retryDue(signal: AbortSignal): Promise<Set<string>> {
    const { config: c, store } = this.#d;
    const headsPublished = new Set<string>();
    // A sink of many destinations (webhook URLs, Redis streams, SQS queues, exchanges): one that
    // refuses for now is skipped for the rest of the round, the others' rows are retried — one
    // receiver down no longer holds every other's retries. A third such destination in a round
    // looks like the broker itself: the round stops there, as it does at once for a sink of one.
    const down = new Set<string>();
    const manyDestinations = this.#d.sink.destinationOf !== undefined;
    await this.#committingDone(async (client) => {
      // A round reads at most what the stream may hold in flight (--max-inflight-bytes).
      const due = await store.claimDue(client, c.sweepBatchSize, c.maxInflightBytes);
      for (const row of due) {
        if (signal.aborted) break;
        const rerouted = await store.reroute(row);
        if ('message' in rerouted && down.has(this.#destinationOf(rerouted.message))) continue;
        let done: Published;
        try {
          done = await this.#publishRouted(rerouted);
        } catch (e) {
          if (
            !(e instanceof TransientDuringSweep) ||
            !manyDestinations ||
            down.size + 1 >= MAX_DOWN_DESTINATIONS
          )
            throw e;
          down.add(e.destination);
          continue;
        }
        const { routed, topic, error } = done;
        const { event } = routed;
        const attempts = row.attempts + 1;
        if (!error) {
          await store.retryPublished(client, row, attempts);
          countSweep(this.#d, event, topic, attempts, 'published');
          headsPublished.add(JSON.stringify([event.aggregateType, event.aggregateId]));
        } else if (c.maxAttempts > 0 && attempts >= c.maxAttempts) {
          // --max-attempts 0: retried forever.
          await store.retryDead(client, row, attempts, formatError(error));
          countSweep(this.#d, event, topic, attempts, 'dead', error);
          await this.#deadLetter(routed, attempts, error);
        } else {
          await store.retryLater(client, row, attempts, formatError(error), failureBackoff(c, attempts));
          countSweep(this.#d, event, topic, attempts, 'retry', error);
        }
      }
    });
    return headsPublished;
  }

  /**
   * Runs `body` in one transaction. A transient broker failure in it (TransientDuringSweep) ends
   * the body, commits what it did, and is thrown after the commit: the rows the broker already
   * acknowledged stay published. Rolled back with the rest, they were published again at every
   * round for as long as the broker refused a later row (a topic short of in-sync replicas, a
   * receiver answering 503), and their dead-letter copies with them.
   */
  async #committingDone<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let transient: TransientDuringSweep | null = null;
    const result = await withTransaction(this.#d.store.db, async (client) => {
      try {
        return await body(client);
      } catch (e) {
        if (!(e instanceof TransientDuringSweep)) throw e;
        transient = e;
        return undefined as T;
      }
    });
    if (transient) throw transient;
    return result;
  }

  async #deadLetter(routed: Rerouted, attempts: number, error: Classified): Promise<void> {
    const { config: c, sink, store, metrics, log } = this.#d;
    const { event } = routed;
    if (!c.deadLetterTopic) return;
    try {
      const m = store.deadLetter(routed, c.deadLetterTopic, attempts, error);
      if (!m) {
        log.warn(
          { event_id: event.eventId, id: event.id, err: error.message },
          'a dead event that cannot be routed has no dead-letter copy (it stays dead in the table)',
        );
        return;
      }
      Object.assign(m.headers, this.#d.retryHeaders);
      await sink.publish([m]);
      metrics.failures.dlqPublished.inc();
      logOutcome(log, event, c.deadLetterTopic, attempts, 'dlq');
    } catch (e) {
      // Nothing is lost: the row stays 'dead' in the table.
      metrics.failures.dlqPublishFailed.inc();
      log.error(
        { event_id: event.eventId, id: event.id, err: errorMessage(e) },
        'could not copy a dead event to the dead-letter topic',
      );
    }
  }

  /**
   * Strict ordering: publishes parked events, in id order, of aggregates with no failed or
   * dead event ahead of them (head published by a retry, resent or discarded by an operator).
   */
  async #releaseParked(headsPublished: Set<string>, signal: AbortSignal): Promise<void> {
    const { store } = this.#d;
    const aggregates = new Set(headsPublished);
    for (const a of await store.releasable()) aggregates.add(JSON.stringify(a));
    for (const key of aggregates) {
      if (signal.aborted) return;
      const [type, id] = JSON.parse(key) as [string, string];
      await this.#releaseAggregate(type, id, signal);
    }
  }

  async #releaseAggregate(type: string, id: string, signal: AbortSignal): Promise<void> {
    const { config: c, store, blocked } = this.#d;
    // Bounded: the stream may park more events of the aggregate while we release.
    for (let round = 0; round < 1000 && !signal.aborted; round++) {
      const mark = blocked.mark(type, id); // before the read: see BlockedAggregates
      const next = await this.#committingDone(async (client): Promise<'stop' | 'empty' | 'more'> => {
        if (await store.hasUnresolvedHead(client, [type, id])) return 'stop';
        const rows = await store.claimParked(client, [type, id], c.sweepBatchSize);
        if (rows.length === 0) return 'empty';
        for (const row of rows) {
          const { routed, topic, error } = await this.#publishRouted(await store.reroute(row));
          if (error) {
            // The first parked event that fails becomes the new head; the rest stay parked behind it.
            await store.releaseFailed(client, row, formatError(error), failureBackoff(c, 1));
            countSweep(this.#d, routed.event, topic, 1, 'release-refused', error);
            return 'stop';
          }
          await store.released(client, row);
          countSweep(this.#d, routed.event, topic, row.attempts, 'released');
        }
        return 'more';
      });
      if (next === 'stop') return;
      if (next === 'empty') {
        if (blocked.unblockSince(type, id, mark)) return;
        await sleep(20, signal);
      }
    }
  }

  /**
   * Strict ordering: unblocks aggregates that nothing in the table holds any more — a head an
   * operator discarded or resent-and-published with no parked followers, which #releaseParked
   * never visits. Without this the aggregate's next event would be parked and released a round
   * later (order kept, latency lost).
   */
  async #reconcileBlocked(): Promise<void> {
    const { store, blocked } = this.#d;
    const keys = blocked.keys();
    if (keys.length === 0) return;
    const marks = keys.map(([type, id]) => blocked.mark(type, id));
    const still = new Set((await store.held(keys)).map((k) => JSON.stringify(k)));
    keys.forEach(([type, id], i) => {
      if (!still.has(JSON.stringify([type, id]))) blocked.unblockSince(type, id, marks[i]!);
    });
  }

  async #refreshGauges(): Promise<void> {
    const { store, metrics } = this.#d;
    const f = metrics.failures;
    const by = await store.unhealthyCounts();
    for (const s of UNHEALTHY) f.events.set({ status: s }, Number(by.get(s)?.n ?? 0));
    f.eventsParked.set(Number(by.get('parked')?.n ?? 0));
    const oldest = Math.max(Number(by.get('failed')?.oldest ?? 0), Number(by.get('dead')?.oldest ?? 0));
    f.oldestFailedAgeSeconds.set(oldest);
    // A side table has no pending or settled rows to count: its events are in the WAL alone.
    const outbox = store.outboxTable;
    if (!outbox) return;
    if (!this.#countsScheduled) {
      this.#countsScheduled = true;
      const estimateMs = ((await tableBytes(store.db, outbox.table)) / 1e6) * COUNT_MS_PER_MB;
      const after = Date.now() + Math.min(FIRST_COUNT_MAX_DELAY_MS, COUNT_COST_FACTOR * estimateMs);
      this.#pendingAfter = after;
      this.#statusScanAfter = after;
    }
    // Truly pending rows: only the complement of the progress record is read — a few rows when
    // the relay keeps up, the whole backlog while it catches up (then counted less often).
    if (Date.now() >= this.#pendingAfter) {
      const t0 = performance.now();
      this.#pending = await pendingCount(store.db, outbox.table, outbox.progress);
      this.#pendingAfter = Date.now() + COUNT_COST_FACTOR * (performance.now() - t0);
      f.events.set({ status: 'pending' }, this.#pending);
    }
    const pending = this.#pending;
    // Published and discarded counts scan the table: keep them infrequent.
    if (Date.now() - this.#lastStatusRefresh > STATUS_REFRESH_MS && Date.now() >= this.#statusScanAfter) {
      this.#lastStatusRefresh = Date.now();
      const t0 = performance.now();
      const m = await storedSettledCounts(store.db, outbox.table);
      this.#statusScanAfter = Date.now() + COUNT_COST_FACTOR * (performance.now() - t0);
      // Rows still saying 'pending' are published unless truly pending (the progress record covers them).
      const published = (m.get('published') ?? 0) + Math.max(0, (m.get('pending') ?? 0) - pending);
      f.events.set({ status: 'published' }, published);
      f.events.set({ status: 'discarded' }, m.get('discarded') ?? 0);
    }
  }
}
