import { Counter, Gauge, Registry } from 'prom-client';
import { BucketHistogram } from './bucket-histogram.ts';

/**
 * The relay's metrics, one registry per relay (tests run several in one process).
 * Labels stay low-cardinality: topic and state yes, aggregate or event ids never.
 */
export class RelayMetrics {
  readonly registry: Registry;
  readonly eventsPublished: Counter<'topic'>;
  /** Observed per batch: in live mode, per commit (a BucketHistogram: no allocation per call). */
  readonly publishBatchSeconds: BucketHistogram;
  /** Observed once per run of events with the same lag (a transaction's), with their count. */
  readonly endToEndLagSeconds: BucketHistogram;
  readonly inflightEvents: Gauge;
  readonly confirmedLsn: Gauge;
  readonly replicationReconnects: Counter;
  readonly slotRecoveries: Counter;
  readonly timelineChanges: Counter;
  readonly slotInvalidations: Counter<'reason'>;
  readonly brokerOutage: Gauge;
  readonly poisonPosition: Gauge;
  readonly relayState: Gauge<'state'>;
  readonly transientErrors: Counter<'dependency' | 'reason'>;
  readonly failures: FailureMetrics;
  readonly slot: SlotMetrics;
  readonly pruned: Counter<'status'>;
  readonly health: HealthMetrics;

  #exactlyOnce: (() => { commits: number; replacements: number; progressTopicLosses: number }) | null = null;

  /**
   * --delivery exactly-once: where its outbox_exactly_once_* counters read the transactional
   * publisher's counts, at each scrape (0 without it). A progress topic loss is a window in which
   * a restart would publish again what PostgreSQL had not recorded yet (docs/delivery.md).
   */
  watchExactlyOnce(read: () => { commits: number; replacements: number; progressTopicLosses: number }): void {
    this.#exactlyOnce = read;
  }

