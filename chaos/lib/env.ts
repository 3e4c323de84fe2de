/**
 * One scenario's world: its own throwaway PostgreSQL, its own Kafka broker(s) from the jars (a
 * TCP fault proxy in front when asked), relays as child processes of the real CLI, and the
 * samplers (retained WAL, publish progress). close() takes everything down again, in reverse.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Kafka, Kafka as KafkaClient, logLevel } from 'kafkajs';
import pg from 'pg';
import { LocalKafkaCluster } from '../../src/dev/local-kafka.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../src/dev/throwaway-postgres.ts';
import { ProgressDeadline } from '../../test/support/progress.ts';
import { type RelayProcess, spawnCli } from '../../test/support/relay.ts';
import { TcpProxy } from '../../test/support/tcp-proxy.ts';
import { type BackRecord, readBack } from './read-back.ts';
import { type SinkServer, type SinkServerName, startSinkServer } from './sink-server.ts';

export const SLOT = 'chaos';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Sample {
  at: number;
  published: number;
  pending: number;
}

export class Env {
  readonly name: string;
  readonly outDir: string;
  readonly started = Date.now();
  pg!: ThrowawayPostgres;
  url = '';
  /** Pool for the scenario's own queries (survives restarts: pg.Pool reconnects). */
  db!: pg.Pool;
  cluster: LocalKafkaCluster | null = null;
  /** The scenario's NATS or RabbitMQ server, when the relay publishes there instead of Kafka. */
  sink: SinkServer | null = null;
  proxies: TcpProxy[] = [];
  readonly relays: RelayProcess[] = [];
  readonly samples: Sample[] = [];
  /**
   * Where a row's truthful status is read: the view outbox_with_status where the migrations made
   * it (published events are recorded in a progress record, not on the row), else the table.
   */
  statusTable = 'outbox';
  maxRetainedWal = 0;
  walSamples = 0;
  #sampling = false;
  #samplers: Promise<void>[] = [];
  readonly #log: (line: string) => void;

  /** --delivery of every relay the scenario spawns (npm run chaos -- --delivery exactly-once). */
  readonly delivery: 'at-least-once' | 'exactly-once';

  constructor(
    name: string,
    outRoot: string,
    log: (line: string) => void,
    delivery: 'at-least-once' | 'exactly-once' = 'at-least-once',
  ) {
    this.name = name;
    this.delivery = delivery;
    this.outDir = join(outRoot, name);
    mkdirSync(this.outDir, { recursive: true });
    this.#log = log;
  }

  log(line: string): void {
    this.#log(`[${this.name} +${((Date.now() - this.started) / 1000).toFixed(1)}s] ${line}`);
  }

  async startPostgres(settings: Record<string, string | number> = {}): Promise<void> {
    this.pg = await startThrowawayPostgres({ settings: { max_connections: 100, ...settings } });
    this.url = this.pg.url;
    this.db = new pg.Pool({ connectionString: this.url, max: 4 });
    this.db.on('error', () => {});
    const m = spawnCli(['migrate', '--database-url', this.url, '--slot', SLOT]);
    const code = await m.exited;
    if (code !== 0) throw new Error(`migrate exited ${code}: ${m.logs().slice(-2000)}`);
    const view = await this.db.query<{ v: string | null }>(
      `SELECT to_regclass('public.outbox_with_status')::text AS v`,
    );
    if (view.rows[0]?.v) this.statusTable = 'outbox_with_status';
    this.log(`postgres on port ${this.pg.port}, outbox migrated (statuses read from ${this.statusTable})`);
  }

  async startKafka(o: { brokers?: number; proxy?: boolean; maxMessageBytes?: number } = {}): Promise<void> {
    const count = o.brokers ?? 1;
    // Proxies first, on ports the kernel picked (no reservation race): the brokers advertise them.
    if (o.proxy) for (let i = 0; i < count; i++) this.proxies.push(await TcpProxy.start());
    const dir = mkdtempSync(join(tmpdir(), `chaos-kafka-${this.name}-`));
    this.cluster = await LocalKafkaCluster.up({
      dir,
      port: 0,
      brokers: count,
      autoCreateTopics: false,
      maxMessageBytes: o.maxMessageBytes,
      advertisedPorts: o.proxy ? this.proxies.map((p) => p.port) : undefined,
      heapMb: 384,
    });
    for (const [i, n] of this.cluster.nodes.entries()) this.proxies[i]?.forwardTo({ port: n.clientPort });
    this.log(
      `kafka: ${count} broker(s) up (${this.cluster.bootstrap.join(',')})${o.proxy ? ' behind a proxy' : ''}`,
    );
  }

  /** A throwaway NATS JetStream or RabbitMQ server; relays spawned after this publish to it. */
  async startSink(name: SinkServerName): Promise<SinkServer> {
    this.sink = await startSinkServer(name);
    this.log(`${name}: throwaway server up (${this.sink.relayArgs.join(' ')})`);
    return this.sink;
  }

  kafka(): Kafka {
    return this.cluster!.client('chaos');
  }

  async createTopic(
    topic: string,
    partitions: number,
    o: { replicas?: number[][]; config?: Record<string, string> } = {},
  ): Promise<void> {
    const admin = this.kafka().admin();
    await admin.connect();
    try {
      const configEntries = Object.entries(o.config ?? {}).map(([name, value]) => ({ name, value }));
      await admin.createTopics({
        topics: [
          o.replicas
            ? {
                topic,
                replicaAssignment: o.replicas.map((replicas, partition) => ({ partition, replicas })),
                configEntries,
              }
            : {
                topic,
                numPartitions: partitions,
                replicationFactor: Math.min(this.cluster!.nodes.length, 3),
                configEntries,
              },
        ],
        waitForLeaders: true,
      });
      const deadline = Date.now() + 30_000;
      for (;;) {
        const md = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => null);
        const parts = md?.topics[0]?.partitions ?? [];
        if (parts.length > 0 && parts.every((p) => p.leader >= 0 && p.partitionErrorCode === 0)) break;
        if (Date.now() > deadline) throw new Error(`topic ${topic} has no leaders after 30 s`);
        await sleep(100);
      }
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }

  /**
   * An admin client through every node's INTERNAL listener but `exclude` (a frozen node would
   * hold the watcher's requests until they time out).
   */
  async #metadata(topic: string, exclude?: number) {
    const nodes = this.cluster!.nodes.filter((n) => n.id !== exclude).map(
      (n) => `127.0.0.1:${n.internalPort}`,
    );
    const admin = new KafkaClient({
      clientId: 'chaos-watch',
      brokers: nodes,
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3000,
      requestTimeout: 5000,
      retry: { retries: 1, initialRetryTime: 100 },
    }).admin();
    await admin.connect();
    try {
      return (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0]!.partitions.sort(
        (a, b) => a.partitionId - b.partitionId,
      );
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }

  /** The partition leaders of `topic` (broker ids, -1: none), asked of every node but `exclude`. */
  async leaders(topic: string, exclude?: number): Promise<number[]> {
    return (await this.#metadata(topic, exclude)).map((p) => p.leader);
  }

  /** Each partition's number of in-sync replicas. */
  async isrSizes(topic: string): Promise<number[]> {
    return (await this.#metadata(topic)).map((p) => p.isr.length);
  }

  /** `outbox-relay run` as a child process (the project's Node), on the scenario's slot. */
  spawnRelay(extra: string[] = []): RelayProcess {
    const sink = this.sink
      ? this.sink.relayArgs
      : ['--kafka-brokers', this.cluster!.bootstrap.join(','), '--kafka-request-timeout-ms', '5000'];
    const relay = spawnCli(
      [
        'run',
        ...['--database-url', this.url, '--slot', SLOT, ...sink],
        ...['--retry-initial-ms', '100', '--retry-max-ms', '1000'],
        ...['--status-interval-ms', '1000', '--http-host', '127.0.0.1', '--standby-poll-ms', '500'],
        ...['--delivery', this.delivery],
        ...extra,
      ],
      this.sink?.relayEnv,
    );
    this.relays.push(relay);
    return relay;
  }

  /** Retained WAL of the slot (pg_current_wal_lsn() - restart_lsn) every 500 ms; published/pending every 100 ms. */
  startSampling(): void {
    this.#sampling = true;
    this.#samplers.push(
      (async () => {
        while (this.#sampling) {
          try {
            const r = await this.db.query<{ b: string | null }>(
              'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint::text AS b FROM pg_replication_slots WHERE slot_name = $1',
              [SLOT],
            );
            const b = Number(r.rows[0]?.b ?? 0);
            if (r.rows[0]) this.walSamples++;
            if (b > this.maxRetainedWal) this.maxRetainedWal = b;
          } catch {
            // database restarting
          }
          await sleep(500);
        }
      })(),
      (async () => {
        while (this.#sampling) {
          try {
            const r = await this.db.query<{ published: number; pending: number }>(
              `SELECT count(*) FILTER (WHERE status = 'published')::int AS published,
                      count(*) FILTER (WHERE status = 'pending')::int AS pending FROM ${this.statusTable}`,
            );
            this.samples.push({ at: Date.now(), ...r.rows[0]! });
          } catch {
            // database restarting
          }
          await sleep(100);
        }
      })(),
    );
  }

  async stopSampling(): Promise<void> {
    this.#sampling = false;
    await Promise.all(this.#samplers);
    this.#samplers = [];
  }

  /**
   * ms from `t0` until the published count grew past what it was `graceMs` after t0 (acks in
   * flight at the fault still land in that grace); null if it never did.
   */
  progressAfter(t0: number, graceMs = 500): number | null {
    const base = this.samples.filter((s) => s.at <= t0 + graceMs).at(-1)?.published ?? 0;
    const next = this.samples.find((s) => s.at > t0 + graceMs && s.published > base);
    return next ? next.at - t0 : null;
  }

  /** The published count now (a baseline for progressSince). */
  async publishedNow(): Promise<number> {
    const r = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${this.statusTable} WHERE status = 'published'`,
    );
    return r.rows[0]!.n;
  }

  /** ms from `t0` until a sample showed more than `baseline` rows published; null if none did. */
  progressSince(t0: number, baseline: number): number | null {
    const next = this.samples.find((s) => s.at > t0 && s.published > baseline);
    return next ? next.at - t0 : null;
  }

  /** Waits until `sql` (one row, column ok) is true; false on timeout. */
  async waitFor(sql: string, timeoutMs: number, params: unknown[] = []): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        const r = await this.db.query<{ ok: boolean }>(sql, params);
        if (r.rows[0]?.ok) return true;
      } catch {
        // retry
      }
      await sleep(250);
    }
    return false;
  }

  /**
   * Until no row is pending (everything published or recorded failed/parked/dead); false after
   * `idleMs` without the pending count moving, or 5 × idleMs in all. Bounded by progress: the
   * drain after a fault takes longer on a loaded machine, and is no broken promise for that.
   */
  async waitNothingPending(idleMs = 60_000): Promise<boolean> {
    const deadline = new ProgressDeadline({ idleMs, capMs: idleMs * 5 });
    while (!deadline.expired()) {
      try {
        const r = await this.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${this.statusTable} WHERE status = 'pending'`,
        );
        const pending = r.rows[0]!.n;
        if (pending === 0) return true;
        deadline.note(pending);
      } catch {
        // database restarting
      }
      await sleep(250);
    }
    return false;
  }

  async statusCounts(where = 'true', params: unknown[] = []): Promise<Record<string, number>> {
    const r = await this.db.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM ${this.statusTable} WHERE ${where} GROUP BY status ORDER BY status`,
      params,
    );
    return Object.fromEntries(r.rows.map((x) => [x.status, x.n]));
  }

  /** Kafka: the topics; a NATS or RabbitMQ sink: everything its server stored. */
  readBack(topics: string[]): Promise<BackRecord[]> {
    if (this.sink) return this.sink.readBack();
    return readBack(this.kafka(), topics);
  }

  /** pg_ctl restart -m fast, as the server's OS user; resolves once it accepts connections again. */
  async restartPostgres(): Promise<void> {
    const args = [
      '-D',
      this.pg.dataDir,
      '-l',
      join(this.pg.dataDir, 'server.log'),
      '-m',
      'fast',
      '-w',
      '-t',
      '60',
      'restart',
    ];
    const ids = process.getuid?.() === 0 ? postgresIds() : {};
    const code = await new Promise<number>((resolve, reject) => {
      const p = spawn(join(this.pg.binDir, 'pg_ctl'), args, { ...ids, stdio: 'ignore' });
      p.on('error', reject);
      p.on('exit', (c) => resolve(c ?? 1));
    });
    if (code !== 0) throw new Error(`pg_ctl restart exited ${code}`);
  }

  /** pg_terminate_backend of the walsender serving the slot; true if there was one. */
  async terminateWalsender(): Promise<boolean> {
    const r = await this.db.query<{ ok: boolean }>(
      'SELECT pg_terminate_backend(active_pid) AS ok FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL',
      [SLOT],
    );
    return r.rows[0]?.ok === true;
  }

  /** Distinct warn/error messages of every relay so far (level ≥ 40), with counts. */
  relayProblems(limit = 12): string[] {
    const counts = new Map<string, number>();
    for (const r of this.relays) {
      for (const line of r.logs().split('\n')) {
        if (!line.startsWith('{')) {
          // A crash prints a stack, not JSON: keep its headline.
          if (/^(\w*Error\b|Emitted '|\s+code: )/.test(line)) counts.set(`CRASH ${line.trim()}`, 1);
          continue;
        }
        try {
          const l = JSON.parse(line) as {
            level: number;
            msg: string;
            err?: { message?: string };
            error?: string;
          };
          if (l.level < 40) continue;
          const detail = l.err?.message ?? l.error ?? '';
          const key = `${l.level >= 50 ? 'ERROR' : 'WARN'} ${l.msg}${detail ? `: ${String(detail).slice(0, 160)}` : ''}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        } catch {
          // a partial line
        }
      }
    }
    return [...counts].slice(0, limit).map(([k, n]) => `${k} (×${n})`);
  }

  #closing: Promise<void> | null = null;

  /** Idempotent (Ctrl-C may call it while the runner does). */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    await this.stopSampling();
    for (const r of this.relays) {
      if (r.child.exitCode === null && r.child.signalCode === null) r.kill('SIGKILL');
    }
    this.relays.forEach((r, i) => {
      writeFileSync(join(this.outDir, `relay-${i + 1}.log`), r.logs());
    });
    await Promise.allSettled(this.relays.map((r) => r.exited));
    for (const p of this.proxies) await p.stop().catch(() => {});
    if (this.sink) await this.sink.stop().catch((e) => this.log(`${this.sink?.name} stop: ${e}`));
    if (this.cluster) await this.cluster.destroy().catch((e) => this.log(`kafka destroy: ${e}`));
    await this.db?.end().catch(() => {});
    await this.pg?.stop().catch((e) => this.log(`postgres stop: ${e}`));
  }
}

function postgresIds(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}
