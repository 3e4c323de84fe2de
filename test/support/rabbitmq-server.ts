/**
 * A throwaway RabbitMQ node of one test file, from Debian's rabbitmq-server: its own node name,
 * data and log directories (RABBITMQ_MNESIA_BASE, RABBITMQ_LOG_BASE under a temp dir), its own
 * Erlang cookie (HOME), no plugins unless asked (`management: true` enables rabbitmq_management on
 * a reserved loopback port: managementUrl), so it can be killed (-9), frozen (SIGSTOP)
 * and restarted without touching the machine's shared RabbitMQ. It registers its node name with
 * the machine's epmd, as every Erlang node does.
 *
 * Ports: AMQP binds port 0 on the first start and the bound port is read back from the OS (the
 * node's listening sockets); a restart binds that port again. The Erlang distribution port cannot
 * be 0 (RabbitMQ refuses it): a port reserved by src/dev/ports.ts, another on EADDRINUSE.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqp, { type ChannelModel, type Options } from 'amqplib';
import { type PortLease, reservePort } from '../../src/dev/ports.ts';

function serverScript(): string {
  const base = '/usr/lib/rabbitmq/lib';
  const dir = existsSync(base) ? readdirSync(base).find((d) => d.startsWith('rabbitmq_server-')) : undefined;
  if (!dir)
    throw new Error(
      'no RabbitMQ server under /usr/lib/rabbitmq/lib: apt-get install rabbitmq-server (.ci/run does)',
    );
  return join(base, dir, 'sbin', 'rabbitmq-server');
}

export interface StoredAmqpMessage {
  content: Buffer;
  messageId: string;
  headers: Record<string, unknown>;
  routingKey: string;
  persistent: boolean;
}

export interface RabbitOptions {
  maxMessageSize?: number;
  /** Enable the management plugin (its HTTP API on a reserved loopback port). */
  management?: boolean;
}

export class ThrowawayRabbit {
  readonly dir: string;
  readonly node: string;
  port = 0;
  #distPort = 0;
  #distLease: PortLease | null = null;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #log = '';
  #admin: ChannelModel | null = null;
  readonly #maxMessageSize: number | undefined;
  readonly #management: boolean;
  #mgmtLease: PortLease | null = null;

  private constructor(opts: RabbitOptions) {
    this.dir = mkdtempSync(join(tmpdir(), 'outbox-rabbit-'));
    this.node = `outbox-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}@localhost`;
    this.#maxMessageSize = opts.maxMessageSize;
    this.#management = opts.management ?? false;
  }

