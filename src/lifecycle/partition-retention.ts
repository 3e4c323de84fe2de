import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import type { RelayMetrics } from '../observability/metrics.ts';
import { PARTITION_LOCK_TIMEOUT_MS, type Partitioning } from '../store/partitions.ts';
import { SqlState, sqlStateOf } from '../store/pg-errors.ts';
import { agedPartitions, type PartitionInfo } from './partition-plan.ts';
import { publishedSql } from './progress.ts';
import { PRUNABLE } from './statuses.ts';

export interface PartitionRetentionDeps {
  /** Quoted schema.table of the partitioned root. */
  table: string;
  /** Quoted progress table. */
  progress: string;
  publishedRetentionMs: number;
  deadRetentionMs?: number;
  metrics: RelayMetrics;
  log: Logger;
  /** Partitions already warned about as held: said again at debug level only (the round repeats every minute). */
  warned?: Set<string>;
}

export interface DroppedPartitions {
  /** Rows of the dropped partitions, by truthful status. */
  deleted: Record<string, number>;
  dropped: string[];
  /** Partitions past the window kept because they hold a row whose outcome is not settled. */
  held: string[];
}

/**
 * Retention of a partitioned outbox: drops whole partitions instead of deleting rows (no dead
 * tuples, no vacuum). A partition is dropped when its upper bound is older than
 * --retention-published-ms and every row in it is settled, as row retention decides
 * (retention.ts): published (per the row, or 'pending' and covered by a slot's progress record)
 * or discarded; 'dead' only when --retention-dead-ms is set and the partition is older than it,
 * and never a dead row parked followers of its aggregate wait behind.
 * A 'pending' row no record covers, a 'failed' or a 'parked' one holds its partition until the
 * stream, the sweeper or an operator settles it — whatever its age. Rows are never deleted one by
 * one in a partitioned outbox: the partition straddling the window's edge would be, every round.
 *
 * Per partition, oldest first:
 *  1. count its rows by truthful status, without a lock (a full scan of the partition, so that
 *     nothing holds the root meanwhile); any unsettled row: keep it, say so, next partition;
 *  2. in one transaction: the root's ACCESS EXCLUSIVE lock (the order inserts take: root, then
 *     partition; lock_timeout, else the next round), so no transaction is writing it and none can;
 *     the check again, on the indexes (the unsettled-rows index; the partition's ids no progress
 *     record covers, probed on the id index) — an operator may have resent a dead row, an insert
 *     may have named an old created_at; then DROP TABLE. The lock lasts the probes (2 – 4 ms for
 *     a partition of 300,000 published rows) and the drop's commit (30 – 100 ms measured;
 *     bench/partition-retention.ts, docs/outbox-table.md#partitioning).
 */
export async function dropSettledPartitions(
  client: pg.ClientBase,
  partitioning: Partitioning,
  d: PartitionRetentionDeps,
  signal: AbortSignal,
): Promise<DroppedPartitions> {
  const out: DroppedPartitions = { deleted: {}, dropped: [], held: [] };
  const now = (await client.query<{ now: Date }>('SELECT now() AS now')).rows[0]!.now;
  const cutoff = new Date(now.getTime() - d.publishedRetentionMs);
  const deadCutoff = d.deadRetentionMs === undefined ? null : new Date(now.getTime() - d.deadRetentionMs);
  for (const p of agedPartitions(partitioning.partitions, cutoff)) {
    if (signal.aborted) break;
    const deadSettled = deadCutoff !== null && p.to!.getTime() <= deadCutoff.getTime();
    const counts = await countByStatus(client, p, d);
    const unsettled = Object.entries(counts).filter(([s]) => !settled(s, deadSettled));
    if (unsettled.length) {
      out.held.push(p.name);
      const level = d.warned?.has(p.name) ? 'debug' : 'warn';
      d.warned?.add(p.name);
      d.log[level](
        { partition: p.name, unsettled: Object.fromEntries(unsettled) },
        `retention: partition ${p.name} is past the retention window but holds rows whose outcome is not settled; it is dropped once they are (they need the relay, the sweeper, or an operator: events resend / discard)`,
      );
      continue;
    }
    if (!(await dropIfSettled(client, p, d, deadSettled))) {
      out.held.push(p.name);
      continue;
    }
    out.dropped.push(p.name);
    d.warned?.delete(p.name);
    for (const [status, n] of Object.entries(counts)) {
      out.deleted[status] = (out.deleted[status] ?? 0) + n;
      d.metrics.pruned.inc({ status }, n);
    }
    d.log.info({ partition: p.name, rows: counts }, `retention: partition ${p.name} dropped`);
  }
  return out;
}

