import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from './support/postgres.ts';
import { ROOT } from './support/relay.ts';

/**
 * `npm run playground -- --sink redis|http|sqs` as a user runs it (scripts/playground.ts, a process
 * of its own): the destination starts, sample events arrive there (the playground's own reader
 * prints each one), the failing topic shows in `status` with that sink's remedy (ops/remedies.ts),
 * and SIGTERM stops everything, the destination's server included. Kafka's playground:
 * playground.test.ts.
 */
const CASES = [
  {
    sink: 'redis',
    name: 'Redis',
    arrived: /playground: arrived in stream outbox\.event\.Order \(entry \d+-\d+\): id=\S+ type=\S+ \{/,
    failing: 'outbox.event.Shipment',
    statusArgs: [] as string[],
    fix: /the key outbox\.event\.Shipment .*is not a stream: see redis-cli TYPE outbox\.event\.Shipment/,
  },
  {
    sink: 'http',
    name: 'the webhook receiver',
    arrived:
      /playground: arrived POST \/hooks\/outbox\.event\.Order webhook-id=\S+ \(signature verified\): \{/,
    failing: 'outbox.event.Shipment',
    statusArgs: [] as string[],
    fix: /fix --http-url \(the path the template makes of topic outbox\.event\.Shipment\)/,
  },
  {
    sink: 'sqs',
    name: 'ElasticMQ',
    arrived: /playground: arrived in queue outbox-event-Order\.fifo \(group order-\d+\): \{/,
    failing: 'outbox-event-Shipment.fifo',
    statusArgs: ['--topic-template', 'outbox-event-{aggregate_type}.fifo'],
    fix: /create the SQS queue .* topic outbox-event-Shipment\.fifo/,
  },
] as const;

/** Gone, or a zombie its parent has not reaped yet. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
}

describe.each(CASES)('npm run playground -- --sink $sink', (c) => {
  it('starts its destination, events arrive there, the failing topic has its remedy in status, SIGTERM stops all', async () => {
    const dir = join(ROOT, '.tmp', `playground-${c.sink}-${process.pid}`);
    rmSync(dir, { recursive: true, force: true });
    const child = spawn(
      process.execPath,
      [join(ROOT, 'scripts', 'playground.ts'), '--sink', c.sink, '--dir', dir, '--every-ms', '200'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    const code = new Promise<number | string>((resolve) => child.on('exit', (x, s) => resolve(x ?? s ?? -1)));
    try {
      await waitFor(() => text.includes('playground: writing a sample event'), {
        timeoutMs: 180_000,
        message: () => `the playground is ready; its output:\n${text}`,
      });
      expect(text).toMatch(
        /console: {2}http:\/\/127\.0\.0\.1:\d+\/console\/ {2}\(operator token: [\w-]{20,}\)/,
      );
      await waitFor(() => c.arrived.test(text), {
        timeoutMs: 60_000,
        message: () => `a sample event arrived; the output:\n${text}`,
      });
      const databaseUrl = /^export DATABASE_URL=(\S+)$/m.exec(readFileSync(join(dir, 'env'), 'utf8'))![1]!;
      let fix = '';
      await waitFor(
        () => {
          const status = spawnSync(
            process.execPath,
            [join(ROOT, 'src/cli/main.ts'), 'status', '--json', ...c.statusArgs],
            { env: { ...process.env, DATABASE_URL: databaseUrl }, encoding: 'utf8' },
          );
          const report = JSON.parse(status.stdout) as { findings: { topics: string[]; fix: string }[] };
          fix = report.findings.find((f) => f.topics.includes(c.failing))?.fix ?? '';
          return fix !== '';
        },
        { timeoutMs: 60_000, message: () => `status names ${c.failing}; the output:\n${text}` },
      );
      expect(fix).toMatch(c.fix);
      const serverPid = Number(/\(pid (\d+)/.exec(text)?.[1] ?? 0);
      child.kill('SIGTERM');
      expect(await code).toBe(0);
      expect(text).toContain(`playground: stopped (PostgreSQL, ${c.name} and the relay)\n`);
      if (serverPid)
        await waitFor(() => !alive(serverPid), { timeoutMs: 10_000, message: `${c.name} is gone` });
      expect(existsSync(join(dir, 'env'))).toBe(false);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
