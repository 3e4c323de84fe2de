/**
 * A throwaway `nats-server -js` of one test file: its own port, store directory and process, so
 * it can be killed (-9), frozen (SIGSTOP) and restarted without touching the machine's shared
 * NATS (port 4222), which other work uses.
 *
 * Port: the first start binds a port the server picks itself (`port: -1`) and names it in its log
 * (no listen-and-close race); a restart binds that same port again, so the relay's
 * URL stays valid. If something else took the port meanwhile, the restart fails loudly.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager, type StreamConfig } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { untilFrozen } from '../../src/dev/frozen.ts';

export interface NatsServerOptions {
  /** The server's max_payload (bytes); NATS' default is 1 MiB. */
  maxPayload?: number;
}

/** A message as read back by an independent ordered consumer. */
export interface StoredMessage {
  subject: string;
  seq: number;
  data: Buffer;
  headers: Record<string, string>;
}

export class ThrowawayNats {
  readonly dir: string;
  port = -1;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #log = '';
  #admin: NatsConnection | null = null;
  readonly #opts: NatsServerOptions;

  private constructor(opts: NatsServerOptions) {
    this.#opts = opts;
    this.dir = mkdtempSync(join(tmpdir(), 'outbox-nats-'));
  }

  static async start(opts: NatsServerOptions = {}): Promise<ThrowawayNats> {
    const s = new ThrowawayNats(opts);
    try {
      await s.#spawn();
    } catch (e) {
      await s.stop();
      throw e;
    }
    return s;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  logs(): string {
    return this.#log;
  }

  /** The server's process id (CPU accounting in the bench); undefined once it exited. */
  get pid(): number | undefined {
    return this.#child?.exitCode === null ? this.#child.pid : undefined;
  }

  async #spawn(): Promise<void> {
    const conf = join(this.dir, 'server.conf');
    writeFileSync(
      conf,
      [
        'host: 127.0.0.1',
        `port: ${this.port}`,
        `jetstream { store_dir: "${join(this.dir, 'store')}" }`,
        this.#opts.maxPayload ? `max_payload: ${this.#opts.maxPayload}` : '',
      ].join('\n'),
    );
    this.#log = '';
    const child = spawn('nats-server', ['-c', conf], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        this.#log += d.toString();
        if (this.#log.includes('Server is ready')) {
          child.stderr!.off('data', onData);
          child.stderr!.on('data', (x: Buffer) => {
            this.#log += x.toString();
          });
          resolve();
        }
      };
      child.stderr!.on('data', onData);
      child.once('exit', (code, signal) =>
        reject(new Error(`nats-server exited (${code ?? signal}) before it was ready:\n${this.#log}`)),
      );
      child.once('error', reject);
    });
    const bound = /Listening for client connections on [^\s]+:(\d+)/.exec(this.#log);
    if (!bound) throw new Error(`nats-server did not say which port it bound:\n${this.#log}`);
    this.port = Number(bound[1]);
  }

  /** An admin connection of the test's own (streams, reading back); rebuilt after a restart. */
  async admin(): Promise<NatsConnection> {
    if (this.#admin && !this.#admin.isClosed()) return this.#admin;
    this.#admin = await connect({ servers: this.url, maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    return this.#admin;
  }

  async addStream(config: Partial<StreamConfig> & { name: string; subjects: string[] }): Promise<void> {
    const jsm = await jetstreamManager(await this.admin());
    await jsm.streams.add(config);
  }

  async streamMessages(name: string): Promise<number> {
    const jsm = await jetstreamManager(await this.admin());
    return (await jsm.streams.info(name)).state.messages;
  }

  /** Every message of the stream, in stream order, read by an ordered consumer of its own. */
  async readAll(stream: string): Promise<StoredMessage[]> {
    const nc = await this.admin();
    const jsm = await jetstreamManager(nc);
    const { state } = await jsm.streams.info(stream);
    const out: StoredMessage[] = [];
    if (state.messages === 0) return out;
    const consumer = await jetstream(nc).consumers.get(stream);
    const messages = await consumer.consume();
    for await (const m of messages) {
      const headers: Record<string, string> = {};
      for (const k of m.headers?.keys() ?? []) headers[k] = m.headers!.get(k);
      out.push({ subject: m.subject, seq: m.seq, data: Buffer.from(m.data), headers });
      if (m.seq >= state.last_seq) break;
    }
    await messages.close();
    return out;
  }

  async kill9(): Promise<void> {
    await this.#closeAdmin();
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

  /** Starts the server again on the same port and store (after kill9). */
  async restart(): Promise<void> {
    await this.#spawn();
  }

  async stop(): Promise<void> {
    await this.#closeAdmin();
    this.#child?.kill('SIGCONT');
    this.#child?.kill('SIGKILL');
    await this.#exited;
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #closeAdmin(): Promise<void> {
    const a = this.#admin;
    this.#admin = null;
    await a?.close().catch(() => {});
  }
}
