/**
 * Loopback ports for servers that must be told their port before they start (a Kafka node's three
 * listeners, a throwaway PostgreSQL), handed out without the listen-on-0-and-close race: that
 * trick returns a port nobody holds, so two callers (two vitest workers, two chaos processes, or
 * two calls in one process before either server bound) can get the same one.
 *
 * A reservation here is:
 *   - from a range BELOW the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), so
 *     no outgoing connection and no listen(0) of anyone can be given the port meanwhile;
 *   - an exclusive lock file per port (O_EXCL create in a shared directory, holding the owner's
 *     pid), so other processes that use this module never hand out the same port; a lock whose pid
 *     is dead is stale and reclaimed;
 *   - never the same port twice within one process while held;
 *   - checked free by binding it (a program outside this scheme may use it);
 *   - released by `release()`, or when the process exits.
 *
 * Where a component can bind port 0 and report the port it got (our TCP proxy, the relay's HTTP
 * server), let it do that instead: nothing to reserve.
 */
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PortLease {
  readonly port: number;
  /** Frees the port for others. Safe to repeat. */
  release(): void;
}

export interface ReserveOptions {
  /** Lock directory shared by every process. Default: OUTBOX_PORT_LOCK_DIR or <tmpdir>/pg-outbox-relay-ports. */
  lockDir?: string;
  /** Inclusive range to pick from. Default: OUTBOX_PORT_RANGE ("lo-hi") or portRange(). */
  range?: readonly [number, number];
}

/** Ports this process holds, lock file by port. */
const held = new Map<number, string>();
let exitHookInstalled = false;

function lockDirOf(opts: ReserveOptions): string {
  return opts.lockDir ?? process.env.OUTBOX_PORT_LOCK_DIR ?? join(tmpdir(), 'pg-outbox-relay-ports');
}

/**
 * 20000 up to just below the ephemeral range (at most 32000), or, where the ephemeral range starts
 * too low for that, the ports above it. Pure: the caller reads the kernel's range.
 */
export function rangeBelowEphemeral(ephemeral: readonly [number, number]): [number, number] {
  const [lo, hi] = ephemeral;
  if (lo - 1 >= 21_000) return [20_000, Math.min(lo - 1, 32_000)];
  if (hi + 1000 <= 65_535) return [hi + 1, 65_535];
  // No room outside the ephemeral range: the lock files and the bind check still hold.
  return [20_000, 32_000];
}

export function portRange(): [number, number] {
  const env = /^(\d+)-(\d+)$/.exec(process.env.OUTBOX_PORT_RANGE?.trim() ?? '');
  if (env) return [Number(env[1]), Number(env[2])];
  let ephemeral: [number, number] = [32_768, 60_999]; // Linux's default
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    if (Number(lo) > 0 && Number(hi) >= Number(lo)) ephemeral = [Number(lo), Number(hi)];
  } catch {
    // Not Linux: assume its default.
  }
  return rangeBelowEphemeral(ephemeral);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: alive, owned by another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pid in a lock file; null if unreadable or still empty (its creator is between open and write). */
function ownerOf(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Creates `file` holding our pid unless it exists (O_EXCL): true if we own it now. */
function createExclusive(file: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    writeSync(fd, `${process.pid}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

function removeIfOurs(file: string): void {
  try {
    if (ownerOf(file) === process.pid) unlinkSync(file);
  } catch {
    // Gone already.
  }
}

/**
 * Removes `lock` if its owner is dead. Two processes that both saw the same dead pid must not both
 * remove: the second would delete the first one's fresh lock. So removal happens under a directory
 * mutex (itself an O_EXCL file) and re-reads the owner inside it. A mutex left by a dead process is
 * removed and this round skipped; its window is a few system calls wide.
 */
function reclaimIfStale(dir: string, lock: string): boolean {
  const owner = ownerOf(lock);
  if (owner === null || owner === process.pid || pidAlive(owner)) return false;
  const mutex = join(dir, 'reclaim.lock');
  if (!createExclusive(mutex)) {
    const holder = ownerOf(mutex);
    if (holder !== null && !pidAlive(holder)) {
      try {
        unlinkSync(mutex);
      } catch {
        // Another process removed it.
      }
    }
    return false;
  }
  try {
    const again = ownerOf(lock);
    if (again === null || again === process.pid || pidAlive(again)) return false;
    unlinkSync(lock);
    return true;
  } catch {
    // EPERM: another user's lock in the sticky directory; leave it to them.
    return false;
  } finally {
    unlinkSync(mutex);
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((done) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => done(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => done(true)));
  });
}

/**
 * Creates the lock directory like /tmp (world-writable, sticky): every user's tests share the
 * ports, and nobody can remove another user's lock.
 */
function ensureSharedDir(dir: string): void {
  if (existsSync(dir)) return;
  mkdirSync(dir, { recursive: true });
  try {
    chmodSync(dir, 0o1777);
  } catch {
    // Created by another user a moment ago.
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers run synchronously: the unlinks are synchronous. A kill -9 leaves the files;
  // the dead pid makes them stale for the next process.
  process.on('exit', () => {
    for (const file of held.values()) removeIfOurs(file);
  });
}

/**
 * Reserves a loopback port (see the file's comment). Starts at a random point of the range so
 * concurrent processes rarely contend for the same lock files.
 */
export async function reservePort(opts: ReserveOptions = {}): Promise<PortLease> {
  const dir = lockDirOf(opts);
  ensureSharedDir(dir);
  const [lo, hi] = opts.range ?? portRange();
  const size = hi - lo + 1;
  const start = Math.floor(Math.random() * size);
  installExitHook();
  for (let i = 0; i < size; i++) {
    const port = lo + ((start + i) % size);
    if (held.has(port)) continue;
    const lock = join(dir, `${port}.lock`);
    if (!createExclusive(lock) && !(reclaimIfStale(dir, lock) && createExclusive(lock))) continue;
    held.set(port, lock);
    if (!(await bindable(port))) {
      // Bound by a program outside this scheme: leave it, and free the lock for a later look.
      held.delete(port);
      removeIfOurs(lock);
      continue;
    }
    return {
      port,
      release: () => {
        if (held.get(port) !== lock) return;
        held.delete(port);
        removeIfOurs(lock);
      },
    };
  }
  throw new Error(
    `no free port in ${lo}-${hi}: each is locked in ${dir} by a live process or bound. ` +
      'Fix: stop leftover test processes, or set OUTBOX_PORT_RANGE=lo-hi to a free range.',
  );
}

/** Lock files in `dir` (for diagnostics and tests): port → owner pid. */
export function portLocks(dir: string = lockDirOf({})): Map<number, number | null> {
  const out = new Map<number, number | null>();
  for (const name of readdirSync(dir)) {
    const m = /^(\d+)\.lock$/.exec(name);
    if (m) out.set(Number(m[1]), ownerOf(join(dir, name)));
  }
  return out;
}
