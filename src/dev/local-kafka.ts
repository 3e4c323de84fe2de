/**
 * A real Apache Kafka on loopback, from Apache's own jars on Maven Central: KRaft mode (no
 * ZooKeeper), one node or a small cluster. Used by `npm run kafka`, the test harness and the
 * benchmark. Needs Java >= 17 and Maven (`mvn`) the first time, to resolve the jars into a cache
 * (`.cache/kafka/<version>/libs`, or KAFKA_CACHE_DIR); later starts are offline.
 *
 * Layout of a cluster directory (everything the cluster owns lives in it):
 *   cluster.json            the options and ports it was created with (a second `up` reuses them)
 *   node-<id>/server.properties, node-<id>/data/, node-<id>/server.log, node-<id>/pid
 *
 * Cluster shape: node 1 is broker + the (single) KRaft controller; nodes 2..n are brokers only.
 * So stopping any brokers but node 1 keeps the controller alive: it fences them, shrinks the ISR
 * and moves partition leaders — the real broker behaviour (NOT_LEADER_OR_FOLLOWER,
 * NOT_ENOUGH_REPLICAS) the failover tests need. Each node has three listeners: CLIENT (what clients
 * use: PLAINTEXT, or SASL_PLAINTEXT with `sasl`; it may advertise a proxy's port), INTERNAL
 * (replication between brokers) and CONTROLLER (node 1 only).
 *
 * Processes: started detached with their pid recorded; `down` signals exactly those pids, and only
 * after checking that the process's command line names this cluster's properties file (a pid may
 * have been reused since).
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { type PortLease, reservePort } from './ports.ts';

/** The version `npm run kafka` and the tests use unless KAFKA_VERSION says otherwise. */
export const DEFAULT_KAFKA_VERSION = '4.4.0';
/** The other line the compatibility runs cover. */
export const OTHER_KAFKA_VERSION = '3.9.1';

export interface SaslUsers {
  /** user → password; SASL/PLAIN on the CLIENT listener, StandardAuthorizer (ACLs) on. */
  users: Record<string, string>;
  /** Users allowed everything (super.users); the harness and `up` connect as the first one. */
  superUsers: string[];
}

/**
 * SASL/OAUTHBEARER on the CLIENT listener, validated by Kafka's own JWKS-based validator
 * (OAuthBearerValidatorCallbackHandler: signature against the JWKS, `exp`, `sub`, and the audience
 * and issuer when given). No authorizer: any valid token may do anything.
 */
export interface OAuthBearerListener {
  /** Where the broker fetches the signing keys (http://127.0.0.1:… in tests). */
  jwksUrl: string;
  expectedAudience?: string;
  expectedIssuer?: string;
  /** connections.max.reauth.ms of the listener: the broker makes clients re-authenticate this often. */
  maxReauthMs?: number;
}

export interface LocalKafkaOptions {
  /** Cluster directory (created). */
  dir: string;
  /** CLIENT port of node 1; node i listens on port + i - 1. Default 19092. 0: free ports. */
  port?: number;
  /** Number of brokers. Default 1. With 3: replication factor 3, min.insync.replicas 2. */
  brokers?: number;
  version?: string;
  /** auto.create.topics.enable. Default false. */
  autoCreateTopics?: boolean;
  /** message.max.bytes of the brokers. */
  maxMessageBytes?: number;
  sasl?: SaslUsers;
  /** SASL/OAUTHBEARER on the CLIENT listener instead of PLAIN (not with `sasl`). */
  oauthbearer?: OAuthBearerListener;
  /** Per node (index 0 = node 1): the CLIENT port to advertise, e.g. a fault proxy's. */
  advertisedPorts?: number[];
  /** More server.properties, applied last. */
  extraConfig?: Record<string, string | number | boolean>;
  /** JVM heap per node, MB. Default 512. */
  heapMb?: number;
  /** Progress lines (jar download, start). Default: none. */
  log?: (line: string) => void;
  /** How long to wait for the cluster to accept produce requests. Default 120 s. */
  readyTimeoutMs?: number;
}

export interface LocalKafkaNode {
  id: number;
  clientPort: number;
  advertisedPort: number;
  internalPort: number;
  /** Only node 1. */
  controllerPort: number | null;
}

