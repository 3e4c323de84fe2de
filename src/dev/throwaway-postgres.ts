/**
 * A throwaway PostgreSQL cluster with `wal_level=logical`, built from the local server binaries
 * (initdb + pg_ctl) in a temp dir. Used by the `demo` command, the benchmark and the test harness.
 *
 * PostgreSQL refuses to run as root; when we are root the binaries run as the `postgres` OS user
 * (spawned with its uid/gid) and the data dir is chowned to it.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { type PortLease, reservePort } from './ports.ts';
import { parseMajor, postgresBuildBinDir } from './postgres-builds.ts';

export type ThrowawayPostgresOptions = {
  /** 0 or absent: pick a free port. */
  port?: number;
  /** postgresql.conf settings, applied over the defaults below. */
  settings?: Record<string, string | number>;
  logger?: (msg: string) => void;
  /** Keep the data dir after stop() (the server is still stopped). */
  keep?: boolean;
  /** A major version (14 – 18): its local install or the npm registry's build (findPostgresBinDir). */
  version?: string;
};

export type ThrowawayPostgres = {
  /** postgres://postgres@127.0.0.1:PORT/postgres (trust auth, no password). */
  url: string;
  port: number;
  dataDir: string;
  binDir: string;
  /** Stops the server (fast, then immediate) and removes the data dir unless `keep`. Idempotent. */
  stop(): Promise<void>;
  /** kill -9 of the postmaster and every process of it, at once (a machine lost). stop() still cleans up. */
  crash(): void;
  /** A standby becomes a primary (pg_ctl promote -w). */
  promote(): Promise<void>;
  /** The postmaster's pid and its children's, e.g. to freeze one walsender with SIGSTOP. */
  serverPids(): { postmaster: number; children: { pid: number; title: string }[] };
};

const REQUIRED_BINARIES = ['initdb', 'pg_ctl', 'postgres'];

/**
 * Where the server binaries are: OUTBOX_PG_BINDIR; else OUTBOX_PG_VERSION (a major, 14 – 18: the
 * local install of that major, or the npm registry's build of it, fetched into .cache/postgres:
 * src/dev/postgres-builds.ts); else the newest local install.
 */
