import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { sleep } from '../relay/backoff.ts';
import { readSlot } from './slot-watch.ts';

export interface RetentionDeps {
  db: pg.Pool;
  /** Quoted schema.table (OutboxStore.table). */
  table: string;
  /** Unquoted schema.table: the advisory lock key is derived from it. */
  tableName: string;
  slot: string;
  /** Rows older than this (created_at) are pruned when published or discarded. */
  publishedRetentionMs: number;
  /** Dead rows older than this are pruned; undefined = never. */
  deadRetentionMs?: number;
  /** false: published rows stay 'pending'; they are pruned only once the slot confirmed past them. */
  markPublished: boolean;
  batchSize: number;
  /** Pause between two batches, so no lock and no I/O burst lasts. */
  pauseMs?: number;
  /** Work per round; the rest waits for the next round (the sweeper then comes back at once). */
  maxRoundMs?: number;
  metrics: RelayMetrics;
  log: Logger;
}

export type PruneResult = {
  deleted: Record<string, number>;
  batches: number;
  /** The round stopped at maxRoundMs with rows left to delete. */
  more: boolean;
};

/** Marks kept while the slot has not confirmed past them (a stalled relay must not grow the list). */
const MAX_MARKS = 64;

/**
 * Retention: deletes settled rows older than their window, in small batches (each its own short
 * statement, a pause between), one pruner at a time per table (pg_try_advisory_lock).
 *
 *  - 'published' and 'discarded' (an operator gave up; kept for audit): after --retention-published-ms;
 *  - 'dead': only when --retention-dead-ms is set;
 *  - 'failed', 'parked': never (they still need the sweeper or an operator);
 *  - 'pending' with --no-mark-published (rows the broker acknowledged stay 'pending'): after the
 *    published window, and only rows whose transaction the slot has confirmed past — see below.
 *
 * Which pending rows has the slot confirmed? A row's commit LSN is not stored, so each round takes
 * a mark: X = xmin of a fresh snapshot (every transaction with an xid below X has ended), then
 * L = pg_current_wal_insert_lsn() (every commit record of those transactions lies below L). Once
 * the slot's confirmed_flush_lsn reaches L, every committed transaction with xid < X is settled
 * (broker-acknowledged, or recorded 'failed'/'parked', which moves the row out of 'pending').
 * A pending row whose xmin precedes X (age(xmin) > age(X)) is then safe to delete. Marks live in
 * memory; after a restart pruning of pending rows resumes one round later. A slot dropped and
 * recreated confirms past rows it never relayed: that is the invalidated-slot case, which
 * needs a replay anyway (docs/operations.md).
 */
export class Retention {
  readonly #d: RetentionDeps;
  #marks: { xmin: string; lsn: string }[] = [];
  /** The newest mark the slot confirmed past: pending rows with an older xmin are settled. */
  #safeXmin: string | null = null;

  constructor(deps: RetentionDeps) {
    this.#d = deps;
  }

  /** The xmin below which pending rows are known to be relayed (marking off); null until known. */
  get safeXmin(): string | null {
    return this.#safeXmin;
  }

