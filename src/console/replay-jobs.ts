import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import type { Logger } from '../observability/logger.ts';
import { describeFilter } from '../ops/event-filter.ts';
import { audit, type OpsContext } from '../ops/operator.ts';
import { copiesState, replayEvents } from '../ops/replay.ts';

export type ReplayState = 'copying' | 'publishing' | 'done' | 'failed';

export interface ReplayJobView {
  id: string;
  startedAt: number;
  state: ReplayState;
  copied: number;
  total: number;
  published: number;
  pending: number;
  /** Copies that died or were discarded: they will not be published. */
  unhealthy: number;
  message: string;
  filter: Record<string, string>;
  replayedAt: string;
}

interface Job extends ReplayJobView {
  /** Copies have ids above this (the table's max id before the first copy). */
  ceiling: string | null;
  checkedAt: number;
}

export interface ReplayJobsDeps {
  pool: pg.Pool;
  /** Quoted table name. */
  table: string;
  batchSize: number;
  log: Logger;
  /** The operator context of the CLI, for its audit log. */
  opsContext: (db: pg.ClientBase) => OpsContext;
}

const KEEP = 10;

/**
 * Replays started from the console: copies by ops/replay.ts (the CLI's replayEvents, in batches),
 * then progress until the copies are published, read with the CLI's copiesState (what
 * `replay --follow` polls) on request, at most every 500 ms. One replay copies at a time; the
 * last few are kept in memory for their progress pages.
 */
export class ReplayJobs {
  readonly #d: ReplayJobsDeps;
  readonly #jobs = new Map<string, Job>();

  constructor(d: ReplayJobsDeps) {
    this.#d = d;
  }

  list(): ReplayJobView[] {
    return [...this.#jobs.values()].reverse().map(view);
  }

  busy(): boolean {
    return [...this.#jobs.values()].some((j) => j.state === 'copying');
  }

  start(filter: EventFilter, expected: number, via: Record<string, unknown>): ReplayJobView {
    const replayedAt = new Date();
    const job: Job = {
      id: randomBytes(8).toString('hex'),
      startedAt: replayedAt.getTime(),
      state: 'copying',
      copied: 0,
      total: expected,
      published: 0,
      pending: 0,
      unhealthy: 0,
      message: 'copying events in batches',
      filter: describeFilter(filter),
      replayedAt: replayedAt.toISOString(),
      ceiling: null,
      checkedAt: 0,
    };
    this.#jobs.set(job.id, job);
    while (this.#jobs.size > KEEP) this.#jobs.delete(this.#jobs.keys().next().value!);
    void this.#copy(job, filter, replayedAt, via);
    return view(job);
  }

  async #copy(job: Job, filter: EventFilter, replayedAt: Date, via: Record<string, unknown>): Promise<void> {
    const { pool, table, batchSize, log } = this.#d;
    let client: pg.PoolClient | null = null;
    let error: string | null = null;
    try {
      client = await pool.connect();
      const r = await replayEvents(client, table, filter, {
        includeReplays: false,
        batchSize,
        replayedAt,
        onBatch: (n) => {
          job.copied = n;
        },
      });
      job.copied = r.count;
      job.total = r.count;
      job.ceiling = r.ceiling;
      job.state = 'publishing';
      job.message = 'copies committed; waiting for the relay to publish them';
    } catch (e) {
      error = errorMessage(e);
      job.state = 'failed';
      job.message = `replay failed after ${job.copied} copied (earlier batches stay committed): ${error}`;
      log.warn({ err: error, replayedAt: job.replayedAt }, 'console replay failed');
    } finally {
      if (client) {
        // The CLI's audit line; a failure is audited too, with the rows copied before it.
        await audit(
          this.#d.opsContext(client),
          'replay',
          { filter: job.filter, replayedAt: job.replayedAt, ...via, ...(error ? { error } : {}) },
          job.copied,
        ).catch((e) => log.warn({ err: errorMessage(e) }, 'console replay: audit log failed'));
        client.release();
      }
    }
  }

  /** The job with fresh progress; null when unknown (or forgotten). */
  async get(id: string, now = Date.now()): Promise<ReplayJobView | null> {
    const job = this.#jobs.get(id);
    if (!job) return null;
    if (job.state !== 'publishing' || now - job.checkedAt < 500) return view(job);
    job.checkedAt = now;
    const c = job.ceiling
      ? await withClient(this.#d.pool, (db) =>
          copiesState(db, this.#d.table, { ceiling: job.ceiling!, replayedAt: new Date(job.replayedAt) }),
        )
      : { total: 0, published: 0, inFlight: 0, dead: 0, discarded: 0 };
    job.published = c.published;
    job.pending = c.inFlight;
    job.unhealthy = c.dead + c.discarded;
    if (c.inFlight === 0) {
      job.state = 'done';
      job.message = job.unhealthy
        ? `done: ${c.published} published; ${job.unhealthy} copies are dead or discarded (see Events)`
        : 'done: every copy is published';
    }
    return view(job);
  }
}

function view(j: Job): ReplayJobView {
  const { ceiling: _c, checkedAt: _t, ...v } = j;
  return { ...v };
}

async function withClient<T>(pool: pg.Pool, fn: (db: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}
