/**
 * A throwaway `redis-server` (of a test file, a bench or chaos run, the playground): its own port (src/dev/ports.ts: Redis must be told
 * its port), directory and process, so it can be killed (-9), frozen (SIGSTOP) and restarted
 * without touching the machine's shared Redis (port 6379).
 *
 * appendonly yes with appendfsync everysec, the usual production setting: Redis writes the AOF
 * before it answers, so a kill -9 of the process loses no acknowledged write (fsync once a second
 * matters only when the machine itself stops). A restart reads the same AOF back.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { untilFrozen } from './frozen.ts';
import { type PortLease, reservePort } from './ports.ts';

export const REDIS_SERVER = '/usr/bin/redis-server';

export interface RedisServerOptions {
  /** appendonly (default true). */
  aof?: boolean;
  /** proto-max-bulk-len (bytes; Redis' least is 1 MB). */
  protoMaxBulkLen?: number;
}

/** A stream entry as read back by XRANGE: its id and its fields (values as Buffers). */
export interface StoredEntry {
  stream: string;
  entryId: string;
  fields: Record<string, Buffer>;
}

export class ThrowawayRedis {
  readonly dir: string;
  #lease: PortLease | null = null;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #log = '';
  #admin: Redis | null = null;
  readonly #opts: RedisServerOptions;

  private constructor(opts: RedisServerOptions) {
    this.#opts = opts;
    this.dir = mkdtempSync(join(tmpdir(), 'outbox-redis-'));
  }

  static async start(opts: RedisServerOptions = {}): Promise<ThrowawayRedis> {
    const s = new ThrowawayRedis(opts);
    try {
      s.#lease = await reservePort();
      await s.#spawn();
    } catch (e) {
      await s.stop();
      throw e;
    }
    return s;
  }

  get port(): number {
    return this.#lease!.port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  logs(): string {
    return this.#log;
  }

  get pid(): number | undefined {
    return this.#child?.exitCode === null ? this.#child.pid : undefined;
  }

  async #spawn(): Promise<void> {
    const conf = join(this.dir, 'redis.conf');
    writeFileSync(
      conf,
      [
        'bind 127.0.0.1',
        `port ${this.port}`,
        `dir ${this.dir}`,
        'save ""',
        `appendonly ${this.#opts.aof === false ? 'no' : 'yes'}`,
        'appendfsync everysec',
        this.#opts.protoMaxBulkLen ? `proto-max-bulk-len ${this.#opts.protoMaxBulkLen}` : '',
        'loglevel notice',
        'logfile ""',
      ].join('\n'),
    );
    this.#log = '';
    const child = spawn(REDIS_SERVER, [conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        this.#log += d.toString();
        if (/Ready to accept connections/.test(this.#log)) {
          child.stdout!.off('data', onData);
          child.stdout!.on('data', (x: Buffer) => {
            this.#log += x.toString();
          });
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', (x: Buffer) => {
        this.#log += x.toString();
      });
      child.once('exit', (code, signal) =>
        reject(new Error(`redis-server exited (${code ?? signal}) before it was ready:\n${this.#log}`)),
      );
      child.once('error', reject);
    });
  }

  /** A client of the test's own (reading back, setting up keys); rebuilt after a restart. */
  async admin(): Promise<Redis> {
    if (this.#admin && this.#admin.status === 'ready') return this.#admin;
    this.#admin?.disconnect();
    const a = new Redis(this.url, { lazyConnect: true, protocol: 2, maxRetriesPerRequest: 1 });
    a.on('error', () => {});
    await a.connect();
    this.#admin = a;
    return a;
  }

  async length(stream: string): Promise<number> {
    return (await this.admin()).xlen(stream);
  }

  /** Every entry of the stream, in stream order, by XRANGE in pages. */
  async readAll(stream: string): Promise<StoredEntry[]> {
    const a = await this.admin();
    const out: StoredEntry[] = [];
    let start = '-';
    for (;;) {
      const page = (await a.xrangeBuffer(stream, start, '+', 'COUNT', 1000)) as [Buffer, Buffer[]][];
      for (const [id, kv] of page) {
        const fields: Record<string, Buffer> = {};
        for (let i = 0; i < kv.length; i += 2) fields[kv[i]!.toString()] = kv[i + 1]!;
        out.push({ stream, entryId: id.toString(), fields });
      }
      if (page.length < 1000) return out;
      start = `(${page[page.length - 1]![0].toString()}`;
    }
  }

  async kill9(): Promise<void> {
    this.#closeAdmin();
    this.#child?.kill('SIGKILL');
    await this.#exited;
  }

  freeze(): void {
    this.#child?.kill('SIGSTOP');
  }

  /** Resolves once every thread of the frozen server is stopped (src/dev/frozen.ts). */
  frozen(): Promise<void> {
    return untilFrozen(this.#child?.pid);
  }

  thaw(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Starts the server again on the same port and directory (after kill9): it reads its AOF back. */
  async restart(): Promise<void> {
    await this.#spawn();
  }

  async stop(): Promise<void> {
    this.#closeAdmin();
    this.#child?.kill('SIGCONT');
    this.#child?.kill('SIGKILL');
    await this.#exited;
    this.#lease?.release();
    rmSync(this.dir, { recursive: true, force: true });
  }

  #closeAdmin(): void {
    const a = this.#admin;
    this.#admin = null;
    a?.disconnect();
  }
}
