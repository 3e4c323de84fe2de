import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import type { OperatorEvents } from '../lifecycle/operator-events.ts';
import { RESOLVABLE, STATUSES, UNHEALTHY } from '../lifecycle/statuses.ts';
import { type RelayView, readSample } from '../observability/health.ts';
import { describeFilter, parseFilter } from '../ops/event-filter.ts';
import { selectTargets, showEvent } from '../ops/events.ts';
import { OpsInputError } from '../ops/input-error.ts';
import { reasonOf, remedyFor } from '../ops/remedies.ts';
import { countReplay } from '../ops/replay.ts';
import { REPLAYABLE_BY_DEFAULT } from '../ops/replay-command.ts';
import type { HealthSource } from '../ops/status-report.ts';
import { readSlot, type SlotReading } from '../sweeper/slot-watch.ts';
import type { WalStatus } from '../sweeper/wal-budget.ts';
import { actionOf, replayFilter } from './actions.ts';
import type { Plan } from './pages/actions.ts';
import type { EventData } from './pages/event.ts';
import type { EventsData } from './pages/events.ts';
import type { OverviewData } from './pages/overview.ts';
import type { ReplayFormData } from './pages/replay.ts';
import { filterOptions, filterParams, oneId } from './params.ts';
import { describeState } from './relay-state.ts';
import type { ReplayJobs } from './replay-jobs.ts';
import type { Sampler } from './sampler.ts';

/**
 * What each console page shows, read from the database, the relay and the sampler: the
 * overview, the events list, one event, an action's preview and the replay form. The HTML is in
 * pages/; this file only reads, each query on the console's pool, bounded by a page size or a
 * LIMIT (the pool's statement timeout bounds the rest). Bad filter input becomes the page's
 * error text; anything else is thrown for console.ts to answer. The one cache, the counts by
 * status (15 s), is a Counts object that the actions reset after a change.
 */

const PAGE_SIZE = 50;
const PREVIEW_ROWS = 20;
const FOLLOWERS_SHOWN = 50;
const COUNTS_CACHE_MS = 15_000;

