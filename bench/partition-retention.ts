/**
 * Retention of N published rows ten days old: row by row (a plain outbox) against one partition
 * dropped (`migrate --partitioned`), on a throwaway cluster of the given version, with an insert
 * into the outbox every ~2 ms meanwhile. Prints one JSON line per table: the round's time, the
 * WAL written, the dead tuples left for vacuum, and the inserts' latency (p50, max) — what the
 * root's lock at the drop costs writers (docs/outbox-table.md#partitioning).
 *
 *   node bench/partition-retention.ts [version=18] [rows=300000]
 */

import pg from 'pg';
import pino from 'pino';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { recordProgressRanges } from '../src/lifecycle/progress.ts';
import { Retention } from '../src/lifecycle/retention.ts';
import { RelayMetrics } from '../src/observability/metrics.ts';
import { migrate } from '../src/store/migrate.ts';
import { ensurePartitions } from '../src/store/partitions.ts';
import { currentTimeline } from '../src/store/timeline.ts';

const VERSION = process.argv[2] ?? '18';
const N = Number(process.argv[3] ?? 300000);
const DAY = 86400000;
const s = await startThrowawayPostgres({ version: VERSION });
const pool = new pg.Pool({ connectionString: s.url, max: 4 });
try {
  for (const partitioned of [false, true]) {
    const table = partitioned ? 'po' : 'plain';
    const c = await pool.connect();
    await migrate(c, { schema: 'public', table, publication: `${table}_pub`, partitioned });
    const old = new Date(Math.floor((Date.now() - 10 * DAY) / DAY) * DAY);
    if (partitioned)
      await ensurePartitions(c, { schema: 'public', table }, { now: old, ahead: 0, interval: 'day' });
    c.release();
    await pool.query(
      `INSERT INTO ${table} (aggregate_type, aggregate_id, event_type, payload, created_at)
       SELECT 'T', 'k' || (g % 100), 'E', convert_to(repeat('x', 200), 'UTF8'), $1::timestamptz + g * interval '100 ms' FROM generate_series(1, $2) g`,
      [old, N],
    );
    await recordProgressRanges(
      pool,
      `"public"."${table}_relay_progress"`,
      's',
      `{[1,${N + 1})}`,
      await currentTimeline(pool),
    );
    await pool.query(`VACUUM ANALYZE ${table}`);
    const r = new Retention({
      db: pool,
      table: `"public"."${table}"`,
      tableName: `public.${table}`,
      progress: `"public"."${table}_relay_progress"`,
      publishedRetentionMs: 7 * DAY,
      batchSize: 1000,
      pauseMs: 20,
      maxRoundMs: 600000,
      metrics: new RelayMetrics(),
      log: pino({ level: 'silent' }),
    });
    const wal0 = (await pool.query(`SELECT pg_current_wal_lsn() AS l`)).rows[0].l;
    let going = true;
    const lat: number[] = [];
    const ins = (async () => {
      while (going) {
        const a = performance.now();
        await pool.query(
          `INSERT INTO ${table} (aggregate_type, aggregate_id, event_type, payload) VALUES ('T', 'now', 'E', NULL)`,
        );
        lat.push(performance.now() - a);
        await new Promise((res) => setTimeout(res, 2));
      }
    })();
    const t0 = performance.now();
    const res = await r.pruneOnce();
    const ms = performance.now() - t0;
    going = false;
    await ins;
    lat.sort((a, b) => a - b);
    const wal = (await pool.query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS b`, [wal0]))
      .rows[0].b;
    const dead = (
      await pool.query(
        `SELECT coalesce(sum(n_dead_tup),0)::int AS d FROM pg_stat_user_tables WHERE relname LIKE $1`,
        [`${table}%`],
      )
    ).rows[0].d;
    console.log(
      JSON.stringify({
        version: VERSION,
        table: partitioned ? 'partitioned' : 'plain',
        rows: N,
        pruneMs: Math.round(ms),
        inserts: lat.length,
        insertP50Ms: +lat[Math.floor(lat.length / 2)]!.toFixed(2),
        insertMaxMs: +lat.at(-1)!.toFixed(1),
        walBytes: Number(wal),
        deadTuples: dead,
        deleted: res?.deleted,
        partitions: res?.partitions,
      }),
    );
  }
} finally {
  await pool.end();
  await s.stop();
}
