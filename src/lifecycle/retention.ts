import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { sleep } from '../retry/backoff.ts';
import { managedPartitioning, readPartitioning } from '../store/partitions.ts';
import { dropSettledPartitions } from './partition-retention.ts';
import { publishedSql } from './progress.ts';
import { PRUNABLE, sqlStatuses } from './statuses.ts';

export interface RetentionDeps {
  db: pg.Pool;
  /** Quoted schema.table (OutboxStore.table). */
  table: string;
  /** Quoted progress table (OutboxStore.progress). */
  progress: string;
  /** Unquoted schema.table: the advisory lock key is derived from it. */
  tableName: string;
  /** Rows older than this (created_at) are pruned when published or discarded. */
  publishedRetentionMs: number;
  /** Dead rows older than this are pruned; undefined = never. */
  deadRetentionMs?: number;
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
  /** A partitioned outbox: the partitions dropped, and those past the window kept for an unsettled row. */
  partitions?: { dropped: string[]; held: string[] };
};

/**
 * Retention: deletes settled rows older than their window, in small batches (each its own short
 * statement, a pause between), one pruner at a time per table (pg_try_advisory_lock).
 *
 *  - published — the row says 'published' (a retry or a release), or it says 'pending' and a
 *    slot's progress record covers its id (the stream published it) — and 'discarded' (an
 *    operator gave up; kept for audit): after --retention-published-ms;
 *  - 'dead': only when --retention-dead-ms is set;
 *  - 'failed', 'parked', and 'pending' rows no progress record covers: never (their outcome is
 *    not settled: they still need the stream, the sweeper or an operator).
 *
 * The record only grows, so reading it in the statement (its snapshot) can only under-prune.
 * FOR UPDATE re-checks the row's status on its latest version: a row an operator or the sweeper
 * moves meanwhile is judged by its new status.
 *
 * An outbox partitioned by range of created_at (`migrate --partitioned`) is pruned by dropping
 * whole partitions by the same rules instead (partition-retention.ts), never row by row.
 */
export class Retention {
  readonly #d: RetentionDeps;
  /** A partitioned outbox: the partitions held by an unsettled row that were warned about. */
  readonly #warned = new Set<string>();

  constructor(deps: RetentionDeps) {
    this.#d = deps;
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
        const partitioning = await readPartitioning(client, d.table);
        if (partitioning && managedPartitioning(partitioning)) {
          const p = await dropSettledPartitions(client, partitioning, { ...d, warned: this.#warned }, signal);
          return {
            deleted: p.deleted,
            batches: 0,
            more: false,
            partitions: { dropped: p.dropped, held: p.held },
          };
        }
        const result: PruneResult = { deleted: {}, batches: 0, more: false };
        const deadline = Date.now() + (d.maxRoundMs ?? 5000);
        await this.#deleteAll(
          client,
          `created_at < now() - $1::bigint * interval '1 millisecond'
             AND (status IN ${sqlStatuses(PRUNABLE)}
                  OR (status = 'pending' AND ${publishedSql(d.progress)} @> id))`,
          [d.publishedRetentionMs],
          result,
          signal,
          deadline,
        );
        if (d.deadRetentionMs !== undefined) {
          await this.#deleteAll(
            client,
            // Not a dead head with parked followers (strict ordering): they wait for an operator
            // to resend or discard it (docs/failures.md); pruned, it would let them go out past it.
            `status = 'dead' AND created_at < now() - $1::bigint * interval '1 millisecond'
             AND NOT EXISTS (SELECT 1 FROM ${d.table} AS f WHERE f.status = 'parked'
                               AND f.aggregate_type = ${d.table}.aggregate_type
                               AND f.aggregate_id = ${d.table}.aggregate_id AND f.id > ${d.table}.id)`,
            [d.deadRetentionMs],
            result,
            signal,
            deadline,
          );
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
           RETURNING CASE status WHEN 'pending' THEN 'published' ELSE status END AS status)
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
}
