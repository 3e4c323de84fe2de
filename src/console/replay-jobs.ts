import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { describeFilter, type EventFilter } from '../ops/event-filter.ts';
import { audit, type OpsContext } from '../ops/operator.ts';
import { replayEvents } from '../ops/replay.ts';
import { parseLsn } from '../replication/lsn.ts';
import { readSlot } from '../sweeper/slot-watch.ts';

export type ReplayState = 'copying' | 'publishing' | 'done' | 'failed';

export interface ReplayJobView {
  id: string;
  startedAt: number;
  state: ReplayState;
  copied: number;
  total: number;
  published: number;
  pending: number;
  /** Copies that failed, died or were parked behind a failed event of their aggregate. */
  unhealthy: number;
  message: string;
  filter: Record<string, string>;
  replayedAt: string;
}

interface Job extends ReplayJobView {
  /** Copies have ids above this (the table's max id before the first copy). */
  floorId: string | null;
  /** The WAL position after the last copy committed: once the slot confirmed past it, every copy is settled. */
  endLsn: string | null;
  checkedAt: number;
}

export interface ReplayJobsDeps {
  pool: pg.Pool;
  /** Quoted table name. */
  table: string;
  slot: string;
  batchSize: number;
  log: Logger;
  /** The operator context of the CLI, for its audit log. */
  opsContext: (db: pg.ClientBase) => OpsContext;
}

const KEEP = 10;

/**
 * Replays started from the console: copies by ops/replay.ts (the CLI's replayEvents, in batches),
 * then progress until the copies are published. One replay copies at a time; the last few are
 * kept in memory for their progress pages. Progress is read on request (at most every 500 ms):
 * the copies by status (ids above the floor, this replay's x-replayed-at header), and the slot's
 * confirmed position against the end of the copies — past it, every copy is settled (published,
 * or its failure recorded), also when the relay does not mark rows published.
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
      floorId: null,
      endLsn: null,
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
      const floor = await client.query<{ max: string }>(
        `SELECT coalesce(max(id), 0)::text AS max FROM ${table}`,
      );
      job.floorId = floor.rows[0]!.max;
      const r = await replayEvents(client, table, filter, {
        batchSize,
        dryRun: false,
        replayedAt,
        onBatch: (n) => {
          job.copied = n;
        },
      });
      job.copied = r.count;
      job.total = r.count;
      const end = await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      job.endLsn = end.rows[0]!.lsn;
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
    const { pool, table, slot } = this.#d;
    const r = await pool.query<{ status: string; n: string }>(
      `SELECT status, count(*)::text AS n FROM ${table}
        WHERE id > $1::bigint AND headers->>'x-replayed-at' = $2 GROUP BY status`,
      [job.floorId, job.replayedAt],
    );
    const by = new Map(r.rows.map((x) => [x.status, Number(x.n)]));
    job.unhealthy = (by.get('failed') ?? 0) + (by.get('dead') ?? 0) + (by.get('parked') ?? 0);
    const s = await readSlot(pool, slot);
    const settled =
      s?.confirmedFlushLsn && job.endLsn ? parseLsn(s.confirmedFlushLsn) >= parseLsn(job.endLsn) : false;
    // 'pending' here means not yet published: past the confirmed position nothing is.
    job.pending = settled ? 0 : (by.get('pending') ?? 0);
    // Past the confirmed position a pending copy was published (the relay may not mark rows).
    job.published = settled
      ? job.total - job.unhealthy - (by.get('discarded') ?? 0)
      : (by.get('published') ?? 0);
    if (settled || job.pending === 0) {
      job.state = 'done';
      job.message = job.unhealthy
        ? `done: ${job.published} published; ${job.unhealthy} copies failed or are parked (see Events)`
        : `done: every copy is published`;
    }
    return view(job);
  }
}

function view(j: Job): ReplayJobView {
  const { floorId: _f, endLsn: _e, checkedAt: _c, ...v } = j;
  return { ...v };
}
