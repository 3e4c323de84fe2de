// `npm run compat:debezium [vitest args]`: the Debezium compatibility proof
// (test/integration/debezium-compat.test.ts), whose output ends with its summary line
// {"compared":N,"identical":M,"setups":[…]} (issue 26) — printed after vitest's own report, so a
// script can read the last line. Exits with vitest's status.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const summary = `${root}.tmp/debezium-compat-summary.json`;
mkdirSync(`${root}.tmp`, { recursive: true });
rmSync(summary, { force: true });
const run = spawnSync(
  `${root}node_modules/.bin/vitest`,
  ['run', 'test/integration/debezium-compat.test.ts', ...process.argv.slice(2)],
  { cwd: root, stdio: 'inherit', env: { ...process.env, DEBEZIUM_COMPAT_SUMMARY: summary } },
);
if (existsSync(summary)) process.stdout.write(`${readFileSync(summary, 'utf8').trim()}\n`);
process.exit(run.status ?? 1);
