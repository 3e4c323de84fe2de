/**
 * ElasticMQ, an SQS-compatible server, on loopback from its jars on Maven Central
 * (`org.elasticmq:elasticmq-server_3`), as src/dev/local-kafka.ts runs Kafka: Maven resolves the
 * jars once into a cache (`.cache/elasticmq/<version>/libs`, or ELASTICMQ_CACHE_DIR); later starts
 * are offline. Maven Central has no all-in-one jar of it (the project's releases elsewhere do), so
 * the server runs from its ~40 dependency jars with Java >= 17.
 *
 * Used by the SQS sink's tests, the chaos runs and by hand. It is not AWS: docs/sinks.md says what
 * differs. One server per directory: the config file (queues created at start), the H2 database
 * of messages when `persistent`, the log. kill9() and restart() keep the port and the data.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { javaBinary } from './local-kafka.ts';
import { type PortLease, reservePort } from './ports.ts';

/** 1.7.1: the newest release on Maven Central when the SQS sink was written (1.6.x has the same config). */
export const DEFAULT_ELASTICMQ_VERSION = '1.7.1';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export function elasticMqCacheDir(): string {
  return process.env.ELASTICMQ_CACHE_DIR ?? join(ROOT, '.cache', 'elasticmq');
}

function pom(version: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pg-outbox-relay</groupId><artifactId>elasticmq-server-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.elasticmq</groupId><artifactId>elasticmq-server_3</artifactId><version>${version}</version></dependency>
  </dependencies>
</project>
`;
}

/** The directory of ElasticMQ `version`'s jars, resolved with Maven on first use. */
export function ensureElasticMqJars(
  version = process.env.ELASTICMQ_VERSION?.trim() || DEFAULT_ELASTICMQ_VERSION,
  log: (line: string) => void = () => {},
): string {
  if (!/^\d+\.\d+\.\d+$/.test(version))
    throw new Error(`ELASTICMQ_VERSION must look like 1.7.1; got "${version}"`);
  const base = join(elasticMqCacheDir(), version);
  const libs = join(base, 'libs');
  if (existsSync(join(base, '.complete'))) return libs;
  if (spawnSync('mvn', ['-v']).error)
    throw new Error(
      `ElasticMQ ${version}'s jars are not cached in ${base} and Maven is missing to fetch them. Fix: \`apt-get install maven\` (and a JDK >= 17).`,
    );
  mkdirSync(base, { recursive: true });
  writeFileSync(join(base, 'pom.xml'), pom(version));
  log(`elasticmq: resolving org.elasticmq:elasticmq-server_3:${version} from Maven Central into ${libs}`);
  const r = spawnSync(
    'mvn',
    ['-B', '-q', '-f', join(base, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`],
    { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 },
  );
  if (r.status !== 0)
    throw new Error(
      `mvn could not resolve org.elasticmq:elasticmq-server_3:${version} (exit ${r.status}):\n${`${r.stdout}${r.stderr}`.slice(-3000)}`,
    );
  writeFileSync(join(base, '.complete'), `${new Date().toISOString()}\n`);
  return libs;
}

export interface ElasticMqOptions {
  /** Queues created at start; a name ending in .fifo is a FIFO queue (no content-based dedup). */
  queues: readonly string[];
  /** Messages kept in an H2 database in the server's directory, so a restart (even after kill -9) finds them. */
  persistent?: boolean;
  version?: string;
  /**
   * The JVM's full JIT (C2). Default off: C1 only starts the server ~2× faster, which the tests
   * want; the bench wants steady-state throughput.
   */
  fullJit?: boolean;
  /**
   * The JVM's heap (-Xmx), MB. Default 256: the tests' queues hold a few thousand messages. The
   * bench's hold 100,000-message drains (500-byte bodies, five attributes each; RSS ~420 MB at
   * 256): twice in the full bench the server stopped answering mid-drain ("socket hang up", then
   * ECONNREFUSED), so the bench gives it 1 GB (the cause is not proven: see docs/benchmarks.md).
   */
  heapMb?: number;
}

/** Quoted for HOCON: queue names are [A-Za-z0-9_-] with an optional .fifo, but quote anyway. */
const hocon = (s: string) => JSON.stringify(s);

export class LocalElasticMq {
  readonly dir: string;
  readonly #libs: string;
  readonly #lease: PortLease;
  readonly #opts: ElasticMqOptions;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #log = '';

  private constructor(opts: ElasticMqOptions, libs: string, lease: PortLease) {
    this.dir = mkdtempSync(join(tmpdir(), 'outbox-elasticmq-'));
    this.#opts = opts;
    this.#libs = libs;
    this.#lease = lease;
  }

  static async start(opts: ElasticMqOptions): Promise<LocalElasticMq> {
    const libs = ensureElasticMqJars(opts.version);
    const q = new LocalElasticMq(opts, libs, await reservePort());
    try {
      await q.#spawn();
    } catch (e) {
      await q.stop();
      throw e;
    }
    return q;
  }

  get port(): number {
    return this.#lease.port;
  }

  /** The endpoint an SQS client is given (--sqs-endpoint). */
  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The URL of queue `name` (ElasticMQ's account id is 000000000000). */
  queueUrl(name: string): string {
    return `${this.endpoint}/000000000000/${name}`;
  }

  /** The server's process (the bench's CPU per event). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  logs(): string {
    return this.#log;
  }

  #config(): string {
    const queues = this.#opts.queues
      .map((n) =>
        n.endsWith('.fifo')
          ? `  ${hocon(n)} { fifo = true, contentBasedDeduplication = false }`
          : `  ${hocon(n)} {}`,
      )
      .join('\n');
    // WRITE_DELAY=0: H2 writes each committed change at once. With its default (500 ms) a kill -9
    // lost messages ElasticMQ had acknowledged: 99 of 3,977 in the SQS sink's kill test.
    const storage = this.#opts.persistent
      ? `messages-storage {\n  enabled = true\n  uri = ${hocon(`jdbc:h2:${join(this.dir, 'messages')};WRITE_DELAY=0`)}\n}`
      : '';
    return `include classpath("application.conf")
node-address { protocol = "http", host = "127.0.0.1", port = ${this.port}, context-path = "" }
rest-sqs { enabled = true, bind-port = ${this.port}, bind-hostname = "127.0.0.1", sqs-limits = strict }
rest-stats { enabled = false }
queues {
${queues}
}
${storage}
`;
  }

  async #spawn(): Promise<void> {
    const conf = join(this.dir, 'elasticmq.conf');
    writeFileSync(conf, this.#config());
    this.#log = '';
    const child = spawn(
      javaBinary(),
      [
        `-Xmx${this.#opts.heapMb ?? 256}m`,
        '-XX:+UseSerialGC',
        ...(this.#opts.fullJit ? [] : ['-XX:TieredStopAtLevel=1']),
        `-Dconfig.file=${conf}`,
        '-cp',
        `${this.#libs}/*`,
        'org.elasticmq.server.Main',
      ],
      { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    this.#child = child;
    // Detached (a SIGSTOP or kill -9 is the server's alone), so it would outlive a caller that
    // crashed before stop(): killed when this process exits.
    const reap = () => child.kill('SIGKILL');
    process.once('exit', reap);
    this.#exited = new Promise((r) =>
      child.once('exit', () => {
        process.off('exit', reap);
        r();
      }),
    );
    await new Promise<void>((ready, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`ElasticMQ did not start within 60 s:\n${this.#log.slice(-3000)}`)),
        60_000,
      );
      const onData = (d: Buffer) => {
        this.#log = (this.#log + d.toString()).slice(-200_000);
        if (/Started SQS rest server/.test(this.#log)) {
          clearTimeout(timer);
          ready();
        }
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        fail(
          new Error(`ElasticMQ exited (${code ?? signal}) before it was ready:\n${this.#log.slice(-3000)}`),
        );
      });
    });
    // Queues are created just after the REST server starts: wait until the last one answers.
    const last = this.#opts.queues.at(-1);
    if (last) await this.#waitForQueue(last);
  }

  async #waitForQueue(name: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await fetch(
        `${this.endpoint}/?Action=GetQueueUrl&QueueName=${encodeURIComponent(name)}`,
      ).catch(() => null);
      if (r?.ok) return;
      if (Date.now() > deadline)
        throw new Error(`ElasticMQ: queue ${name} not created:\n${this.#log.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGKILL: nothing flushed, nothing closed. */
  async kill9(): Promise<void> {
    const c = this.#child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    c.kill('SIGKILL');
    await this.#exited;
  }

  freeze(): void {
    this.#child?.kill('SIGSTOP');
  }

  thaw(): void {
    this.#child?.kill('SIGCONT');
  }

  /** Starts the server again on the same port and directory (its H2 data, when persistent). */
  async restart(): Promise<void> {
    await this.kill9();
    await this.#spawn();
  }

  async stop(): Promise<void> {
    const c = this.#child;
    if (c && c.exitCode === null && c.signalCode === null) {
      c.kill('SIGCONT');
      c.kill('SIGTERM');
      const t = setTimeout(() => c.kill('SIGKILL'), 10_000);
      await this.#exited;
      clearTimeout(t);
    }
    this.#lease.release();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