  static async start(opts: RabbitOptions = {}): Promise<ThrowawayRabbit> {
    const r = new ThrowawayRabbit(opts);
    for (let attempt = 1; ; attempt++) {
      // Reserved like every test port (src/dev/ports.ts: a lock file, below the ephemeral range).
      r.#distLease?.release();
      r.#distLease = await reservePort();
      r.#distPort = r.#distLease.port;
      if (r.#management) {
        r.#mgmtLease?.release();
        r.#mgmtLease = await reservePort();
      }
      try {
        await r.#spawn();
        return r;
      } catch (e) {
        if (attempt < 5 && /eaddrinuse/i.test(r.#log)) continue;
        await r.stop();
        throw e;
      }
    }
  }

  get url(): string {
    return `amqp://guest:guest@127.0.0.1:${this.port}/%2F`;
  }

  /** The management API (guest's credentials), when started with `management: true`. */
  get managementUrl(): string {
    if (!this.#mgmtLease) throw new Error('this node runs without the management plugin');
    return `http://guest:guest@127.0.0.1:${this.#mgmtLease.port}`;
  }

  logs(): string {
    return this.#log;
  }

  /** The last `n` lines of the node's output (since its last start) that report an error or a crash. */
  errorLines(n = 30): string {
    const lines = this.#log.split('\n').filter((l) => /\[error\]|crash|exit|nack/i.test(l));
    return lines.slice(-n).join('\n') || '(none)';
  }

  async #spawn(): Promise<void> {
    writeFileSync(join(this.dir, 'enabled_plugins'), this.#management ? '[rabbitmq_management].\n' : '[].\n');
    writeFileSync(
      join(this.dir, 'rabbitmq.conf'),
      [
        `listeners.tcp.1 = 127.0.0.1:${this.port}`,
        'loopback_users = none',
        this.#maxMessageSize ? `max_message_size = ${this.#maxMessageSize}` : '',
        this.#mgmtLease ? `management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = ${this.#mgmtLease.port}` : '',
      ].join('\n'),
    );
    this.#log = '';
    const child = spawn(serverScript(), [], {
      cwd: this.dir,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        HOME: this.dir,
        RABBITMQ_NODENAME: this.node,
        RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
        RABBITMQ_DIST_PORT: String(this.#distPort),
        RABBITMQ_MNESIA_BASE: join(this.dir, 'mnesia'),
        RABBITMQ_LOG_BASE: join(this.dir, 'log'),
        RABBITMQ_LOGS: '-',
        RABBITMQ_CONFIG_FILE: join(this.dir, 'rabbitmq.conf'),
        RABBITMQ_ENABLED_PLUGINS_FILE: join(this.dir, 'enabled_plugins'),
        RABBITMQ_PID_FILE: join(this.dir, 'node.pid'),
      },
    });
    this.#child = child;
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        this.#log += d.toString();
        if (this.#log.includes('Server startup complete')) resolve();
        if (this.#log.includes('BOOT FAILED'))
          reject(new Error(`RabbitMQ failed to boot:\n${this.#log.slice(-3000)}`));
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code, signal) =>
        reject(
          new Error(
            `rabbitmq-server exited (${code ?? signal}) before it was ready:\n${this.#log.slice(-3000)}`,
          ),
        ),
      );
      child.once('error', reject);
    });
    if (this.port === 0) this.port = this.#listeningPort();
  }

  /** The Erlang VM of this node: the process whose command line names this node's home. */
  beamPid(): number {
    for (const p of readdirSync('/proc')) {
      if (!/^\d+$/.test(p)) continue;
      try {
        const cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        if (cmd.includes('beam') && cmd.includes(`-home\u0000${this.dir}\u0000`)) return Number(p);
      } catch {}
    }
    throw new Error(`no beam process for ${this.node}`);
  }

  #listeningPort(): number {
    const pid = this.beamPid();
    const out = execFileSync('ss', ['-Hltnp'], { encoding: 'utf8' });
    for (const line of out.split('\n')) {
      if (!line.includes(`pid=${pid},`)) continue;
      const port = Number(/127\.0\.0\.1:(\d+)\s/.exec(line)?.[1]);
      if (port && port !== this.#distPort && port !== this.#mgmtLease?.port) return port;
    }
    throw new Error(`could not find the AMQP port of ${this.node} (pid ${pid}) in ss -ltnp:\n${out}`);
  }

  async admin(): Promise<ChannelModel> {
    if (this.#admin) return this.#admin;
    const conn = await amqp.connect(this.url);
    conn.on('error', () => {});
    conn.on('close', () => {
      if (this.#admin === conn) this.#admin = null;
    });
    this.#admin = conn;
    return conn;
  }

  /** Runs `fn` on a fresh channel (a failed declaration closes its channel). */
  async withChannel<T>(fn: (ch: amqp.Channel) => Promise<T>): Promise<T> {
    const ch = await (await this.admin()).createChannel();
    ch.on('error', () => {});
    try {
      return await fn(ch);
    } finally {
      await ch.close().catch(() => {});
    }
  }

  /** A durable exchange with a durable queue bound to it. */
  async exchangeWithQueue(
    exchange: string,
    queue: string,
    bindingKey: string,
    queueArgs: Options.AssertQueue = {},
  ): Promise<void> {
    await this.withChannel(async (ch) => {
      await ch.assertExchange(exchange, 'topic', { durable: true });
      await ch.assertQueue(queue, { durable: true, ...queueArgs });
      await ch.bindQueue(queue, exchange, bindingKey);
    });
  }

  /** Every message of the queue, in queue order, taken with basic.get and acked. */
  async drain(queue: string): Promise<StoredAmqpMessage[]> {
    return this.withChannel(async (ch) => {
      const out: StoredAmqpMessage[] = [];
      for (;;) {
        const m = await ch.get(queue, { noAck: true });
        if (!m) return out;
        out.push({
          content: m.content,
          messageId: String(m.properties.messageId),
          headers: (m.properties.headers ?? {}) as Record<string, unknown>,
          routingKey: m.fields.routingKey,
          persistent: m.properties.deliveryMode === 2,
        });
      }
    });
  }

  async queueLength(queue: string): Promise<number> {
    return this.withChannel(async (ch) => (await ch.checkQueue(queue)).messageCount);
  }

  async #closeAdmin(): Promise<void> {
    const a = this.#admin;
    this.#admin = null;
    await a?.close().catch(() => {});
  }

  async kill9(): Promise<void> {
    await this.#closeAdmin();
    process.kill(this.beamPid(), 'SIGKILL');
    await this.#exited;
    this.#killGroup();
  }

  freeze(): void {
    process.kill(this.beamPid(), 'SIGSTOP');
  }

  thaw(): void {
    process.kill(this.beamPid(), 'SIGCONT');
  }

  async restart(): Promise<void> {
    await this.#spawn();
  }

  /** The node's process group (started detached by this harness): the script, beam and its helpers. */
  #killGroup(): void {
    const pid = this.#child?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }

  async stop(): Promise<void> {
    await this.#closeAdmin();
    try {
      this.thaw();
    } catch {}
    this.#killGroup();
    await this.#exited;
    this.#distLease?.release();
    this.#mgmtLease?.release();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