interface ClusterFile {
  version: string;
  clusterId: string;
  nodes: LocalKafkaNode[];
  sasl?: SaslUsers;
  oauthbearer?: OAuthBearerListener;
  heapMb: number;
}

/**
 * A cluster id as Kafka writes them (22 characters of URL-safe base64), never starting with '-',
 * which kafka-storage's argument parser would take for an option.
 */
export function clusterIdFor(bytes: Buffer): string {
  const id = bytes.toString('base64url').slice(0, 22);
  return id.startsWith('-') ? `A${id.slice(1)}` : id;
}

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Where resolved jars are cached: KAFKA_CACHE_DIR or <repo>/.cache/kafka. */
export function kafkaCacheDir(): string {
  return process.env.KAFKA_CACHE_DIR ?? join(ROOT, '.cache', 'kafka');
}

export function kafkaVersionFromEnv(): string {
  return process.env.KAFKA_VERSION?.trim() || DEFAULT_KAFKA_VERSION;
}

function major(version: string): number {
  return Number(version.split('.')[0]);
}

/** Java >= 17 on PATH (or JAVA_HOME), else an error saying how to get it. */
export function javaBinary(): string {
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  const r = spawnSync(java, ['-version'], { encoding: 'utf8' });
  const text = `${r.stderr ?? ''}${r.stdout ?? ''}`;
  const m = /version "(\d+)(?:\.(\d+))?/.exec(text);
  if (r.error || !m) {
    throw new Error(
      'A real Kafka broker needs Java >= 17, and no `java` was found. Fix: `apt-get install openjdk-17-jre-headless` ' +
        '(or set JAVA_HOME), or point the tests at an existing cluster with KAFKA_TEST_BROKERS=host:port.',
    );
  }
  const v = Number(m[1] === '1' ? m[2] : m[1]);
  if (v < 17)
    throw new Error(`Java ${v} found; Kafka needs Java >= 17. Fix: install openjdk-17 (or set JAVA_HOME).`);
  return java;
}

function pom(version: string): string {
  // Kafka 4 logs through log4j2 and ships no slf4j binding in the server artifact; 3.x brings reload4j.
  const logging =
    major(version) >= 4
      ? `<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>`
      : '';
  return `<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.pg-outbox-relay</groupId><artifactId>kafka-broker-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${version}</version></dependency>
    ${logging}
  </dependencies>
</project>
`;
}

/**
 * The directory of Kafka `version`'s jars, resolved from Maven Central on first use (progress via
 * `log`), from the cache afterwards.
 */
export async function ensureKafkaJars(
  version: string,
  log: (line: string) => void = () => {},
): Promise<string> {
  if (!/^\d+\.\d+\.\d+$/.test(version))
    throw new Error(`KAFKA_VERSION must look like 4.1.1; got "${version}"`);
  const base = join(kafkaCacheDir(), version);
  const libs = join(base, 'libs');
  if (existsSync(join(base, '.complete'))) return libs;
  const which = spawnSync('mvn', ['-v'], { encoding: 'utf8' });
  if (which.error) {
    throw new Error(
      `Kafka ${version}'s jars are not cached in ${base} and Maven is missing to fetch them. ` +
        'Fix: `apt-get install maven` (and a JDK >= 17), or set KAFKA_TEST_BROKERS to an existing cluster.',
    );
  }
  mkdirSync(base, { recursive: true });
  writeFileSync(join(base, 'pom.xml'), pom(version));
  log(
    `kafka: resolving Apache Kafka ${version} (kafka_2.13 and its dependencies) from Maven Central into ${libs}`,
  );
  const started = Date.now();
  let downloaded = 0;
  const code = await new Promise<number>((done, fail) => {
    const mvn = spawn(
      'mvn',
      ['-B', '-f', join(base, 'pom.xml'), 'dependency:copy-dependencies', `-DoutputDirectory=${libs}`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let tail = '';
    const onData = (d: Buffer) => {
      const text = d.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split('\n')) {
        const m = /Downloaded from \S+: \S+\/([^/\s]+\.jar) \(([^)]*)\)/.exec(line);
        if (m) {
          downloaded++;
          log(`kafka:   [${downloaded}] ${m[1]} (${m[2]})`);
        }
      }
    };
    mvn.stdout.on('data', onData);
    mvn.stderr.on('data', onData);
    mvn.on('error', fail);
    mvn.on('exit', (c) => {
      if (c !== 0) log(tail);
      done(c ?? 1);
    });
  });
  if (code !== 0)
    throw new Error(`mvn could not resolve org.apache.kafka:kafka_2.13:${version} (exit ${code})`);
  writeFileSync(join(base, '.complete'), `${new Date().toISOString()}\n`);
  log(
    `kafka: ${downloaded} jars downloaded (the rest from the local Maven repository) in ${Date.now() - started} ms`,
  );
  return libs;
}

