/**
 * Running the relay CLI as its users do (a child process), and timing a drain: from its
 * "streaming from the slot" log line until the slot's confirmed_flush_lsn passes the backlog's
 * end, i.e. until every event is acknowledged by the sink, marked and confirmed.
 * BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=.tmp/prof") and BENCH_RELAY_ARGS (relay flags)
 * are passed through; BENCH_RELAY_STDOUT=file keeps the relay's stdout (e.g. node's --trace-gc)
 * instead of /dev/null.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { type PgCpu, PgCpuSampler } from './pg-cpu.ts';
import { cpuSeconds, peakRssMb, sleep } from './proc.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The CLI from its TypeScript sources: node strips the types of each module as it loads it. */
const SRC_CLI = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
/** The compiled CLI, as the npm package (bin/outbox-relay.js) and the image run it. */
const DIST_CLI = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
let CLI = SRC_CLI;

/**
 * Which relay startRelay runs by default: `dist` compiles this checkout (`npm run build`, into
 * dist/) and runs the compiled CLI, as the npm package and the image do; `src` runs
 * src/cli/main.ts. The same JavaScript either way (tsc only strips the types, target ES2023), but
 * not the same process: node's type stripping (amaro, a WebAssembly module kept for the
 * process's life) holds ~30 MB of RSS that no deployed relay has — 145 vs 112 MB peak for
 * `--version` (docs/benchmarks.md, issue 39). Returns the build's duration in seconds (0 for src).
 */
export function useRelayFrom(from: 'dist' | 'src'): number {
  if (from === 'src') {
    CLI = SRC_CLI;
    return 0;
  }
  const t0 = performance.now();
  const r = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(
      `npm run build (the relay as shipped, --relay-from dist) failed:\n${(r.stdout ?? '') + (r.stderr ?? '')}${r.error ?? ''}`,
    );
  CLI = DIST_CLI;
  return (performance.now() - t0) / 1000;
}

export type RelayProcess = {
  child: ChildProcess;
  /** Resolves at the "streaming from the slot" line (performance.now() of it). */
  streaming: Promise<number>;
  cpuAtStreaming: () => number;
  logs: () => string;
  peakRssMb: () => number;
  stop: () => Promise<void>;
};

/** `cli`: the relay's entry point (another checkout's, for A/B runs: bench/ab.ts); `nodeArgs`: node's flags. */
export function startRelay(
  url: string,
  slot: string,
  args: string[],
  cli: string = CLI,
  nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [],
): RelayProcess {
  // BENCH_RELAY_STDOUT=file: the relays' stdout (e.g. with BENCH_NODE_ARGS=--trace-gc); a "{slot}"
  // in it gives each relay a file of its own.
  const devnull = openSync(process.env.BENCH_RELAY_STDOUT?.replaceAll('{slot}', slot) ?? '/dev/null', 'w');
  const extra = process.env.BENCH_RELAY_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(
    process.execPath,
    [
      ...nodeArgs,
      cli,
      'run',
      '--database-url',
      url,
      '--slot',
      slot,
      '--log-format',
      'json',
      // No /metrics unless asked for (the soak): two benches, or anyone's relay on the default
      // port, must not fail a run (EADDRINUSE 9464).
      ...(args.includes('--http-port') ? [] : ['--no-http']),
      ...args,
      ...extra,
    ],
    // Port 0 for /metrics: the default 9464 may be taken by another relay on the machine (a bench
    // relay exited 78 on EADDRINUSE while another worktree's soak run held it).
    { stdio: ['ignore', devnull, 'pipe'], env: { OUTBOX_HTTP_PORT: '0', ...process.env } },
  );
  let logs = '';
  let cpuAt = 0;
  let peak = 0;
  const rss = setInterval(() => {
    peak = Math.max(peak, peakRssMb(child.pid!) || 0);
  }, 50);
  const streaming = new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => {
      if (logs.length < 1_000_000) logs += d.toString();
      if (!cpuAt && logs.includes('streaming from the slot')) {
        cpuAt = cpuSeconds(child.pid!);
        resolve(performance.now());
      }
    });
    child.on('exit', (code) => {
      clearInterval(rss);
      reject(new Error(`relay exited ${code}:\n${logs.slice(-3000)}`));
    });
  });
  streaming.catch(() => {});
  return {
    child,
    streaming,
    cpuAtStreaming: () => cpuAt,
    logs: () => logs,
    peakRssMb: () => Math.max(peak, peakRssMb(child.pid!) || 0),
    stop: async () => {
      clearInterval(rss);
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.on('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

async function confirmedReached(db: pg.Client, slot: string, lsn: string): Promise<boolean> {
  const r = await db.query<{ ok: boolean }>(
    'SELECT confirmed_flush_lsn >= $2::pg_lsn AS ok FROM pg_replication_slots WHERE slot_name = $1',
    [slot, lsn],
  );
  return r.rows[0]?.ok === true;
}

async function activePid(db: pg.Client, slot: string): Promise<number | null> {
  const r = await db.query<{ pid: number | null }>(
    'SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = $1',
    [slot],
  );
  return r.rows[0]?.pid ?? null;
}

export type Drain = {
  seconds: number;
  withStartup: number;
  peakRssMb: number;
  /** Relay user + sys while draining. */
  cpuSeconds: number;
  /** The Kafka broker's user + sys while draining (NaN without a broker). */
  brokerCpuSeconds: number;
  pg: PgCpu;
};

export type PgContext = { db: pg.Client; postmaster: number; exclude: number[]; brokerPid?: number };

/** Runs the relay on `slot` until it is confirmed past `endLsn`. */
export async function drainRelay(
  url: string,
  ctx: PgContext,
  slot: string,
  endLsn: string,
  args: string[],
  cli?: string,
  nodeArgs?: string[],
): Promise<Drain> {
  const sampler = new PgCpuSampler(ctx.postmaster, ctx.exclude);
  const spawnedAt = performance.now();
  const relay = startRelay(url, slot, args, cli, nodeArgs);
  try {
    const startedAt = await relay.streaming;
    sampler.start();
    const broker0 = ctx.brokerPid ? cpuSeconds(ctx.brokerPid) : Number.NaN;
    const deadline = Date.now() + 900_000;
    let walsenderKnown = false;
    while (!(await confirmedReached(ctx.db, slot, endLsn))) {
      if (!walsenderKnown) {
        const pid = await activePid(ctx.db, slot);
        if (pid) {
          sampler.setWalsender(pid);
          walsenderKnown = true;
        }
      }
      if (relay.child.exitCode !== null) throw new Error(`relay exited:\n${relay.logs().slice(-3000)}`);
      if (Date.now() > deadline) throw new Error('relay did not drain within 15 minutes');
      await sleep(20);
    }
    const end = performance.now();
    const cpu = cpuSeconds(relay.child.pid!) - relay.cpuAtStreaming();
    const pgCpu = sampler.stop();
    return {
      seconds: (end - startedAt) / 1000,
      withStartup: (end - spawnedAt) / 1000,
      peakRssMb: relay.peakRssMb(),
      cpuSeconds: cpu,
      brokerCpuSeconds: ctx.brokerPid ? cpuSeconds(ctx.brokerPid) - broker0 : Number.NaN,
      pg: pgCpu,
    };
  } finally {
    sampler.stop();
    await relay.stop();
  }
}