/** A truthful status retention may delete ('pending' here is a row no progress record covers). */
function settled(status: string, deadSettled: boolean): boolean {
  return (PRUNABLE as readonly string[]).includes(status) || (status === 'dead' && deadSettled);
}

/**
 * A dead row of `alias` that parked followers of its aggregate wait behind (strict ordering), in
 * any partition: it holds its partition whatever --retention-dead-ms says — dropped, it would let
 * them go out past it (row retention keeps it too, retention.ts).
 */
function deadHeadSql(root: string, alias: string): string {
  return `${alias}.status = 'dead' AND EXISTS (SELECT 1 FROM ${root} AS f WHERE f.status = 'parked'
            AND f.aggregate_type = ${alias}.aggregate_type AND f.aggregate_id = ${alias}.aggregate_id
            AND f.id > ${alias}.id)`;
}

/** The label of such a row in the held partition's log line (never settled). */
const DEAD_HEAD = 'dead (parked followers wait behind it)';

/** The partition's rows by truthful status ('published' for 'pending' rows a progress record covers). */
async function countByStatus(
  client: pg.ClientBase,
  p: PartitionInfo,
  d: Pick<PartitionRetentionDeps, 'table' | 'progress'>,
): Promise<Record<string, number>> {
  const r = await client.query<{ status: string; n: string }>(
    `SELECT CASE WHEN o.status = 'pending' AND ${publishedSql(d.progress)} @> o.id THEN 'published'
                 WHEN ${deadHeadSql(d.table, 'o')} THEN '${DEAD_HEAD}'
                 ELSE o.status END AS status,
            count(*)::text AS n
       FROM ${p.qualified} AS o GROUP BY 1`,
  );
  return Object.fromEntries(r.rows.map((x) => [x.status, Number(x.n)]));
}

/**
 * Step 2: under the root's lock, checks again on the indexes and drops. False = kept (a row
 * changed, or the lock was busy). Exported for its test (the race it closes cannot be timed).
 */
export async function dropIfSettled(
  client: pg.ClientBase,
  p: PartitionInfo,
  d: PartitionRetentionDeps,
  deadSettled: boolean,
): Promise<boolean> {
  const blocking = deadSettled ? `('failed', 'parked')` : `('failed', 'parked', 'dead')`;
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL lock_timeout = ${PARTITION_LOCK_TIMEOUT_MS}`);
    await client.query(`LOCK TABLE ${d.table} IN ACCESS EXCLUSIVE MODE`);
    // The ids of the partition no progress record covers: usually none (no row is read); else
    // each such run is probed on the id index for one 'pending' row.
    const r = await client.query<{ held: boolean }>(
      `WITH b AS (SELECT min(id) AS lo, max(id) AS hi FROM ${p.qualified}),
            gaps AS (SELECT g FROM b, unnest(int8multirange(int8range(b.lo, b.hi, '[]')) - ${publishedSql(d.progress)}) AS g
                      WHERE b.lo IS NOT NULL)
       SELECT EXISTS (SELECT 1 FROM ${p.qualified} WHERE status IN ${blocking})
           OR EXISTS (SELECT 1 FROM ${p.qualified} AS o WHERE ${deadHeadSql(d.table, 'o')})
           OR EXISTS (SELECT 1 FROM gaps, LATERAL (SELECT 1 FROM ${p.qualified} AS o
                                                    WHERE o.id >= lower(g) AND o.id < upper(g) AND o.status = 'pending'
                                                    LIMIT 1) AS x) AS held`,
    );
    if (r.rows[0]!.held) {
      await client.query('ROLLBACK');
      d.log.info({ partition: p.name }, 'retention: a row of the partition changed before its drop; kept');
      return false;
    }
    await client.query(`DROP TABLE ${p.qualified}`);
    await client.query('COMMIT');
    return true;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    // The root is busy (lock_timeout): the next round tries again.
    if (sqlStateOf(e) === SqlState.LOCK_NOT_AVAILABLE) {
      d.log.info(
        { partition: p.name },
        'retention: the outbox was busy; the partition is dropped at a later round',
      );
      return false;
    }
    throw e;
  }
}
