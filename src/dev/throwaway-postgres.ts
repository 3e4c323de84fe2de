/**
 * A throwaway PostgreSQL cluster with `wal_level=logical`, built from the local server binaries
 * (initdb + pg_ctl) in a temp dir. Used by the `demo` command, the benchmark and the test harness.
 *
 * PostgreSQL refuses to run as root; when we are root the binaries run as the `postgres` OS user
 * (spawned with its uid/gid) and the data dir is chowned to it.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { type PortLease, reservePort } from './ports.ts';

export type ThrowawayPostgresOptions = {
  /** 0 or absent: pick a free port. */
  port?: number;
  /** postgresql.conf settings, applied over the defaults below. */
  settings?: Record<string, string | number>;
  logger?: (msg: string) => void;
  /** Keep the data dir after stop() (the server is still stopped). */
  keep?: boolean;
};

export type ThrowawayPostgres = {
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust auth, no password). */
  url: string;
  port: number;
  dataDir: string;
  binDir: string;
  /** Stops the server (fast, then immediate) and removes the data dir unless `keep`. Idempotent. */
  stop(): Promise<void>;
};

const REQUIRED_BINARIES = ['initdb', 'pg_ctl', 'postgres'];

/** Where the server binaries are: OUTBOX_PG_BINDIR, else the newest local install. */
export function findPostgresBinDir(): string {
  const fromEnv = process.env.OUTBOX_PG_BINDIR;
  if (fromEnv) {
    if (!hasServerBinaries(fromEnv)) {
      throw new Error(`OUTBOX_PG_BINDIR=${fromEnv} does not contain ${REQUIRED_BINARIES.join(', ')}`);
    }
    return fromEnv;
  }
  const found = candidateBinDirs().find(hasServerBinaries);
  if (found) return found;
  throw new Error(
    'No PostgreSQL server binaries (initdb, pg_ctl, postgres) found in /usr/lib/postgresql/*/bin, ' +
      '/usr/local/pgsql/bin, `pg_config --bindir` or PATH. Install them (e.g. `apt-get install postgresql`), ' +
      'set OUTBOX_PG_BINDIR to their directory, or point at an existing server with DATABASE_URL instead.',
  );
}

function candidateBinDirs(): string[] {
  const dirs: string[] = [];
  const debianRoot = '/usr/lib/postgresql';
  if (existsSync(debianRoot)) {
    const versions = readdirSync(debianRoot)
      .filter((v) => /^\d+(\.\d+)?$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    dirs.push(...versions.map((v) => join(debianRoot, v, 'bin')));
  }
  dirs.push('/usr/local/pgsql/bin');
  try {
    dirs.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: 'pipe' }).trim());
  } catch {
    // no pg_config on PATH
  }
  dirs.push(...(process.env.PATH ?? '').split(delimiter).filter(Boolean));
  return dirs;
}

function hasServerBinaries(dir: string): boolean {
  return REQUIRED_BINARIES.every((b) => existsSync(join(dir, b)));
}

/** A loopback port reserved for the rest of this process (src/dev/ports.ts). */
export async function findFreePort(): Promise<number> {
  return (await reservePort()).port;
}

type RunAs = { uid: number; gid: number } | undefined;

/** When root: the postgres OS user to run the binaries as. */
function resolveRunAs(): RunAs {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8', stdio: 'pipe' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8', stdio: 'pipe' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      'Running as root, and PostgreSQL refuses to run as root, but there is no `postgres` OS user to run it as. ' +
        'Create one (`useradd --system postgres`; installing the postgresql package does this), run as a ' +
        'non-root user, or point at an existing server with DATABASE_URL instead.',
    );
  }
}

/** A base dir the postgres user can traverse: os.tmpdir(), or /tmp if that is closed to others. */
function baseDirFor(runAs: RunAs): string {
  const base = tmpdir();
  if (!runAs) return base;
  for (let dir = base; ; dir = dirname(dir)) {
    const st = statSync(dir);
    const traversable =
      st.mode & 0o001 ||
      (st.uid === runAs.uid && st.mode & 0o100) ||
      (st.gid === runAs.gid && st.mode & 0o010);
    if (!traversable) return '/tmp';
    if (dirname(dir) === dir) return base;
  }
}

type RunResult = { code: number | null; output: string };

/**
 * A cluster this process created and has not yet stopped, for the exit/signal cleanup.
 * `phase` and `child` say what is in flight while it is being created.
 */
type Cluster = {
  binDir: string;
  dataDir: string;
  runAs: RunAs;
  keep: boolean;
  phase: 'initdb' | 'starting' | 'running';
  child?: ChildProcess;
};
const live = new Set<Cluster>();

/** Runs a binary (as the postgres user when root) in the cluster's parent dir; collects stdout+stderr. */
function run(c: Cluster, binary: string, args: string[]): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(c.binDir, binary), args, {
      cwd: dirname(c.dataDir),
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Own process group: cleanup can kill initdb together with the postgres processes it runs,
      // and a Ctrl-C in the terminal reaches only us.
      detached: true,
      ...c.runAs,
    });
    c.child = child;
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => {
      if (c.child === child) c.child = undefined;
      resolve({ code, output });
    });
  });
}

function removeDataDir(c: Cluster): void {
  if (!c.keep) rmSync(c.dataDir, { recursive: true, force: true, maxRetries: 3 });
}

function confValue(value: string | number): string {
  return typeof value === 'number' ? String(value) : `'${value.replaceAll("'", "''")}'`;
}