export function findPostgresBinDir(version = process.env.OUTBOX_PG_VERSION): string {
  const fromEnv = process.env.OUTBOX_PG_BINDIR;
  if (fromEnv) {
    if (!hasServerBinaries(fromEnv)) {
      throw new Error(`OUTBOX_PG_BINDIR=${fromEnv} does not contain ${REQUIRED_BINARIES.join(', ')}`);
    }
    return fromEnv;
  }
  if (version) {
    const major = parseMajor(version);
    const local = join('/usr/lib/postgresql', String(major), 'bin');
    return hasServerBinaries(local) ? local : postgresBuildBinDir(major);
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
/** Running clusters by data dir (startStandby copies one). */
const clusters = new Map<string, Cluster>();

function serverPids(c: Cluster): { postmaster: number; children: { pid: number; title: string }[] } {
  const postmaster = Number(readFileSync(join(c.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children: { pid: number; title: string }[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== postmaster) continue;
      const title = readFileSync(`/proc/${d}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      children.push({ pid: Number(d), title });
    } catch {
      // gone meanwhile
    }
  }
  return { postmaster, children };
}

function crash(c: Cluster): void {
  const { postmaster, children } = serverPids(c);
  for (const pid of [postmaster, ...children.map((x) => x.pid)]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

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
  const binDir = findPostgresBinDir(opts.version);
  const runAs = resolveRunAs();
  const started = Date.now();

  const dataDir = mkdtempSync(join(baseDirFor(runAs), 'outbox-pg-'));
  if (runAs) chownSync(dataDir, runAs.uid, runAs.gid);
  const c: Cluster = { binDir, dataDir, runAs, keep: opts.keep ?? false, phase: 'initdb' };
  live.add(c);
  installExitHandlers();
  try {
    const initdbFlags = '-U postgres --auth=trust -E UTF8 --no-locale --no-sync'.split(' ');
    const init = await run(c, 'initdb', ['-D', dataDir, ...initdbFlags]);
    if (init.code !== 0) throw new Error(`initdb failed (exit ${init.code}) in ${dataDir}:\n${init.output}`);
    // Replication connections from loopback (a standby: startStandby).
    await appendFile(join(dataDir, 'pg_hba.conf'), '\nhost replication all 127.0.0.1/32 trust\n');
  } catch (err) {
    live.delete(c);
    removeDataDir(c);
    throw err;
  }
  return startServer(c, opts, log, started);
}

/**
 * A physical standby of `primary`, made as a new user would without pg_basebackup: the primary is
 * stopped cleanly, its data dir copied (without its slots and pid file), and both started; the
 * standby streams from the primary asynchronously (application_name `standby`). The primary
 * keeps its URL and port.
 */
export async function startStandby(
  primary: ThrowawayPostgres,
  opts: Omit<ThrowawayPostgresOptions, 'version' | 'port'> = {},
): Promise<ThrowawayPostgres> {
  const log = opts.logger ?? (() => {});
  const p = clusters.get(primary.dataDir);
  if (!p) throw new Error(`${primary.dataDir} is not a running throwaway cluster of this process`);
  const started = Date.now();
  const stopped = await run(p, 'pg_ctl', ['-D', p.dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']);
  if (stopped.code !== 0) throw new Error(`cannot stop the primary to copy it: ${stopped.output.trim()}`);
  const dataDir = mkdtempSync(join(baseDirFor(p.runAs), 'outbox-pg-standby-'));
  execFileSync('cp', ['-a', `${p.dataDir}/.`, dataDir]);
  for (const f of readdirSync(join(dataDir, 'pg_replslot')))
    rmSync(join(dataDir, 'pg_replslot', f), { recursive: true });
  rmSync(join(dataDir, 'postmaster.pid'), { force: true });
  if (p.runAs) chownSync(dataDir, p.runAs.uid, p.runAs.gid);
  writeFileSync(join(dataDir, 'standby.signal'), '');
  if (p.runAs) chownSync(join(dataDir, 'standby.signal'), p.runAs.uid, p.runAs.gid);
  const restarted = await run(p, 'pg_ctl', [
    '-D',
    p.dataDir,
    '-l',
    join(p.dataDir, 'server.log'),
    '-w',
    '-t',
    '60',
    'start',
  ]);
  if (restarted.code !== 0) throw new Error(`cannot restart the primary: ${restarted.output.trim()}`);
  const c: Cluster = {
    binDir: p.binDir,
    dataDir,
    runAs: p.runAs,
    keep: opts.keep ?? false,
    phase: 'starting',
  };
  live.add(c);
  return startServer(
    c,
    {
      ...opts,
      settings: {
        primary_conninfo: `host=127.0.0.1 port=${primary.port} user=postgres dbname=postgres application_name=standby`,
        hot_standby: 'on',
        ...opts.settings,
      },
    },
    log,
    started,
  );
}

/** Starts an initialised data dir on a free port (retried on a port taken meanwhile). */
async function startServer(
  c: Cluster,
  opts: ThrowawayPostgresOptions,
  log: (msg: string) => void,
  started: number,
): Promise<ThrowawayPostgres> {
  const { dataDir, binDir } = c;
  const logFile = join(dataDir, 'server.log');
  let lease: PortLease | undefined;
  try {
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
          clusters.delete(dataDir);
          removeDataDir(c);
          lease?.release();
          log(`throwaway postgres on port ${port} stopped`);
        };
        clusters.set(dataDir, c);
        return {
          url: `postgres://postgres@127.0.0.1:${port}/postgres`,
          port,
          dataDir,
          binDir,
          stop: () => (stopping ??= stop()),
          crash: () => crash(c),
          promote: async () => {
            const r = await run(c, 'pg_ctl', ['-D', dataDir, '-w', '-t', '60', 'promote']);
            if (r.code !== 0) throw new Error(`pg_ctl promote failed: ${r.output.trim()}`);
          },
          serverPids: () => serverPids(c),
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
