import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { portLocks, rangeBelowEphemeral, reservePort } from './ports.ts';

const MODULE = new URL('./ports.ts', import.meta.url).pathname;
let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});
const freshDir = () => {
  dir = mkdtempSync(join(tmpdir(), 'ports-test-'));
  return dir;
};

/**
 * A port nothing listens on at this moment (from the ephemeral range, where the real reservations
 * never go): the tests below pin single-port ranges to it.
 */
function unboundPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** A pid that certainly belongs to no process any more. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  return Number(r.stdout.trim());
}

/**
 * A child process that reserves `count` ports, prints them, and holds them until its stdin closes:
 * the reservations of every child are then held at the same time.
 */
function holder(lockDir: string, range: [number, number], count: number) {
  const code = `
    import { reservePort } from ${JSON.stringify(MODULE)};
    const ports = [];
    for (let i = 0; i < ${count}; i++) ports.push((await reservePort({ lockDir: ${JSON.stringify(lockDir)}, range: [${range}] })).port);
    console.log(JSON.stringify(ports));
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const ports = new Promise<number[]>((resolve, reject) => {
    child.stdout.on('data', () => {
      if (out.includes('\n')) resolve(JSON.parse(out) as number[]);
    });
    child.on('exit', (c) => reject(new Error(`holder exited ${c} before printing its ports: ${err}`)));
  });
  return { child, ports };
}

const exited = (c: ChildProcess) =>
  new Promise((r) => (c.exitCode !== null ? r(c.exitCode) : c.on('exit', r)));

describe('reservePort', () => {
  it('never hands the same port to two processes, even when the range barely fits them all', async () => {
    const lockDir = freshDir();
    // 6 processes × 5 ports from a range of 36: contention on nearly every lock file.
    const range: [number, number] = [24_100, 24_135];
    const holders = Array.from({ length: 6 }, () => holder(lockDir, range, 5));
    try {
      const all = (await Promise.all(holders.map((h) => h.ports))).flat();
      expect(all).toHaveLength(30);
      expect(new Set(all).size, `duplicates in ${all.join(',')}`).toBe(30);
      for (const p of all) expect(p).toBeGreaterThanOrEqual(range[0]);
      for (const p of all) expect(p).toBeLessThanOrEqual(range[1]);
      expect([...portLocks(lockDir).keys()].sort()).toEqual([...all].sort());
    } finally {
      for (const h of holders) h.child.stdin?.end();
      await Promise.all(holders.map((h) => exited(h.child)));
    }
    // Each holder removed its locks on exit.
    expect(portLocks(lockDir).size).toBe(0);
  });

  it('reclaims a lock left by a dead process, and skips one of a live process', async () => {
    const lockDir = freshDir();
    const port = await unboundPort();
    writeFileSync(join(lockDir, `${port}.lock`), `${deadPid()}\n`);
    const lease = await reservePort({ lockDir, range: [port, port] });
    expect(lease.port).toBe(port);
    expect(readFileSync(join(lockDir, `${port}.lock`), 'utf8').trim()).toBe(String(process.pid));
    lease.release();
    expect(portLocks(lockDir).size).toBe(0);

    const live = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      writeFileSync(join(lockDir, `${port}.lock`), `${live.pid}\n`);
      await expect(reservePort({ lockDir, range: [port, port] })).rejects.toThrow(/no free port/);
      expect(readFileSync(join(lockDir, `${port}.lock`), 'utf8').trim()).toBe(String(live.pid));
    } finally {
      live.kill();
    }
  });

  it('within one process, never the same port twice while held; again once released', async () => {
    const lockDir = freshDir();
    const port = await unboundPort();
    const range: [number, number] = [port, port];
    const a = await reservePort({ lockDir, range });
    await expect(reservePort({ lockDir, range })).rejects.toThrow(`no free port in ${port}-${port}`);
    a.release();
    expect((await reservePort({ lockDir, range })).port).toBe(a.port);
  });

  it('skips a port another program has bound', async () => {
    const lockDir = freshDir();
    const server: Server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const bound = (server.address() as { port: number }).port;
    try {
      await expect(reservePort({ lockDir, range: [bound, bound] })).rejects.toThrow(/no free port/);
      expect(portLocks(lockDir).size, 'the lock of the bound port is not kept').toBe(0);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});

describe('rangeBelowEphemeral', () => {
  it('takes 20000 up to just below the ephemeral range, else the ports above it', () => {
    expect(rangeBelowEphemeral([32_768, 60_999])).toEqual([20_000, 32_000]);
    expect(rangeBelowEphemeral([28_000, 60_999])).toEqual([20_000, 27_999]);
    expect(rangeBelowEphemeral([15_000, 50_000])).toEqual([50_001, 65_535]);
  });
});