export async function withClient<T>(pool: pg.Pool, fn: (db: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}

/** The overview's counts by status, cached for 15 s (a count of a large table is not free). */
export class Counts {
  #last: { at: number; byStatus: Record<string, number> } | null = null;

  async read(pool: pg.Pool, events: OperatorEvents): Promise<OverviewData['counts']> {
    const last = this.#last;
    if (last && Date.now() - last.at < COUNTS_CACHE_MS) return { byStatus: last.byStatus, error: null };
    try {
      const byStatus = await withClient(pool, (db) => events.count(db, { statuses: [...STATUSES] }));
      this.#last = { at: Date.now(), byStatus };
      return { byStatus, error: null };
    } catch (e) {
      return { byStatus: this.#last?.byStatus ?? {}, error: `cannot count the events: ${errorMessage(e)}` };
    }
  }

  /** After an action: the next overview counts again. */
  forget(): void {
    this.#last = null;
  }
}

export interface PageDataDeps {
  pool: pg.Pool;
  relay: RelayView;
  health: HealthSource;
  slot: string;
  /** The events of the pages: the outbox table's, or with --compat debezium the side table's. */
  events: OperatorEvents;
  /** Quoted name of the relay's own table (replay copies its rows). */
  table: string;
  topicOf: (aggregateType: string, eventType: string) => string;
  sampler: Sampler;
  counts: Counts;
  jobs: ReplayJobs;
}

export class PageData {
  readonly #d: PageDataDeps;

  constructor(d: PageDataDeps) {
    this.#d = d;
  }

  async overview(): Promise<OverviewData> {
    const d = this.#d;
    const s = await readSample(d.relay);
    // One reading for the verdict and the slot card, and one that has every state change of the
    // relay before this sample in it: the page never shows two answers at once.
    const health = await d.health.settled();
    let slot: OverviewData['slot']['reading'] = null;
    let slotError: string | null = null;
    if (health.report) {
      const r = health.report.slot;
      slotError = r.error;
      slot = r.exists
        ? {
            active: r.active === true,
            activePid: r.activePid,
            walStatus: r.walStatus as WalStatus | null,
            invalidationReason: (r.invalidationReason ?? null) as SlotReading['invalidationReason'],
            safeWalSizeBytes: r.safeWalSizeBytes,
            retainedBytes: r.retainedWalBytes ?? 0,
            confirmedLagBytes: r.lagBytes ?? 0,
          }
        : null;
    } else {
      // The status could not be read (the verdict says why): the slot as the relay reads it.
      try {
        slot = await readSlot(d.pool, d.slot);
      } catch (e) {
        slotError = errorMessage(e);
      }
    }
    const unhealthy = await withClient(d.pool, (db) => d.events.list(db, { statuses: [...RESOLVABLE] }, 10));
    const history = d.sampler.history;
    return {
      now: s.at,
      health,
      state: describeState(s),
      confirmedLsn: s.confirmedLsn,
      secondsSinceProgress: s.lastProgressAt === null ? null : (s.at - s.lastProgressAt) / 1000,
      slot: { reading: slot, error: slotError },
      secondsToExhaustion: history.secondsToExhaustion(),
      points: history.points(),
      spanMs: history.spanMs,
      counts: await d.counts.read(d.pool, d.events),
      publishRate: history.publishRate(),
      lastRelayError: d.sampler.lastRelayError,
      unhealthy,
    };
  }

  async events(q: URLSearchParams): Promise<EventsData> {
    const d = this.#d;
    const params = filterParams(q);
    let filter: EventFilter;
    try {
      filter = parseFilter(filterOptions(params), { allowed: STATUSES, fallback: UNHEALTHY });
    } catch (e) {
      if (!(e instanceof OpsInputError)) throw e;
      return { params, error: e.message, rows: [], counts: {}, nextAfterId: null, limit: PAGE_SIZE };
    }
    params.status = [...filter.statuses];
    const { afterId: _page, ...whole } = filter;
    return withClient(d.pool, async (db) => {
      const rows = await d.events.list(db, filter, PAGE_SIZE);
      return {
        params,
        error: null,
        rows,
        counts: await d.events.count(db, whole),
        nextAfterId: rows.length === PAGE_SIZE ? rows[rows.length - 1]!.id : null,
        limit: PAGE_SIZE,
      };
    });
  }

  /** `rawId` as the path gave it (checked inside, as before the split). */
  event(rawId: string | undefined): Promise<EventData> {
    const d = this.#d;
    return withClient(d.pool, async (db) => {
      const e = await showEvent(db, d.events, oneId(rawId));
      const same = { aggregateType: e.aggregate_type, aggregateId: e.aggregate_id };
      const followers = await d.events.list(
        db,
        { statuses: ['parked'], ...same, afterId: e.id },
        FOLLOWERS_SHOWN,
      );
      const heldBy =
        e.status === 'parked'
          ? ((await d.events.list(db, { statuses: [...RESOLVABLE], ...same }, 1))[0] ?? null)
          : null;
      let topic: string | null = null;
      try {
        topic = d.topicOf(e.aggregate_type, e.event_type);
      } catch {
        // No legal topic: the router's error (last_error) says why.
      }
      const remedy = e.last_error ? remedyFor(reasonOf(e.last_error), topic ?? '<topic>') : null;
      return { event: e, followers, followersLimit: FOLLOWERS_SHOWN, heldBy, topic, remedy };
    });
  }

  /** What a resend or discard would change: one event (with its parked followers) or a filter's. */
  preview(q: URLSearchParams): Promise<Plan> {
    const d = this.#d;
    return withClient(d.pool, async (db) => {
      const action = actionOf(q.get('action'));
      if (q.get('scope') === 'filter') {
        const params = filterParams(q);
        const filter = parseFilter(filterOptions(params), { allowed: RESOLVABLE, fallback: RESOLVABLE });
        params.status = [...filter.statuses];
        const ids = await selectTargets(db, d.events, { filter }, RESOLVABLE);
        return {
          action,
          target: { filter: params, description: describeFilter(filter) },
          count: ids.length,
          throughId: ids[ids.length - 1] ?? null,
          first: await d.events.list(db, filter, PREVIEW_ROWS),
          followers: 0,
        };
      }
      const id = oneId(q.get('id'));
      // Validates like the CLI: the event exists and is failed or dead.
      await selectTargets(db, d.events, { ids: [id] }, RESOLVABLE);
      const e = await showEvent(db, d.events, id);
      const parked = await d.events.count(db, {
        statuses: ['parked'],
        aggregateType: e.aggregate_type,
        aggregateId: e.aggregate_id,
        afterId: e.id,
      });
      return { action, target: { id }, count: 1, throughId: id, first: [e], followers: parked.parked ?? 0 };
    });
  }

  /** The replay form: the replays kept, and a dry run once a window was given. */
  async replay(q: URLSearchParams): Promise<ReplayFormData> {
    const d = this.#d;
    const params = filterParams(q);
    const base = { params, jobs: d.jobs.list() };
    if (
      !params.since &&
      !params.until &&
      !params.aggregateType &&
      !params.aggregateId &&
      !params.eventType &&
      !params.status.length
    ) {
      params.status = [...REPLAYABLE_BY_DEFAULT];
      return { ...base, error: null, preview: null };
    }
    let filter: EventFilter;
    try {
      filter = replayFilter(params);
    } catch (e) {
      if (!(e instanceof OpsInputError)) throw e;
      return { ...base, error: e.message, preview: null };
    }
    params.status = [...filter.statuses];
    const r = await withClient(d.pool, (db) => countReplay(db, d.table, filter, { includeReplays: false }));
    return { ...base, error: null, preview: { ...r, description: describeFilter(filter) } };
  }
}
