import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalKafkaCluster } from '../src/dev/local-kafka.ts';
import { waitFor } from './support/postgres.ts';
import { ROOT } from './support/relay.ts';

/**
 * `npm run playground` as a user runs it (the README's command, in a process group of its own
 * so a Ctrl-C reaches npm and the playground alike, as in a terminal), then the README's
 * commands after it as written (bash, from the README's code block), an independent reader
 * (kcat: librdkafka) reading a sample event back, and a Ctrl-C that must leave no process
 * behind: not the playground, not the Kafka JVM, not the postgres server.
 */
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const DIR = join(ROOT, '.tmp', 'playground');

/** The fenced blocks of a language under a heading, in order. */
function blocksUnder(heading: string, lang: string): string[] {
  const start = README.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`README has no heading ${heading}`);
  const next = README.indexOf('\n#', start + heading.length + 2);
  const section = README.slice(start, next < 0 ? undefined : next);
  return [...section.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1]!);
}
/**
 * The process is gone: no such pid, or a zombie (exited; reaping it is its parent's business —
 * postgres's parent is init once pg_ctl returned). Awaited briefly: the reaper may lag.
 */
async function expectGone(pid: number, what: string): Promise<void> {
  const alive = () => {
    try {
      process.kill(pid, 0);
    } catch {
      return false;
    }
    const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
    return !/^\d+ \(.*\) Z/.test(stat);
  };
  await waitFor(() => !alive(), { timeoutMs: 10_000, message: `${what} (pid ${pid}) is gone` });
}