  constructor(registry = new Registry()) {
    this.registry = registry;
    const r = [registry];
    const eo = (
      pick: (c: { commits: number; replacements: number; progressTopicLosses: number }) => number,
    ) => {
      const read = () => this.#exactlyOnce;
      return function collect(this: Counter) {
        const counts = read()?.();
        this.reset();
        if (counts) this.inc(pick(counts));
      };
    };
    new Counter({
      name: 'outbox_exactly_once_commits_total',
      help: 'Kafka transactions committed (--delivery exactly-once).',
      registers: r,
      collect: eo((c) => c.commits),
    });
    new Counter({
      name: 'outbox_exactly_once_producer_replacements_total',
      help: 'Transactional producers replaced after an error inside a transaction (the next one aborts its transaction).',
      registers: r,
      collect: eo((c) => c.replacements),
    });
    new Counter({
      name: 'outbox_exactly_once_progress_topic_losses_total',
      help: 'Times the exactly-once progress topic was found deleted and recreated: each an at-least-once window until PostgreSQL records what was committed.',
      registers: r,
      collect: eo((c) => c.progressTopicLosses),
    });
    this.eventsPublished = new Counter({
      name: 'outbox_events_published_total',
      help: 'Events the broker acknowledged, by topic.',
      labelNames: ['topic'],
      registers: r,
    });
    this.publishBatchSeconds = new BucketHistogram({
      name: 'outbox_publish_batch_seconds',
      help: 'Time to publish one batch until the broker acknowledged it.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    });
    this.endToEndLagSeconds = new BucketHistogram({
      name: 'outbox_end_to_end_lag_seconds',
      help: 'Time from the transaction commit to the broker acknowledgement.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: r,
    });
    this.inflightEvents = new Gauge({
      name: 'outbox_inflight_events',
      help: 'Events decoded from the slot and not yet settled.',
      registers: r,
    });
    this.confirmedLsn = new Gauge({
      name: 'outbox_confirmed_lsn',
      help: 'Last LSN confirmed to the server, as a number (bytes).',
      registers: r,
    });
    this.replicationReconnects = new Counter({
      name: 'outbox_replication_reconnects_total',
      help: 'Replication sessions started after the first.',
      registers: r,
    });
    this.slotRecoveries = new Counter({
      name: 'outbox_slot_recoveries_total',
      help: 'Lost slots recovered: a new slot, then the rows no progress record covers published from the table.',
      registers: r,
    });
    this.timelineChanges = new Counter({
      name: 'outbox_timeline_changes_total',
      help: "The database's timeline or system identifier changed under the relay (a promotion): outcomes observed on the old one were dropped, never recorded on the new.",
      registers: r,
    });
    this.slotInvalidations = new Counter({
      name: 'outbox_slot_invalidations_total',
      help: 'Slots found invalidated by PostgreSQL (wal_status = lost), by invalidation_reason: wal_removed (the only one before 17), idle_timeout (18+), rows_removed, wal_level_insufficient.',
      labelNames: ['reason'],
      registers: r,
    });
    this.brokerOutage = new Gauge({
      name: 'outbox_broker_outage',
      help: '1 while publishing fails with transient errors, else 0.',
      registers: r,
    });
    this.poisonPosition = new Gauge({
      name: 'outbox_poison_position',
      help: '1 while the stream fails again and again with the same error at the same position (a poison position, docs/operations.md#poison-position), else 0.',
      registers: r,
    });
    this.relayState = new Gauge({
      name: 'outbox_relay_state',
      help: 'The relay state: 1 for the current one.',
      labelNames: ['state'],
      registers: r,
    });
    this.transientErrors = new Counter({
      name: 'outbox_transient_errors_total',
      help: 'Transient failures (retried), by dependency (broker, database) and reason.',
      labelNames: ['dependency', 'reason'],
      registers: r,
    });
    this.failures = new FailureMetrics(registry);
    this.slot = new SlotMetrics(registry);
    this.pruned = new Counter({
      name: 'outbox_pruned_total',
      help: 'Outbox rows deleted by retention pruning, by status.',
      labelNames: ['status'],
      registers: r,
    });
    this.health = new HealthMetrics(registry);
  }

  setState(state: RelayState): void {
    for (const s of RELAY_STATES) this.relayState.set({ state: s }, s === state ? 1 : 0);
  }
}

/**
 * 'standby': another relay holds the slot (hot standby); 'waiting': a dependency outage, retried,
 * or a poison position (then outbox_poison_position is 1 and the waiting reason says so).
 */
export const RELAY_STATES = ['starting', 'standby', 'waiting', 'streaming', 'stopping', 'stopped'] as const;
export type RelayState = (typeof RELAY_STATES)[number];

/** Failure-lifecycle metrics (seed 001's names), registered on the relay's registry. */
export class FailureMetrics {
  readonly retries: Counter;
  readonly retryExhaustions: Counter;
  readonly dlqPublished: Counter;
  readonly dlqPublishFailed: Counter;
  readonly eventsFailed: Counter<'reason'>;
  readonly eventsParked: Gauge;
  readonly events: Gauge<'status'>;
  readonly oldestFailedAgeSeconds: Gauge;

  constructor(registry: Registry) {
    const r = [registry];
    this.retries = new Counter({
      name: 'outbox_retries_total',
      help: 'Publish retries of failed events by the sweeper.',
      registers: r,
    });
    this.retryExhaustions = new Counter({
      name: 'outbox_retry_exhaustions_total',
      help: "Failed events that used up their attempts and became 'dead'.",
      registers: r,
    });
    this.dlqPublished = new Counter({
      name: 'outbox_dlq_published_total',
      help: 'Dead events copied to the dead-letter topic.',
      registers: r,
    });
    this.dlqPublishFailed = new Counter({
      name: 'outbox_dlq_publish_failed_total',
      help: 'Dead events that could not be copied to the dead-letter topic (they stay in the table).',
      registers: r,
    });
    this.eventsFailed = new Counter({
      name: 'outbox_events_failed_total',
      help: 'Permanent publish failures, by reason (e.g. TOPIC_AUTHORIZATION_FAILED).',
      labelNames: ['reason'],
      registers: r,
    });
    this.eventsParked = new Gauge({
      name: 'outbox_events_parked',
      help: 'Events parked behind a failed event of their aggregate (strict ordering).',
      registers: r,
    });
    this.events = new Gauge({
      name: 'outbox_events',
      help: 'Rows of the outbox table by status (refreshed by the sweeper).',
      labelNames: ['status'],
      registers: r,
    });
    this.oldestFailedAgeSeconds = new Gauge({
      name: 'outbox_oldest_failed_age_seconds',
      help: "Age of the oldest 'failed' or 'dead' event, 0 when there is none.",
      registers: r,
    });
  }
}

/** The replication slot's health, read by the sweeper of the instance that holds the slot. */
export class SlotMetrics {
  readonly retainedWalBytes: Gauge;
  readonly confirmedLagBytes: Gauge;
  readonly active: Gauge;
  readonly walStatus: Gauge<'status'>;
  readonly safeWalSizeBytes: Gauge;
  readonly failoverReady: Gauge;
  readonly failoverStalled: Gauge;

  constructor(registry: Registry) {
    const r = [registry];
    this.failoverReady = new Gauge({
      name: 'outbox_slot_failover_ready',
      help: "PostgreSQL 17+ with a standby: 1 when the slot survives a failover (read with --standby-url: the standby's copy is synced and not temporary; else from the primary: a failover slot, synchronized_standby_slots set, its slots active), else 0. Absent when there is nothing to judge (before 17, no standby).",
      registers: r,
    });
    this.failoverStalled = new Gauge({
      name: 'outbox_slot_failover_stalled',
      help: '1 while decoding is held by synchronized_standby_slots (a named standby slot inactive, or the walsender waiting in WaitForStandbyConfirmation), else 0.',
      registers: r,
    });
    this.retainedWalBytes = new Gauge({
      name: 'outbox_slot_retained_wal_bytes',
      help: 'WAL the slot keeps on the server: pg_current_wal_lsn() - restart_lsn, in bytes.',
      registers: r,
    });
    this.confirmedLagBytes = new Gauge({
      name: 'outbox_slot_confirmed_lag_bytes',
      help: 'WAL written since the slot confirmed_flush_lsn: pg_current_wal_lsn() - confirmed_flush_lsn, in bytes.',
      registers: r,
    });
    this.active = new Gauge({
      name: 'outbox_slot_active',
      help: '1 while a process streams from the slot, else 0.',
      registers: r,
    });
    this.walStatus = new Gauge({
      name: 'outbox_slot_wal_status',
      help: 'The slot wal_status: 1 for the current one (reserved, extended, unreserved, lost).',
      labelNames: ['status'],
      registers: r,
    });
    this.safeWalSizeBytes = new Gauge({
      name: 'outbox_slot_safe_wal_size_bytes',
      help: 'WAL that may still be written before the slot risks invalidation; -1 when unlimited or not watched here.',
      registers: r,
    });
    this.clear();
  }

  /** No longer watched (this instance stopped holding the slot): report nothing stale. */
  clear(): void {
    this.retainedWalBytes.set(0);
    this.confirmedLagBytes.set(0);
    this.active.set(0);
    this.walStatus.reset();
    // -1 like "unlimited": never read as an exhausted budget.
    this.safeWalSizeBytes.set(-1);
    this.failoverReady.reset();
    this.failoverStalled.set(0);
  }
}

/**
 * The health verdict of `outbox-relay status` (ops/status-report.ts), as the relay's HTTP server
 * last read it (http/health-watch.ts): the same verdict /readyz's body and the console
 * show. Nothing is exported until the first reading.
 */
export class HealthMetrics {
  readonly verdict: Gauge<'verdict'>;
  readonly problems: Gauge<'problem'>;

  constructor(registry: Registry) {
    const r = [registry];
    this.verdict = new Gauge({
      name: 'outbox_health',
      help: 'The health verdict of `outbox-relay status` (healthy, degraded, unhealthy; unknown: unreadable): 1 for the current one.',
      labelNames: ['verdict'],
      registers: r,
    });
    this.problems = new Gauge({
      name: 'outbox_health_problems',
      help: 'Problems of the health verdict, by id (e.g. dead_events, slot_inactive): 1 while present, else 0.',
      labelNames: ['problem'],
      registers: r,
    });
  }
}
