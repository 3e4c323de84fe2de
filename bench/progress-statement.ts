/**
 * What one progress statement (lifecycle/progress.ts recordProgress: the UPDATE of the slot's
 * progress record, once per recorded batch) costs the relay's process and the server's backend,
 * in-process against a throwaway PostgreSQL: N statements one after the other, as the live
 * path runs them, per variant; the variants interleaved round by round (rotated order), medians
 * over the rounds. Issue 39 item 2 (docs/benchmarks.md).
 *
 *   node bench/progress-statement.ts [--statements 2000] [--rounds 8] [--ids 100] [--only NAME]
 *                                    [--before /tmp/base]   (another checkout's recordProgress, idRanges)
 *
 * Relay CPU: process.cpuUsage() (user + system, every thread of the process) ÷ statements.
 * Server CPU: the backend's /proc/PID/schedstat run time ÷ statements.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startThrowawayPostgres } from '../src/dev/throwaway-postgres.ts';
import { idRanges } from '../src/lifecycle/id-ranges.ts';
import { recordProgress } from '../src/lifecycle/progress.ts';
import { migrate } from '../src/store/migrate.ts';
import { createPool } from '../src/store/pool.ts';
import { progressTable } from '../src/store/progress-table.ts';
import { currentTimeline, TIMELINE_SQL } from '../src/store/timeline.ts';
import { median } from './stats.ts';

const { values } = parseArgs({
  options: {
    statements: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '8' },
    ids: { type: 'string', default: '100' },
    only: { type: 'string', default: '' },
    before: { type: 'string', default: '' },
  },
});
const N = Number(values.statements);
const ROUNDS = Number(values.rounds);
const IDS = Number(values.ids);
const SLOT = 'bench_slot';

/** ns the process `pid` has run (all its threads: /proc/PID/schedstat is the thread group's for a pid). */
function runNs(pid: number): number {
  if (pid === 0) return 0;
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

type Variant = { name: string; run: (ids: string[]) => Promise<unknown>; backend: () => number };

async function main() {
  const server = await startThrowawayPostgres();
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  const pools: pg.Pool[] = [];
  const clients: pg.Client[] = [];
  try {
    await migrate(admin, { schema: 'public', table: 'outbox', publication: 'outbox_pub' });
    const progress = progressTable('public', 'outbox');
    await admin.query(`INSERT INTO ${progress} (slot_name) VALUES ($1) ON CONFLICT DO NOTHING`, [SLOT]);
    const on = await currentTimeline(admin);

    const newPool = async () => {
      // As the relay's (supervisor/relay.ts), but no idle timeout: the backend measured stays the same.
      const pool = createPool({ connectionString: server.url, max: 3, idleTimeoutMillis: 0 });
      pools.push(pool);
      const c = await pool.connect();
      const pid = (await c.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
      c.release();
      return { pool, pid };
    };
    const newClient = async () => {
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      clients.push(c);
      const pid = (await c.query<{ p: number }>('SELECT pg_backend_pid() AS p')).rows[0]!.p;
      return { c, pid };
    };
    const update = `UPDATE ${progress} SET published = published + $2::int8multirange, updated_at = now()
        WHERE slot_name = $1 AND ${TIMELINE_SQL} = $3`;
    const simple = (ranges: string) =>
      `UPDATE ${progress} SET published = published + '${ranges}'::int8multirange, updated_at = now()
        WHERE slot_name = ${admin.escapeLiteral(SLOT)} AND ${TIMELINE_SQL} = ${admin.escapeLiteral(on)}`;

    // --before: another checkout's recordProgress and idRanges, for an A/B in one process.
    type Before = { rp: typeof recordProgress; ir: typeof idRanges };
    const before: Before | null = values.before
      ? {
          rp: (await import(resolve(values.before, 'src/lifecycle/progress.ts'))).recordProgress,
          ir: (await import(resolve(values.before, 'src/lifecycle/id-ranges.ts'))).idRanges,
        }
      : null;
    const p1 = await newPool();
    const p2 = await newPool();
    const p3 = await newPool();
    const c1 = await newClient();
    const c2 = await newClient();
    const c3 = await newClient();
    const c4 = await newClient();
    const c5 = await newClient();
    const c6 = await newClient();
    const fixed = { name: 'fixed_update', text: update, values: [SLOT, '{[1,101)}', on] };
    const all: (Variant | false)[] = [
      before !== null && {
        name: 'recordProgress, pool, --before',
        run: (ids) => before.rp(p3.pool, progress, SLOT, ids, on),
        backend: () => p3.pid,
      },
      {
        name: 'recordProgress, pool (as the relay)',
        run: (ids) => recordProgress(p1.pool, progress, SLOT, ids, on),
        backend: () => p1.pid,
      },
      {
        name: 'recordProgress, dedicated client',
        run: (ids) => recordProgress(c1.c, progress, SLOT, ids, on),
        backend: () => c1.pid,
      },
      {
        name: 'dedicated client, unnamed extended',
        run: (ids) => c2.c.query(update, [SLOT, idRanges(ids), on]),
        backend: () => c2.pid,
      },
      {
        name: 'dedicated client, simple query (values inlined)',
        run: (ids) => c3.c.query(simple(idRanges(ids))),
        backend: () => c3.pid,
      },
      {
        name: 'dedicated client, named, its values built once',
        run: () => c6.c.query(fixed),
        backend: () => c6.pid,
      },
      {
        name: 'dedicated client, empty query (a round trip)',
        run: () => c4.c.query(';'),
        backend: () => c4.pid,
      },
      {
        name: 'dedicated client, a round trip while the server works 0.2 ms (pg_sleep)',
        run: () => c5.c.query('SELECT pg_sleep(0.0002)'),
        backend: () => c5.pid,
      },
      {
        name: 'pool, checkout + release only',
        run: async () => (await p2.pool.connect()).release(),
        backend: () => p2.pid,
      },
      before !== null && {
        name: 'idRanges only, --before',
        run: async (ids) => before.ir(ids),
        backend: () => 0,
      },
      {
        name: 'idRanges only',
        run: async (ids) => idRanges(ids),
        backend: () => 0,
      },
    ];
    const variants = all.filter(
      (v): v is Variant => v !== false && (!values.only || v.name.includes(values.only)),
    );

    let next = 1;
    const batch = () => {
      const ids: string[] = [];
      for (let i = 0; i < IDS; i++) ids.push(String(next++));
      return ids;
    };
    const results = new Map<string, { relay: number[]; user: number[]; server: number[] }>();
    for (const v of variants) results.set(v.name, { relay: [], user: [], server: [] });
    // Warm-up: every variant's statement prepared and its code optimized.
    for (const v of variants) for (let i = 0; i < 300; i++) await v.run(batch());
    for (let r = 0; r < ROUNDS; r++) {
      const order = variants.map((_, i) => variants[(i + r) % variants.length]!);
      for (const v of order) {
        const inputs = Array.from({ length: N }, batch);
        const pid = v.backend();
        const s0 = runNs(pid);
        const c0 = process.cpuUsage();
        for (let i = 0; i < N; i++) await v.run(inputs[i]!);
        const c = process.cpuUsage(c0);
        const s = runNs(pid) - s0;
        const res = results.get(v.name)!;
        res.relay.push((c.user + c.system) / N);
        res.user.push(c.user / N);
        res.server.push(s / 1000 / N);
      }
      process.stderr.write(`round ${r + 1}/${ROUNDS}\n`);
    }
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    console.log(
      `\n${N} statements × ${ROUNDS} rounds, ${IDS} consecutive ids per statement, load ${load} (medians; min – max)`,
    );
    console.log('| variant | relay CPU µs/statement | of which user | server backend µs/statement |');
    console.log('|---|---:|---:|---:|');
    const f = (xs: number[]) =>
      `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)} – ${Math.max(...xs).toFixed(1)})`;
    for (const [name, x] of results)
      console.log(`| ${name} | ${f(x.relay)} | ${median(x.user).toFixed(1)} | ${f(x.server)} |`);
  } finally {
    for (const p of pools) await p.end();
    for (const c of clients) await c.end();
    await admin.end();
    await server.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