function logTail(file: string, lines = 40): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no server log)';
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Synchronous best-effort cleanup of every live cluster (process 'exit' or a fatal signal). */
function stopAllNow(): void {
  for (const c of live) {
    if (c.phase === 'initdb' && c.child?.pid) {
      try {
        process.kill(-c.child.pid, 'SIGKILL');
        sleepSync(100); // let them die before removing their dir
      } catch {
        // already gone
      }
    }
    if (c.phase === 'starting') {
      // pg_ctl start is in flight: give the postmaster a moment to write its pid file, so it can be stopped.
      const pidFile = join(c.dataDir, 'postmaster.pid');
      for (let waited = 0; waited < 3_000 && !existsSync(pidFile); waited += 50) sleepSync(50);
    }
    if (c.phase !== 'initdb') {
      spawnSync(join(c.binDir, 'pg_ctl'), ['-D', c.dataDir, '-m', 'immediate', '-w', '-t', '10', 'stop'], {
        cwd: dirname(c.dataDir),
        stdio: 'ignore',
        ...c.runAs,
      });
    }
    try {
      removeDataDir(c);
    } catch {
      // best effort: carry on with the other clusters
    }
  }
  live.clear();
}

function onSignal(signal: NodeJS.Signals): void {
  // Only act if nobody else handles the signal: then it would kill us without an 'exit' event.
  // If someone else does, they decide how to shut down, and 'exit' still cleans up.
  if (process.listenerCount(signal) > 1) return;
  stopAllNow();
  process.removeListener(signal, onSignal);
  process.kill(process.pid, signal);
}

let exitHandlersInstalled = false;
function installExitHandlers(): void {
  if (exitHandlersInstalled) return;
  exitHandlersInstalled = true;
  process.on('exit', stopAllNow);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignal);
}

export async function startThrowawayPostgres(
  opts: ThrowawayPostgresOptions = {},
): Promise<ThrowawayPostgres> {
  const log = opts.logger ?? (() => {});
  const binDir = findPostgresBinDir();
  const runAs = resolveRunAs();
  const started = Date.now();

  const dataDir = mkdtempSync(join(baseDirFor(runAs), 'outbox-pg-'));
  if (runAs) chownSync(dataDir, runAs.uid, runAs.gid);
  const c: Cluster = { binDir, dataDir, runAs, keep: opts.keep ?? false, phase: 'initdb' };
  live.add(c);
  installExitHandlers();
  const logFile = join(dataDir, 'server.log');
  let lease: PortLease | undefined;

  try {
    const initdbFlags = '-U postgres --auth=trust -E UTF8 --no-locale --no-sync'.split(' ');
    const init = await run(c, 'initdb', ['-D', dataDir, ...initdbFlags]);
    if (init.code !== 0) throw new Error(`initdb failed (exit ${init.code}) in ${dataDir}:\n${init.output}`);

    // A reserved port is safe from every process that reserves through src/dev/ports.ts; a
    // program outside that scheme may still bind it first: retry with another.
    for (let attempt = 1; ; attempt++) {
      lease?.release();
      lease = opts.port ? undefined : await reservePort();
      const port = opts.port || lease!.port;
      const settings: Record<string, string | number> = {
        wal_level: 'logical',
        max_replication_slots: 64,
        max_wal_senders: 64,
        listen_addresses: '127.0.0.1',
        unix_socket_directories: dataDir,
        fsync: 'off',
        synchronous_commit: 'off',
        full_page_writes: 'off',
        shared_buffers: '128MB',
        max_connections: 200,
        logging_collector: 'off',
        ...opts.settings,
        port,
      };
      const conf = Object.entries(settings)
        .map(([k, v]) => `${k} = ${confValue(v)}`)
        .join('\n');
      // Later lines win, so appending overrides whatever initdb wrote.
      await appendFile(join(dataDir, 'postgresql.conf'), `\n# outbox-relay throwaway cluster\n${conf}\n`);
      rmSync(logFile, { force: true });

      c.phase = 'starting';
      const start = await run(c, 'pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start']);
      if (start.code === 0) {
        c.phase = 'running';
        log(`throwaway postgres on 127.0.0.1:${port} (${dataDir}) started in ${Date.now() - started} ms`);
        let stopping: Promise<void> | undefined;
        const stop = async () => {
          const fast = await run(c, 'pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', '-t', '30', 'stop']);
          if (fast.code !== 0) {
            log(`pg_ctl stop -m fast failed, stopping immediately: ${fast.output.trim()}`);
            await run(c, 'pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', '-t', '30', 'stop']);
          }
          live.delete(c);
          removeDataDir(c);
          lease?.release();
          log(`throwaway postgres on port ${port} stopped`);
        };
        return {
          url: `postgres://postgres@127.0.0.1:${port}/postgres`,
          port,
          dataDir,
          binDir,
          stop: () => (stopping ??= stop()),
        };
      }
      // pg_ctl -w may give up while the server is still coming up: make sure it is gone.
      await run(c, 'pg_ctl', ['-D', dataDir, '-m', 'immediate', 'stop']);
      const tail = logTail(logFile);
      if (!opts.port && attempt < 3 && /could not bind|already in use/i.test(tail)) {
        log(`port ${port} was taken, retrying with another`);
        continue;
      }
      throw new Error(
        `PostgreSQL in ${dataDir} failed to start on port ${port} (pg_ctl exit ${start.code}): ` +
          `${start.output.trim()}\n--- server log (tail) ---\n${tail}`,
      );
    }
  } catch (err) {
    live.delete(c);
    removeDataDir(c);
    lease?.release();
    throw err;
  }
}
