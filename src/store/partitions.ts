import type pg from 'pg';
import {
  inferInterval,
  missingPartitions,
  type PartitionInfo,
  type PartitionInterval,
  partitionName,
} from '../lifecycle/partition-plan.ts';
import { qualified } from './sql-ident.ts';

/**
 * The catalog side of a partitioned outbox (lifecycle/partition-plan.ts has the rules): is the
 * table partitioned, by what, which partitions does it have, and creating the ones ahead.
 */

export interface Partitioning {
  /** The partition key's column(s) and strategy ('r' = range), as pg_partitioned_table says. */
  key: string[];
  strategy: string;
  partitions: PartitionInfo[];
}

/** How long a CREATE/DROP of a partition waits for the root's lock before giving up until next round. */
export const PARTITION_LOCK_TIMEOUT_MS = 1000;

/**
 * The table's partitioning; null when it is not partitioned. `table` is the quoted schema.table.
 * Bounds are read as timestamptz from pg_get_expr's literals (in this session's TimeZone, cast
 * back by the same session): MINVALUE/MAXVALUE give null, DEFAULT gives isDefault.
 */
export async function readPartitioning(
  db: pg.Pool | pg.ClientBase,
  table: string,
): Promise<Partitioning | null> {
  const root = await db.query<{ key: string[]; strategy: string }>(
    `SELECT array(SELECT a.attname::text FROM unnest(pt.partattrs::int2[]) AS k(n)
                    JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.n) AS key,
            pt.partstrat::text AS strategy
       FROM pg_partitioned_table pt WHERE pt.partrelid = to_regclass($1)`,
    [table],
  );
  const r = root.rows[0];
  if (!r) return null;
  const parts = await db.query<{
    qualified: string;
    name: string;
    is_default: boolean;
    from: Date | null;
    to: Date | null;
  }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS qualified, c.relname::text AS name,
            b.expr = 'DEFAULT' AS is_default,
            CASE WHEN b.m[1] IS NULL OR b.m[1] = 'MINVALUE' THEN NULL ELSE b.m[1]::timestamptz END AS "from",
            CASE WHEN b.m[2] IS NULL OR b.m[2] = 'MAXVALUE' THEN NULL ELSE b.m[2]::timestamptz END AS "to"
       FROM pg_inherits i
       JOIN pg_class c ON c.oid = i.inhrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace,
            LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid) AS expr) e,
            LATERAL (SELECT e.expr,
                            regexp_match(e.expr, '^FOR VALUES FROM \\(''?([^'')]+)''?\\) TO \\(''?([^'')]+)''?\\)$') AS m) b
      WHERE i.inhparent = to_regclass($1)
      ORDER BY 5 NULLS LAST`,
    [table],
  );
  return {
    key: r.key,
    strategy: r.strategy,
    partitions: parts.rows.map((p) => ({
      qualified: p.qualified,
      name: p.name,
      isDefault: p.is_default,
      from: p.from,
      to: p.to,
    })),
  };
}

/** True when the table is partitioned the way the relay manages: by range of created_at. */
export function managedPartitioning(p: Partitioning): boolean {
  return p.strategy === 'r' && p.key.length === 1 && p.key[0] === 'created_at';
}

export interface EnsurePartitionsOptions {
  /** Intervals after the current one to keep created. */
  ahead: number;
  /** Used only when no existing partition tells the width (inferInterval). */
  interval: PartitionInterval;
  now?: Date;
}

/**
 * Creates the partitions of the current interval and the `ahead` after it that are missing;
 * returns their names. Each CREATE is its own statement with a short lock_timeout (attaching a
 * partition takes the root's ACCESS EXCLUSIVE lock for an instant): a busy root is tried again
 * at the next round, long before the missing range is needed.
 */
export async function ensurePartitions(
  db: pg.ClientBase,
  t: { schema: string; table: string },
  o: EnsurePartitionsOptions,
): Promise<string[]> {
  const root = qualified(t.schema, t.table);
  const p = await readPartitioning(db, root);
  if (!p || !managedPartitioning(p)) return [];
  const interval = inferInterval(p.partitions) ?? o.interval;
  const created: string[] = [];
  for (const r of missingPartitions(p.partitions, o.now ?? new Date(), interval, o.ahead)) {
    const name = partitionName(t.table, r.from, interval);
    await db.query('BEGIN');
    try {
      await db.query(`SET LOCAL lock_timeout = ${PARTITION_LOCK_TIMEOUT_MS}`);
      await db.query(
        `CREATE TABLE IF NOT EXISTS ${qualified(t.schema, name)} PARTITION OF ${root}
           FOR VALUES FROM ('${r.from.toISOString()}') TO ('${r.to.toISOString()}')`,
      );
      await db.query('COMMIT');
    } catch (e) {
      await db.query('ROLLBACK').catch(() => {});
      throw e;
    }
    created.push(name);
  }
  return created;
}