  /** One pruning round; null when another process holds the pruning lock. */
  async pruneOnce(signal: AbortSignal = new AbortController().signal): Promise<PruneResult | null> {
    const d = this.#d;
    const client = await d.db.connect();
    const key = `pg-outbox-relay:prune:${d.tableName}`;
    let broken: Error | undefined;
    try {
      const lock = await client.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok',
        [key],
      );
      if (!lock.rows[0]?.ok) return null;
      try {
        const result: PruneResult = { deleted: {}, batches: 0, more: false };
        const deadline = Date.now() + (d.maxRoundMs ?? 5000);
        await this.#deleteAll(
          client,
          `status IN ('published', 'discarded') AND created_at < now() - $1::bigint * interval '1 millisecond'`,
          [d.publishedRetentionMs],
          result,
          signal,
          deadline,
        );
        if (d.deadRetentionMs !== undefined) {
          await this.#deleteAll(
            client,
            `status = 'dead' AND created_at < now() - $1::bigint * interval '1 millisecond'`,
            [d.deadRetentionMs],
            result,
            signal,
            deadline,
          );
        }
        if (!d.markPublished) {
          await this.#advanceMarks(client);
          if (this.#safeXmin !== null) {
            await this.#deleteAll(
              client,
              `status = 'pending' AND created_at < now() - $1::bigint * interval '1 millisecond'
                 AND age(xmin) > age($2::text::xid)`,
              [d.publishedRetentionMs, this.#safeXmin],
              result,
              signal,
              deadline,
            );
          }
        }
        const total = Object.values(result.deleted).reduce((a, b) => a + b, 0);
        if (total > 0) d.log.info({ deleted: result.deleted, batches: result.batches }, 'retention: pruned');
        return result;
      } finally {
        // Unlock failed: closing the connection (release(broken) below) frees the lock.
        await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]).catch((e) => {
          broken = e as Error;
        });
      }
    } catch (e) {
      // The connection may be dead or still hold the lock: do not hand it back to the pool.
      broken = e as Error;
      throw e;
    } finally {
      client.release(broken);
    }
  }

  /** Batched deletes until nothing matches (or stop): each batch a short statement, a pause between. */
  async #deleteAll(
    client: pg.PoolClient,
    where: string,
    params: unknown[],
    result: PruneResult,
    signal: AbortSignal,
    deadline: number,
  ): Promise<void> {
    const d = this.#d;
    const n = params.length + 1;
    while (!signal.aborted && !result.more) {
      // SKIP LOCKED: a row someone holds (an operator's command) waits for the next round.
      const r = await client.query<{ status: string; n: string }>(
        `WITH gone AS (
           DELETE FROM ${d.table} WHERE id IN (
             SELECT id FROM ${d.table} WHERE ${where} LIMIT $${n} FOR UPDATE SKIP LOCKED)
           RETURNING status)
         SELECT status, count(*)::text AS n FROM gone GROUP BY status`,
        [...params, d.batchSize],
      );
      let deleted = 0;
      for (const row of r.rows) {
        const k = Number(row.n);
        deleted += k;
        result.deleted[row.status] = (result.deleted[row.status] ?? 0) + k;
        d.metrics.pruned.inc({ status: row.status }, k);
      }
      if (deleted === 0) return;
      result.batches++;
      if (deleted < d.batchSize) return;
      if (Date.now() >= deadline) {
        result.more = true;
        return;
      }
      await sleep(d.pauseMs ?? 20, signal);
    }
  }

  /** Promotes marks the slot confirmed past to the safe xmin, then takes a new mark. */
  async #advanceMarks(client: pg.PoolClient): Promise<void> {
    const d = this.#d;
    const confirmed = (await readSlot(client, d.slot))?.confirmedFlushLsn ?? null;
    if (confirmed !== null && this.#marks.length > 0) {
      const passed = await client.query<{ i: number }>(
        'SELECT i::int FROM unnest($1::pg_lsn[]) WITH ORDINALITY AS m(lsn, i) WHERE lsn <= $2::pg_lsn ORDER BY i DESC LIMIT 1',
        [this.#marks.map((m) => m.lsn), confirmed],
      );
      const i = passed.rows[0]?.i;
      if (i !== undefined) {
        this.#safeXmin = this.#marks[i - 1]!.xmin;
        this.#marks = this.#marks.slice(i);
      }
    }
    if (this.#marks.length >= MAX_MARKS) return;
    // Two statements, in this order: the snapshot's xmin first, the insert position after it.
    const x = await client.query<{ xmin: string }>(
      'SELECT xid(pg_snapshot_xmin(pg_current_snapshot()))::text AS xmin',
    );
    const l = await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
    this.#marks.push({ xmin: x.rows[0]!.xmin, lsn: l.rows[0]!.lsn });
  }
}