/** A command line without its comment (none of these commands has a # of its own). */
const command = (line: string) => line.trim().replace(/\s+#.*$/, '');

let playground: ChildProcess | null = null;
let out = '';
let exited: Promise<number | string> | null = null;

afterAll(async () => {
  // Only when the test failed half-way: no leftovers either way.
  if (playground && playground.exitCode === null && playground.signalCode === null) {
    process.kill(-playground.pid!, 'SIGKILL');
    await exited;
  }
  await LocalKafkaCluster.down(join(DIR, 'kafka'));
});

describe('npm run playground', () => {
  const [start, after] = blocksUnder('### Try it with Kafka: `npm run playground`', 'sh');
  let pids: { playground: number; kafka: number; postgres: number };

  it('starts PostgreSQL, Kafka and the relay with its console from the README’s command', async () => {
    expect(start!.trim().split('\n')).toHaveLength(1);
    // `npm install` is the README's first step on any machine; here the dependencies are there.
    const line = command(start!).replace(/^npm install && /, '');
    expect(line).toBe('npm run playground');
    expect(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.playground).toBe(
      'node scripts/playground.ts',
    );
    playground = spawn('bash', ['-c', line], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    playground.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    playground.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    exited = new Promise((resolve) =>
      playground!.on('exit', (code, signal) => resolve(code ?? signal ?? -1)),
    );
    await waitFor(() => out.includes('playground: writing a sample event'), {
      timeoutMs: 180_000,
      message: () => `the playground is ready; its output:\n${out}`,
    });
    expect(out).toMatch(/console: {2}http:\/\/127\.0\.0\.1:\d+\/console\/ {2}\(operator token: [\w-]{20,}\)/);
    pids = {
      playground: Number(readFileSync(join(DIR, 'pid'), 'utf8')),
      kafka: Number(readFileSync(join(DIR, 'kafka', 'node-1', 'pid'), 'utf8')),
      postgres: Number(
        readFileSync(join(/\(data in ([^)]+)\)/.exec(out)![1]!, 'postmaster.pid'), 'utf8').split('\n')[0],
      ),
    };
    for (const pid of Object.values(pids)) expect(() => process.kill(pid, 0)).not.toThrow();
  }, 200_000);

  it('relays: kcat, an independent reader, reads a sample event back with the command it printed', async () => {
    const printed = /read: {5}(kcat .*)$/m.exec(out)![1]!;
    const r = spawnSync('bash', ['-c', `${printed} -o beginning -c 1`], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().replace(/^order-1001 /, ''))).toMatchObject({
      seq: 0,
      id: 'order-1001',
    });
  });

  it('the README’s commands after it work as written: its transaction is published to outbox.event.Account', () => {
    // The heredoc is the README's example ("Write events in your own transaction"), not a copy that could drift.
    const example = README.split('```sql\n')[1]!.split('```')[0]!;
    expect(example).toMatch(/INSERT INTO outbox .*\n.*'Account', '42'/);
    expect(after).toContain(`<<'SQL'\n${example}SQL\n`);
    expect(existsSync(join(DIR, 'env')), 'the playground wrote its env file').toBe(true);
    // -e -u: a failed `source` must stop the script, never leave psql to a server of the machine's.
    const r = spawnSync('bash', ['-euc', after!], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    expect(r.stdout, r.stderr).toContain('42 {"amount":10}');
    // `status` printed the verdict (its exit code says which: the Shipment events fail on purpose).
    expect(r.stdout).toMatch(/^(healthy|DEGRADED|UNHEALTHY)$/m);
  });

  it('the failing sample event shows in the one verdict, naming its topic and what to do', async () => {
    const url = /console: {2}(http:\/\/127\.0\.0\.1:\d+)\//.exec(out)![1]!;
    await waitFor(
      async () => {
        const body = (await (await fetch(`${url}/readyz`)).json()) as {
          health: { findings: { topics: string[] }[] };
        };
        return body.health.findings.some((f) => f.topics.includes('outbox.event.Shipment'));
      },
      { timeoutMs: 60_000, message: 'the verdict names outbox.event.Shipment' },
    );
    const status = spawnSync(process.execPath, [join(ROOT, 'src/cli/main.ts'), 'status', '--json'], {
      env: {
        ...process.env,
        DATABASE_URL: /^export DATABASE_URL=(\S+)$/m.exec(readFileSync(join(DIR, 'env'), 'utf8'))![1]!,
      },
      encoding: 'utf8',
    });
    const report = JSON.parse(status.stdout) as { findings: { topics: string[]; fix: string }[] };
    const shipment = report.findings.find((f) => f.topics.includes('outbox.event.Shipment'))!;
    expect(shipment.fix).toMatch(
      /create the topic: kafka-topics\.sh .*--create --topic outbox\.event\.Shipment/,
    );
  });

  it('Ctrl-C stops everything: no playground, Kafka JVM or postgres process is left, nor its files', async () => {
    const token = /operator token: ([\w-]+)/.exec(out)![1]!;
    process.kill(-playground!.pid!, 'SIGINT');
    await Promise.race([
      exited,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`not stopped in 90 s:\n${out}`)), 90_000)),
    ]);
    expect(out).toMatch(/playground: stopped \(PostgreSQL, Kafka and the relay\)\n$/);
    for (const [what, pid] of Object.entries(pids)) await expectGone(pid, what);
    expect(existsSync(join(DIR, 'env'))).toBe(false);
    expect(existsSync(join(DIR, 'pid'))).toBe(false);
    expect(existsSync(join(DIR, 'kafka'))).toBe(false);
    // The token is for the user's eyes only: never in the relay's log.
    expect(readFileSync(join(DIR, 'relay.log'), 'utf8')).not.toContain(token);
  }, 120_000);
});

describe('the playground under a process manager', () => {
  it('SIGTERM stops everything too, exit 0, no process left', async () => {
    const dir = join(ROOT, '.tmp', `playground-sigterm-${process.pid}`);
    const child = spawn(
      process.execPath,
      [join(ROOT, 'scripts', 'playground.ts'), '--dir', dir, '--every-ms', '200'],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    const code = new Promise<number | string>((resolve) => child.on('exit', (c, s) => resolve(c ?? s ?? -1)));
    try {
      await waitFor(() => text.includes('playground: writing a sample event'), {
        timeoutMs: 180_000,
        message: () => `the playground is ready; its output:\n${text}`,
      });
      const kafka = Number(readFileSync(join(dir, 'kafka', 'node-1', 'pid'), 'utf8'));
      const postgres = Number(
        readFileSync(join(/\(data in ([^)]+)\)/.exec(text)![1]!, 'postmaster.pid'), 'utf8').split('\n')[0],
      );
      child.kill('SIGTERM');
      expect(await code).toBe(0);
      expect(text).toMatch(/playground: stopped \(PostgreSQL, Kafka and the relay\)\n$/);
      await expectGone(kafka, 'the Kafka JVM');
      await expectGone(postgres, 'postgres');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await LocalKafkaCluster.down(join(dir, 'kafka'));
    }
  }, 240_000);
});
