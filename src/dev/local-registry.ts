/**
 * A real Schema Registry on loopback: Apicurio Registry's ready-built Quarkus app from Maven
 * Central (io.apicurio:apicurio-registry-app:<version>:tar.gz:all), in-memory storage (empty at
 * every start), its Confluent-compatible API at /apis/ccompat/v7. Used by the Schema Registry
 * tests. Needs Maven the first time (the tar.gz is resolved into APICURIO_CACHE_DIR or
 * <repo>/.cache/apicurio/<version>, then unpacked; later starts are offline) and Java >= 21
 * (APICURIO_JAVA_HOME, else the machine's Temurin 25, else JAVA_HOME / `java` if recent enough).
 *
 * Both of its ports are on 127.0.0.1 (the management port, with /health/ready, otherwise binds
 * 0.0.0.0:9000). The process is ours alone: stop() signals exactly the pid it started.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type PortLease, reservePort } from './ports.ts';

export const DEFAULT_APICURIO_VERSION = '3.3.3';
const TEMURIN = '/usr/lib/jvm/temurin-25-jdk-amd64';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export function apicurioCacheDir(version: string): string {
  return join(process.env.APICURIO_CACHE_DIR ?? join(ROOT, '.cache', 'apicurio'), version);
}

/** A `java` of version >= 21, or an error saying how to get one. */
export function java21(): string {
  const candidates = [
    process.env.APICURIO_JAVA_HOME && join(process.env.APICURIO_JAVA_HOME, 'bin', 'java'),
    join(TEMURIN, 'bin', 'java'),
    process.env.JAVA_HOME && join(process.env.JAVA_HOME, 'bin', 'java'),
    'java',
  ].filter((c): c is string => !!c);
  for (const java of candidates) {
    const r = spawnSync(java, ['-version'], { encoding: 'utf8' });
    const m = /version "(\d+)/.exec(`${r.stderr ?? ''}${r.stdout ?? ''}`);
    if (!r.error && m && Number(m[1]) >= 21) return java;
  }
  throw new Error(
    'Apicurio Registry needs Java >= 21 and none was found. Fix: install a JDK 21+ (e.g. Temurin) and set APICURIO_JAVA_HOME to it.',
  );
}

/** The unpacked app's directory (holding quarkus-run.jar), fetched with Maven on first use. */
export async function ensureApicurioApp(
  version = DEFAULT_APICURIO_VERSION,
  log: (line: string) => void = () => {},
): Promise<string> {
  if (!/^\d+\.\d+\.\d+$/.test(version))
    throw new Error(`Apicurio version must look like 3.3.3; got "${version}"`);
  const base = apicurioCacheDir(version);
  const app = join(base, 'app');
  if (existsSync(join(base, '.complete'))) return app;
  mkdirSync(app, { recursive: true });
  const artifact = `io.apicurio:apicurio-registry-app:${version}:tar.gz:all`;
  const tar = join(base, `apicurio-registry-app-${version}-all.tar.gz`);
  if (!existsSync(tar)) {
    log(`registry: resolving ${artifact} (~160 MB) from Maven Central into ${base}`);
    const code = await run('mvn', [
      '-B',
      '-q',
      'dependency:copy',
      `-Dartifact=${artifact}`,
      `-DoutputDirectory=${base}`,
    ]);
    if (code !== 0 || !existsSync(tar))
      throw new Error(
        `mvn could not resolve ${artifact} (exit ${code}). Fix: check Maven's access to Maven Central`,
      );
  }
  const code = await run('tar', ['-xzf', tar, '-C', app]);
  if (code !== 0 || !existsSync(join(app, 'quarkus-run.jar')))
    throw new Error(`unpacking ${tar} failed (exit ${code}); delete ${base} and retry`);
  writeFileSync(join(base, '.complete'), `${new Date().toISOString()}\n`);
  return app;
}

function run(cmd: string, args: string[]): Promise<number> {
  return new Promise((done, fail) => {
    const p = spawn(cmd, args, { stdio: 'ignore' });
    p.on('error', fail);
    p.on('exit', (c) => done(c ?? 1));
  });
}

export class LocalRegistry {
  /** Base URL of the Confluent-compatible API. */
  readonly url: string;
  readonly managementUrl: string;
  readonly logFile: string;
  readonly #child: ChildProcess;
  /** The two ports, reserved (src/dev/ports.ts) until stop(). */
  readonly #leases: PortLease[];

  private constructor(child: ChildProcess, leases: PortLease[], logFile: string) {
    this.#child = child;
    this.#leases = leases;
    const [port, managementPort] = leases.map((l) => l.port);
    this.url = `http://127.0.0.1:${port}/apis/ccompat/v7`;
    this.managementUrl = `http://127.0.0.1:${managementPort}`;
    this.logFile = logFile;
  }

  /** Starts the registry (its log in `dir`) and returns once /health/ready and the ccompat API answer. */
  static async start(opts: {
    dir: string;
    version?: string;
    readyTimeoutMs?: number;
    log?: (l: string) => void;
  }) {
    const app = await ensureApicurioApp(opts.version, opts.log);
    const java = java21();
    mkdirSync(opts.dir, { recursive: true });
    const leases = [await reservePort(), await reservePort()];
    const [port, managementPort] = leases.map((l) => l.port);
    const logFile = join(opts.dir, 'registry.log');
    const out = openSync(logFile, 'a');
    const child = spawn(
      java,
      [
        '-Xmx384m',
        '-XX:+UseSerialGC',
        '-Dquarkus.http.host=127.0.0.1',
        `-Dquarkus.http.port=${port}`,
        '-Dquarkus.management.host=127.0.0.1',
        `-Dquarkus.management.port=${managementPort}`,
        '-jar',
        join(app, 'quarkus-run.jar'),
      ],
      { cwd: opts.dir, stdio: ['ignore', out, out] },
    );
    closeSync(out);
    const registry = new LocalRegistry(child, leases, logFile);
    try {
      await registry.#waitReady(opts.readyTimeoutMs ?? 180_000);
    } catch (e) {
      await registry.stop();
      throw e;
    }
    return registry;
  }

  async #waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      if (this.#child.exitCode !== null)
        throw new Error(`Apicurio Registry exited (${this.#child.exitCode}) during start${this.#tail()}`);
      try {
        const ready = await fetch(`${this.managementUrl}/health/ready`, {
          signal: AbortSignal.timeout(5000),
        });
        const api = ready.ok
          ? await fetch(`${this.url}/subjects`, { signal: AbortSignal.timeout(5000) })
          : null;
        if (api?.ok) return;
        last = `health ${ready.status}${api ? `, ccompat ${api.status}` : ''}`;
      } catch (e) {
        last = (e as Error).message;
      }
      await new Promise((r) => setTimeout(r, 300));
    }
    throw new Error(`Apicurio Registry not ready after ${timeoutMs} ms (${last})${this.#tail()}`);
  }

  #tail(): string {
    try {
      return `; last lines of ${this.logFile}:\n${readFileSync(this.logFile, 'utf8').slice(-2000)}`;
    } catch {
      return '';
    }
  }

  /** SIGTERM, then SIGKILL after 15 s; resolves once the process is gone. Safe to repeat. */
  async stop(): Promise<void> {
    const child = this.#child;
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await gone;
      clearTimeout(timer);
    }
    for (const l of this.#leases) l.release();
  }
}
