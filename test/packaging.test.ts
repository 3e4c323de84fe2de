/**
 * What a user installs: the lockfile `npm ci` accepts, the image's build steps (deploy/Dockerfile
 * replayed without a container engine), and the npm package (`npm pack`, then
 * `npm install -g` into a temporary prefix, then the README's commands against a real database).
 * These tests install from the registry: they take a minute, and need the network or a mirror.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { useTestDatabase, waitFor } from './support/postgres.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  files: string[];
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  bin: Record<string, string>;
};
/** The project's Node 24 first on PATH, as in the node:24 image and after `npm install -g` on Node 24. */
const NODE_DIR = dirname(realpathSync(process.execPath));
const work = mkdtempSync(join(tmpdir(), 'outbox-packaging-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function sh(cmd: string, cwd: string, env: Record<string, string> = {}): string {
  const r = spawnSync('sh', ['-c', cmd], {
    cwd,
    env: { ...process.env, ...env, PATH: `${NODE_DIR}:${env.PATH ?? process.env.PATH}` },
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (r.status !== 0) {
    throw new Error(
      `\`${cmd}\` in ${cwd} exited ${r.status ?? r.signal ?? r.error}:\n${r.stdout}\n${r.stderr}`,
    );
  }
  return r.stdout;
}

describe('package-lock.json', () => {
  it('locks every optional platform build its packages name, so `npm ci` accepts it on any platform', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { optionalDependencies?: Record<string, string> }>;
    };
    const missing: string[] = [];
    for (const [path, p] of Object.entries(lock.packages)) {
      for (const dep of Object.keys(p.optionalDependencies ?? {})) {
        // npm resolves a dependency in the nearest node_modules up the path.
        const candidates = [`${path ? `${path}/` : ''}node_modules/${dep}`, `node_modules/${dep}`];
        if (!candidates.some((c) => lock.packages[c])) missing.push(`${dep} (of ${path || 'the root'})`);
      }
    }
    expect(missing).toEqual([]);
  });
});

// --- deploy/Dockerfile, replayed ------------------------------------------------------------

interface Instruction {
  op: string;
  args: string;
}

function dockerfileStages(): { name?: string; ins: Instruction[] }[] {
  const text = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8')
    .split('\n')
    .filter((l) => !/^\s*#/.test(l))
    .join('\n')
    .replace(/\\\n/g, ' ');
  const stages: { name?: string; ins: Instruction[] }[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const op = m[1]!.toUpperCase();
    const args = m[2]!.trim();
    if (op === 'FROM') stages.push({ name: /\bAS\s+(\S+)/i.exec(args)?.[1], ins: [] });
    stages.at(-1)?.ins.push({ op, args });
  }
  return stages;
}

/**
 * Runs the Dockerfile's COPY, WORKDIR, ENV and RUN instructions in directories standing for each
 * stage's file system (a stage's `/` is `<work>/stage-N`), with the project's Node 24 as the
 * image's node. Returns each stage's root and its final environment.
 */
function replayDockerfile(into: string): { root: string; env: Record<string, string> }[] {
  const out: { root: string; env: Record<string, string> }[] = [];
  const stages = dockerfileStages();
  for (const [i, stage] of stages.entries()) {
    const root = join(into, `stage-${i}`);
    mkdirSync(root, { recursive: true });
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
    let workdir = '/';
    const inRoot = (p: string) => join(root, posix.resolve(workdir, p));
    for (const { op, args } of stage.ins) {
      switch (op) {
        case 'WORKDIR':
          workdir = posix.resolve(workdir, args);
          mkdirSync(inRoot('.'), { recursive: true });
          break;
        case 'ENV': {
          const [, k, v] = /^(\w+)=(.*)$/.exec(args) ?? [];
          if (!k) throw new Error(`ENV ${args}: use KEY=VALUE`);
          // Absolute paths written in the Dockerfile are in the stage; expanded variables are not.
          env[k] = v!
            .replace(/(^|:)\//g, `$1${root}/`)
            .replace(/\$(\w+)|\$\{(\w+)\}/g, (_, a, b) => env[a ?? b] ?? '');
          break;
        }
        case 'COPY': {
          const words = args.split(/\s+/);
          const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
          const paths = words.filter((w) => !w.startsWith('--'));
          const dest = paths.pop()!;
          for (const src of paths) {
            const source = from
              ? join(out[stages.findIndex((s) => s.name === from)]!.root, src)
              : join(ROOT, src);
            const target = dest.endsWith('/') ? join(inRoot(dest), posix.basename(src)) : inRoot(dest);
            cpSync(source, target, { recursive: true });
          }
          break;
        }
        case 'RUN':
          sh(args, inRoot('.'), env);
          break;
        case 'FROM':
        case 'USER':
        case 'EXPOSE':
        case 'HEALTHCHECK':
        case 'ENTRYPOINT':
        case 'CMD':
          break;
        default:
          throw new Error(`the replay does not know Dockerfile instruction ${op}`);
      }
    }
    out.push({ root, env });
  }
  return out;
}

describe('deploy/Dockerfile build steps (no container engine: replayed in clean directories)', () => {
  it('build a runtime with production dependencies only and `outbox-relay` on PATH', () => {
    const stages = replayDockerfile(join(work, 'image'));
    const runtime = stages.at(-1)!;
    const app = join(runtime.root, 'app');
    const installed = readdirSync(join(app, 'node_modules'))
      .flatMap((d) =>
        d.startsWith('@') ? readdirSync(join(app, 'node_modules', d)).map((s) => `${d}/${s}`) : [d],
      )
      .filter((d) => !d.startsWith('.'));
    for (const dep of Object.keys(PKG.dependencies)) expect(installed, dep).toContain(dep);
    for (const dev of Object.keys(PKG.devDependencies))
      expect(installed, `dev dependency ${dev}`).not.toContain(dev);
    expect(installed).not.toContain('cpu-features');
    expect(existsSync(join(app, 'dist/cli/main.js'))).toBe(true);
    expect(existsSync(join(app, 'sql'))).toBe(true);
    // ENTRYPOINT ["outbox-relay"], resolved through the image's PATH.
    const entry = JSON.parse(
      dockerfileStages()
        .at(-1)!
        .ins.find((i) => i.op === 'ENTRYPOINT')!.args,
    ) as string[];
    expect(entry).toEqual(['outbox-relay']);
    const help = sh('outbox-relay --help && outbox-relay --version', '/', runtime.env);
    expect(help).toContain('Usage:');
    expect(help).toContain(PKG.version);
  });
});

// --- npm pack, npm install -g ---------------------------------------------------------------

describe('npm pack → npm install -g', () => {
  const db = useTestDatabase();
  const prefix = join(work, 'prefix');
  const bin = join(prefix, 'bin');
  // The README's commands verbatim, on this file's own slot: slot names are global to the shared
  // test cluster, and another file's database may own the default one.
  const cli = (args: string, env: Record<string, string> = {}) =>
    sh(`outbox-relay ${args}`, work, { PATH: `${bin}:${process.env.PATH}`, OUTBOX_SLOT: db.name, ...env });

  it('packs the CLI, the SDK, sql/, proto/ and docs/ and installs globally on Node 24', () => {
    // Pack a copy of the sources (prepack builds dist/), not the shared work tree.
    const src = join(work, 'src-copy');
    mkdirSync(src);
    for (const f of [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'LICENSE',
      'src',
      ...PKG.files,
    ]) {
      if (existsSync(join(ROOT, f)) && !existsSync(join(src, f)))
        cpSync(join(ROOT, f), join(src, f), { recursive: true });
    }
    rmSync(join(src, 'dist'), { recursive: true, force: true });
    symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'));
    const packed = JSON.parse(sh(`npm pack --json --pack-destination ${JSON.stringify(work)}`, src)) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = packed[0]!.files.map((f) => f.path);
    for (const f of [
      'bin/outbox-relay.js',
      'dist/cli/main.js',
      'dist/index.js',
      'dist/index.d.ts',
      'sql/000001_outbox.sql',
      'proto/outbox/v1/envelope.proto',
      'docs/configuration.md',
      'docs/operator-cli.md',
      'docs/upgrading.md',
      'README.md',
      'CHANGELOG.md',
    ]) {
      expect(files, f).toContain(f);
    }
    expect(files.filter((f) => /\.test\.|^test\/|^src\//.test(f))).toEqual([]);
    // The licence package.json names; no source maps (they point at src/, which is not shipped)
    // and no images (the docs' screenshots are for the repository's pages).
    expect(files).toContain('LICENSE');
    expect(readFileSync(join(src, 'LICENSE'), 'utf8')).toMatch(/Apache License\s+Version 2\.0/);
    // (The console's favicon.svg is served by the relay: it stays.)
    expect(files.filter((f) => /\.map$|\.(png|jpe?g|gif|webp)$/i.test(f))).toEqual([]);
    expect(files).toContain('dist/console/assets/favicon.svg');
    sh(
      `npm install -g --no-audit --no-fund --prefix ${JSON.stringify(prefix)} ./${packed[0]!.filename}`,
      work,
    );
    expect(existsSync(join(bin, 'outbox-relay'))).toBe(true);
    expect(cli('--help')).toContain('Usage:');
    expect(cli('--version').trim()).toBe(PKG.version);
    expect(cli('run --help')).toContain('--kafka-brokers');
  });

  it('the SDK imports from the installed package', () => {
    const app = join(work, 'app');
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(join(prefix, 'lib/node_modules', PKG.name), join(app, 'node_modules', PKG.name));
    const out = sh(
      `node --input-type=module -e "const m = await import('${PKG.name}'); console.log(typeof m.createOutbox, typeof m.createInbox)"`,
      app,
    );
    expect(out.trim()).toBe('function function');
  });

  it('every command of the README’s "Use it" is accepted as written; those that only need the database run against one', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(
      readme.indexOf('## Use it'),
      readme.indexOf('\n## ', readme.indexOf('## Use it') + 1),
    );
    const lines = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
      .flatMap((m) => m[1]!.split('\n'))
      .map((l) => l.replace(/\s+#.*$/, '').trim())
      .filter((l) => l.startsWith('outbox-relay '));
    expect(lines.length).toBeGreaterThanOrEqual(10);
    const env = { DATABASE_URL: 'postgres://relay@db:5432/app' };
    for (const line of lines) {
      const args = line.slice('outbox-relay '.length);
      // As written: flags, values and subcommands are valid for that command.
      if (/--help\b|^config |^completion /.test(args)) expect(() => cli(args, env), line).not.toThrow();
      else expect(() => cli(`config check ${args}`, env), line).not.toThrow();
    }
    // Against a real database (its URL in place of the example's), the read-only ones.
    const real = { DATABASE_URL: db.url };
    for (const line of lines.filter((l) =>
      /^outbox-relay (migrate|check|events list|replay .*--dry-run)/.test(l),
    )) {
      const args = line.slice('outbox-relay '.length).replace(/postgres:\/\/\S+/g, db.url);
      expect(() => cli(args, real), line).not.toThrow();
    }
  });

  it('migrate, check and run --sink stdout work against a real database, as the README says', async () => {
    const url = db.url;
    cli(`migrate --database-url ${url}`);
    cli(`check --database-url ${url}`);
    const child: ChildProcess = spawn(
      'outbox-relay',
      ['run', '--database-url', url, '--sink', 'stdout', '--no-http'],
      {
        env: {
          ...process.env,
          PATH: `${bin}:${NODE_DIR}:${process.env.PATH}`,
          LOG_FORMAT: 'json',
          OUTBOX_SLOT: db.name,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d));
    child.stderr!.on('data', (d: Buffer) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await db.query(
        `INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload)
         VALUES ('Account', '42', 'AccountDebited', convert_to('{"amount":10}', 'UTF8'))`,
      );
      await waitFor(() => stdout.includes('AccountDebited'), {
        timeoutMs: 30_000,
        message: () => `no event on stdout; stderr:\n${stderr}`,
      });
      const line = JSON.parse(stdout.trim().split('\n')[0]!) as Record<string, unknown>;
      expect(line).toMatchObject({ topic: 'outbox.event.Account', key: '42' });
      expect(stderr).not.toMatch(/ExperimentalWarning|DeprecationWarning/);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