/**
 * A loopback port reserved for the rest of this process (src/dev/ports.ts: no other caller, in
 * this or another process, gets it meanwhile). Prefer `reservePort()` where the port can be
 * released when its user is done.
 */
export async function freePort(): Promise<number> {
  return (await reservePort()).port;
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = createConnection({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      done(true);
    });
    s.once('error', () => done(false));
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid only if it is alive AND its command line names `propsFile` (guards against pid reuse). */
function ownedPid(pidFile: string, propsFile: string): number | null {
  if (!existsSync(pidFile)) return null;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  if (!Number.isInteger(pid) || pid <= 0 || !pidAlive(pid)) return null;
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmd.includes(propsFile)) return null;
  } catch {
    // No /proc (not Linux): trust the pid file.
  }
  return pid;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class LocalKafkaCluster {
  readonly dir: string;
  readonly version: string;
  readonly nodes: readonly LocalKafkaNode[];
  readonly sasl: SaslUsers | undefined;
  readonly #libs: string;
  readonly #java: string;
  readonly #heapMb: number;
  readonly #oauthbearer: OAuthBearerListener | undefined;
  readonly #log: (line: string) => void;
  /** The ports this process reserved for a cluster it created; released by destroy(). */
  readonly #leases: PortLease[];

  private constructor(
    dir: string,
    file: ClusterFile,
    libs: string,
    java: string,
    log: (line: string) => void,
    leases: PortLease[],
  ) {
    this.dir = dir;
    this.version = file.version;
    this.nodes = file.nodes;
    this.sasl = file.sasl;
    this.#heapMb = file.heapMb;
    this.#oauthbearer = file.oauthbearer;
    this.#libs = libs;
    this.#java = java;
    this.#log = log;
    this.#leases = leases;
  }

  /** Bootstrap servers (the advertised CLIENT addresses). */
  get bootstrap(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.advertisedPort}`);
  }

  /**
   * The INTERNAL listener's addresses: PLAINTEXT, never behind a proxy. Tests read and administer
   * through them while the CLIENT path is faulted.
   */
  get internalBootstrap(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.internalPort}`);
  }

  /**
   * Starts the cluster in `opts.dir` (creating and formatting it on first use) and returns once
   * every broker accepts produce requests with acks=all. A cluster already running there is reused
   * as it is (its options stay those it was created with).
   */
  static async up(opts: LocalKafkaOptions): Promise<LocalKafkaCluster> {
    const log = opts.log ?? (() => {});
    const dir = resolve(opts.dir);
    mkdirSync(dir, { recursive: true });
    const java = javaBinary();
    const fileName = join(dir, 'cluster.json');
    const leases: PortLease[] = [];
    let cluster: LocalKafkaCluster;
    try {
      const file = existsSync(fileName)
        ? (JSON.parse(readFileSync(fileName, 'utf8')) as ClusterFile)
        : await LocalKafkaCluster.#plan(opts, leases);
      const libs = await ensureKafkaJars(file.version, log);
      cluster = new LocalKafkaCluster(dir, file, libs, java, log, leases);
      if (!existsSync(fileName)) {
        cluster.#writeConfigs(opts, file);
        await cluster.#format(file.clusterId);
        writeFileSync(fileName, `${JSON.stringify(file, null, 2)}\n`);
      }
    } catch (e) {
      for (const l of leases) l.release();
      throw e;
    }
    const already = cluster.nodes.every((n) => cluster.pidOf(n.id) !== null);
    for (const n of cluster.nodes) if (cluster.pidOf(n.id) === null) cluster.#spawn(n.id);
    if (!already)
      log(`kafka: starting ${cluster.nodes.length} node(s) of Apache Kafka ${cluster.version} in ${dir}`);
    await cluster.waitReady(opts.readyTimeoutMs ?? 120_000);
    return cluster;
  }

  /**
   * Stops every node this directory's cluster started (`signal`, default SIGTERM, then SIGKILL
   * after 15 s). Safe to repeat.
   */
  static async down(dir: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<number> {
    const fileName = join(resolve(dir), 'cluster.json');
    if (!existsSync(fileName)) return 0;
    const file = JSON.parse(readFileSync(fileName, 'utf8')) as ClusterFile;
    let stopped = 0;
    await Promise.all(
      file.nodes.map(async (n) => {
        const props = join(resolve(dir), `node-${n.id}`, 'server.properties');
        const pidFile = join(resolve(dir), `node-${n.id}`, 'pid');
        if (await stopPid(pidFile, props, signal, 15_000)) stopped++;
      }),
    );
    return stopped;
  }

  /** What runs in `dir`: bootstrap and each node's pid (null: stopped); null if no cluster was created there. */
  static async status(
    dir: string,
  ): Promise<{ bootstrap: string[]; nodes: { id: number; pid: number | null }[] } | null> {
    const base = resolve(dir);
    const fileName = join(base, 'cluster.json');
    if (!existsSync(fileName)) return null;
    const file = JSON.parse(readFileSync(fileName, 'utf8')) as ClusterFile;
    const nodes = file.nodes.map((n) => ({
      id: n.id,
      pid: ownedPid(join(base, `node-${n.id}`, 'pid'), join(base, `node-${n.id}`, 'server.properties')),
    }));
    if (nodes.every((n) => n.pid === null)) return null;
    return { bootstrap: file.nodes.map((n) => `127.0.0.1:${n.advertisedPort}`), nodes };
  }

  /**
   * The cluster's shape and ports. Ports not given are reserved (src/dev/ports.ts) into `leases`:
   * held, so that no other cluster of this or a parallel process is planned onto them (two
   * listeners on one port made `kafka-storage format` fail), until destroy() or this process ends
   * (up() releases them if the cluster never starts).
   */
  static async #plan(opts: LocalKafkaOptions, leases: PortLease[]): Promise<ClusterFile> {
    const count = opts.brokers ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 9)
      throw new Error(`--brokers must be 1..9; got ${count}`);
    const base = opts.port ?? 19092;
    const reserve = async () => {
      const lease = await reservePort();
      leases.push(lease);
      return lease.port;
    };
    const nodes: LocalKafkaNode[] = [];
    for (let i = 1; i <= count; i++) {
      const clientPort = base === 0 ? await reserve() : base + i - 1;
      nodes.push({
        id: i,
        clientPort,
        advertisedPort: opts.advertisedPorts?.[i - 1] ?? clientPort,
        internalPort: await reserve(),
        controllerPort: i === 1 ? await reserve() : null,
      });
    }
    return {
      version: opts.version ?? kafkaVersionFromEnv(),
      clusterId: clusterIdFor(randomBytes(16)),
      nodes,
      sasl: opts.sasl,
      oauthbearer: opts.oauthbearer,
      heapMb: opts.heapMb ?? 512,
    };
  }

  #nodeDir(id: number): string {
    return join(this.dir, `node-${id}`);
  }

  #writeConfigs(opts: LocalKafkaOptions, file: ClusterFile): void {
    const n = file.nodes.length;
    const controller = file.nodes[0]!;
    const rf = Math.min(n, 3);
    for (const node of file.nodes) {
      const nodeDir = this.#nodeDir(node.id);
      mkdirSync(nodeDir, { recursive: true });
      const clientProtocol = file.sasl || file.oauthbearer ? 'SASL_PLAINTEXT' : 'PLAINTEXT';
      const listeners = [
        `CLIENT://127.0.0.1:${node.clientPort}`,
        `INTERNAL://127.0.0.1:${node.internalPort}`,
      ];
      if (node.controllerPort !== null) listeners.push(`CONTROLLER://127.0.0.1:${node.controllerPort}`);
      const props: Record<string, string | number | boolean> = {
        'process.roles': node.id === 1 ? 'broker,controller' : 'broker',
        'node.id': node.id,
        'controller.quorum.voters': `1@127.0.0.1:${controller.controllerPort}`,
        listeners: listeners.join(','),
        'advertised.listeners': `CLIENT://127.0.0.1:${node.advertisedPort},INTERNAL://127.0.0.1:${node.internalPort}`,
        'listener.security.protocol.map': `CLIENT:${clientProtocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT`,
        'controller.listener.names': 'CONTROLLER',
        'inter.broker.listener.name': 'INTERNAL',
        'log.dirs': join(nodeDir, 'data'),
        'num.partitions': 1,
        'default.replication.factor': rf,
        'min.insync.replicas': rf >= 3 ? 2 : 1,
        'offsets.topic.replication.factor': rf,
        'offsets.topic.num.partitions': 5,
        'transaction.state.log.replication.factor': rf,
        'transaction.state.log.min.isr': Math.min(rf, 2),
        'share.coordinator.state.topic.replication.factor': rf,
        'share.coordinator.state.topic.min.isr': Math.min(rf, 2),
        'auto.create.topics.enable': opts.autoCreateTopics ?? false,
        'delete.topic.enable': true,
        'unclean.leader.election.enable': false,
        'group.initial.rebalance.delay.ms': 0,
        // Failures show quickly: a stopped follower leaves the ISR after 5 s, a dead broker is
        // fenced (and its partitions get new leaders) after 6 s.
        'replica.lag.time.max.ms': 5000,
        'broker.session.timeout.ms': 6000,
        'broker.heartbeat.interval.ms': 1000,
      };
      if (opts.maxMessageBytes !== undefined) props['message.max.bytes'] = opts.maxMessageBytes;
      if (file.sasl) {
        const users = Object.entries(file.sasl.users)
          .map(([u, p]) => `user_${u}="${p}"`)
          .join(' ');
        props['listener.name.client.sasl.enabled.mechanisms'] = 'PLAIN';
        props['listener.name.client.plain.sasl.jaas.config'] =
          `org.apache.kafka.common.security.plain.PlainLoginModule required ${users};`;
        props['authorizer.class.name'] = 'org.apache.kafka.metadata.authorizer.StandardAuthorizer';
        // The loopback-only INTERNAL and CONTROLLER listeners are PLAINTEXT: their principal is ANONYMOUS.
        props['super.users'] = [...file.sasl.superUsers, 'ANONYMOUS'].map((u) => `User:${u}`).join(';');
        props['allow.everyone.if.no.acl.found'] = false;
      }
      if (file.oauthbearer) Object.assign(props, oauthBearerProps(file.oauthbearer));
      Object.assign(props, opts.extraConfig ?? {});
      const text = Object.entries(props)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join('\n');
      writeFileSync(join(nodeDir, 'server.properties'), `${text}\n`);
      writeFileSync(join(nodeDir, 'log4j2.properties'), log4j2(join(nodeDir, 'server.log')));
      writeFileSync(join(nodeDir, 'log4j.properties'), log4j1(join(nodeDir, 'server.log')));
    }
  }

  /** kafka-storage format of every node, in parallel (a JVM each: seconds per node otherwise). */
  async #format(clusterId: string): Promise<void> {
    await Promise.all(
      this.nodes.map(async (node) => {
        const props = join(this.#nodeDir(node.id), 'server.properties');
        const args = ['-cp', join(this.#libs, '*'), 'kafka.tools.StorageTool', 'format', '-t', clusterId];
        const r = await run(this.#java, [...args, '-c', props]);
        if (r.code !== 0)
          throw new Error(`kafka-storage format of node ${node.id} failed: ${r.output.slice(-2000)}`);
      }),
    );
  }

  /** The node's pid if it runs (started by this cluster directory), else null. */
  pidOf(id: number): number | null {
    const nodeDir = this.#nodeDir(id);
    return ownedPid(join(nodeDir, 'pid'), join(nodeDir, 'server.properties'));
  }

  #spawn(id: number): void {
    const nodeDir = this.#nodeDir(id);
    const out = openSync(join(nodeDir, 'server.log'), 'a');
    const logConfig =
      major(this.version) >= 4
        ? `-Dlog4j2.configurationFile=${join(nodeDir, 'log4j2.properties')}`
        : `-Dlog4j.configuration=file:${join(nodeDir, 'log4j.properties')}`;
    const child = spawn(
      this.#java,
      [
        `-Xmx${this.#heapMb}m`,
        `-Xms${Math.min(256, this.#heapMb)}m`,
        '-XX:+UseG1GC',
        '-XX:MaxGCPauseMillis=20',
        // The JVM's collections, with wall-clock times, beside server.log (pauses explain latency tails).
        `-Xlog:gc:file=${join(nodeDir, 'gc.log')}:time,uptime:filecount=2,filesize=10m`,
        '-Djava.awt.headless=true',
        // Kafka >= 4.0 refuses every OAUTHBEARER URL (JWKS, token endpoint) it is not told to allow.
        ...(this.#oauthbearer
          ? [`-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=${this.#oauthbearer.jwksUrl}`]
          : []),
        logConfig,
        '-cp',
        join(this.#libs, '*'),
        'kafka.Kafka',
        join(nodeDir, 'server.properties'),
      ],
      { detached: true, stdio: ['ignore', out, out] },
    );
    closeSync(out);
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start Kafka node ${id} (java: ${this.#java})`);
    writeFileSync(join(nodeDir, 'pid'), `${child.pid}\n`);
    this.#log(`kafka: node ${id} started (pid ${child.pid}), logs in ${join(nodeDir, 'server.log')}`);
  }

  /** Sends `signal` to node `id` (SIGKILL: a crash; SIGSTOP: a freeze). Returns at once. */
  signal(id: number, signal: NodeJS.Signals): void {
    const pid = this.pidOf(id);
    if (pid === null) throw new Error(`Kafka node ${id} is not running`);
    process.kill(pid, signal);
  }

  /** kill -9 of node `id`; resolves once the process is gone. */
  async kill(id: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const nodeDir = this.#nodeDir(id);
    await stopPid(join(nodeDir, 'pid'), join(nodeDir, 'server.properties'), signal, 30_000);
  }

  /** (Re)starts node `id` and waits until it is back in the cluster's metadata. */
  async start(id: number, timeoutMs = 90_000): Promise<void> {
    if (this.pidOf(id) === null) this.#spawn(id);
    const node = this.nodes.find((n) => n.id === id)!;
    const deadline = Date.now() + timeoutMs;
    while (!(await portOpen(node.clientPort))) {
      if (Date.now() > deadline)
        throw new Error(`Kafka node ${id} did not open port ${node.clientPort}${this.#tail(id)}`);
      if (this.pidOf(id) === null) throw new Error(`Kafka node ${id} exited during start${this.#tail(id)}`);
      await sleep(200);
    }
    await this.#untilBrokers((ids) => ids.includes(id), deadline, `node ${id} registered`);
  }

  /** Stops every node (SIGTERM, then SIGKILL). */
  async down(): Promise<void> {
    await LocalKafkaCluster.down(this.dir);
  }

  /**
   * Stops the cluster, deletes its directory and releases the ports reserved for it. SIGKILL: the
   * data is deleted right after, so a graceful shutdown (controlled shutdown, log flush: seconds
   * per node) would buy nothing.
   */
  async destroy(): Promise<void> {
    await LocalKafkaCluster.down(this.dir, 'SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
    for (const l of this.#leases) l.release();
  }

  /** A kafkajs client for the cluster (as the first super user when SASL is on). */
  client(clientId = 'local-kafka', via: 'client' | 'internal' = 'internal'): Kafka {
    const user = via === 'client' ? this.sasl?.superUsers[0] : undefined;
    return new Kafka({
      clientId,
      brokers: via === 'client' ? this.bootstrap : this.internalBootstrap,
      logLevel: logLevel.NOTHING,
      connectionTimeout: 3000,
      requestTimeout: 10_000,
      retry: { retries: 2, initialRetryTime: 100 },
      sasl:
        this.sasl && user !== undefined
          ? { mechanism: 'plain', username: user, password: this.sasl.users[user] ?? '' }
          : undefined,
    });
  }

  #tail(id: number): string {
    try {
      const text = readFileSync(join(this.#nodeDir(id), 'server.log'), 'utf8');
      return `; last lines of ${join(this.#nodeDir(id), 'server.log')}:\n${text.slice(-3000)}`;
    } catch {
      return '';
    }
  }

  async #untilBrokers(ok: (ids: number[]) => boolean, deadline: number, what: string): Promise<void> {
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      const admin = this.client('local-kafka-wait').admin();
      try {
        await admin.connect();
        const { brokers } = await admin.describeCluster();
        const ids = brokers.map((b) => b.nodeId).sort();
        if (ok(ids)) return;
        last = `brokers in metadata: ${ids.join(',')}`;
      } catch (e) {
        last = (e as Error).message;
      } finally {
        await admin.disconnect().catch(() => {});
      }
      await sleep(300);
    }
    throw new Error(`Kafka cluster in ${this.dir}: timed out waiting for ${what} (${last})`);
  }

  /**
   * Until every broker is registered and a produce with acks=all to a probe topic (replicated on
   * every node) succeeds: the definition of "accepts produce requests".
   */
  async waitReady(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const n of this.nodes) {
      while (!(await portOpen(n.clientPort))) {
        if (this.pidOf(n.id) === null)
          throw new Error(`Kafka node ${n.id} exited during start${this.#tail(n.id)}`);
        if (Date.now() > deadline)
          throw new Error(`Kafka node ${n.id} did not open its port${this.#tail(n.id)}`);
        await sleep(200);
      }
    }
    const count = this.nodes.length;
    await this.#untilBrokers((ids) => ids.length === count, deadline, `${count} broker(s) registered`);
    const kafka = this.client('local-kafka-ready');
    const admin = kafka.admin();
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    let last = '';
    try {
      await admin.connect();
      await producer.connect();
      while (Date.now() < deadline) {
        try {
          const topics = await admin.listTopics();
          if (!topics.includes('__outbox_ready')) {
            await admin.createTopics({
              topics: [{ topic: '__outbox_ready', numPartitions: 1, replicationFactor: Math.min(count, 3) }],
              waitForLeaders: true,
            });
          }
          await producer.send({ topic: '__outbox_ready', acks: -1, messages: [{ value: 'ready' }] });
          return;
        } catch (e) {
          last = (e as Error).message;
          await sleep(300);
        }
      }
      throw new Error(`Kafka cluster in ${this.dir} did not accept a produce request in time: ${last}`);
    } finally {
      await producer.disconnect().catch(() => {});
      await admin.disconnect().catch(() => {});
    }
  }
}

/** server.properties of an OAUTHBEARER CLIENT listener validated against a JWKS (see OAuthBearerListener). */
function oauthBearerProps(o: OAuthBearerListener): Record<string, string | number> {
  const p = 'listener.name.client.oauthbearer.';
  const props: Record<string, string | number> = {
    'listener.name.client.sasl.enabled.mechanisms': 'OAUTHBEARER',
    [`${p}sasl.jaas.config`]: 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;',
    [`${p}sasl.server.callback.handler.class`]:
      'org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler',
    [`${p}sasl.oauthbearer.jwks.endpoint.url`]: o.jwksUrl,
  };
  if (o.expectedAudience) props[`${p}sasl.oauthbearer.expected.audience`] = o.expectedAudience;
  if (o.expectedIssuer) props[`${p}sasl.oauthbearer.expected.issuer`] = o.expectedIssuer;
  if (o.maxReauthMs !== undefined) props[`${p}connections.max.reauth.ms`] = o.maxReauthMs;
  return props;
}

/** Runs a command to completion: its exit code and its output (stdout and stderr together). */
function run(cmd: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', (e) => done({ code: -1, output: e.message }));
    child.on('close', (code) => done({ code: code ?? -1, output }));
  });
}

/** Signals the owned pid and waits until it is gone (SIGKILL after `graceMs`). true if it ran. */
async function stopPid(
  pidFile: string,
  propsFile: string,
  signal: NodeJS.Signals,
  graceMs: number,
): Promise<boolean> {
  const pid = ownedPid(pidFile, propsFile);
  if (pid === null) {
    rmSync(pidFile, { force: true });
    return false;
  }
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already.
  }
  const deadline = Date.now() + graceMs;
  while (pidAlive(pid)) {
    if (Date.now() > deadline) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone.
      }
    }
    await sleep(100);
  }
  rmSync(pidFile, { force: true });
  return true;
}

function log4j2(file: string): string {
  return `status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
`;
}

function log4j1(file: string): string {
  return `log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${file}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
`;
}
