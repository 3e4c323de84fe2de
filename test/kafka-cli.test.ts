import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/dev/local-kafka.ts';
import { ROOT } from './support/relay.ts';

/**
 * `npm run kafka -- up|down|status`: a real Apache Kafka that an independent client (kcat, i.e.
 * librdkafka — nothing this project wrote) can list, produce to and consume from.
 */
const dir = join(ROOT, '.tmp', `kafka-cli-test-${process.pid}`);
const kafka = (...args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'scripts', 'kafka.ts'), ...args, '--dir', dir], {
    encoding: 'utf8',
    timeout: 180_000,
  });
const kcat = (args: string[], input?: string) =>
  spawnSync('kcat', args, { encoding: 'utf8', input, timeout: 60_000 });

afterAll(() => {
  kafka('down');
});

describe('npm run kafka', () => {
  it('up starts a broker that kcat can list, produce to and consume from; up again is a no-op; down stops exactly it', async () => {
    const port = await freePort();
    const up = kafka('up', '--port', String(port));
    expect(up.status, up.stderr).toBe(0);
    expect(up.stdout.trim()).toBe(`bootstrap=127.0.0.1:${port}`);
    const pid = Number(readFileSync(join(dir, 'node-1', 'pid'), 'utf8'));
    expect(() => process.kill(pid, 0)).not.toThrow();

    const again = kafka('up', '--port', String(port));
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(`bootstrap=127.0.0.1:${port}`);
    expect(Number(readFileSync(join(dir, 'node-1', 'pid'), 'utf8')), 'the same process').toBe(pid);

    const broker = `127.0.0.1:${port}`;
    const list = kcat(['-b', broker, '-L', '-J']);
    expect(list.status, list.stderr).toBe(0);
    const meta = JSON.parse(list.stdout) as { brokers: { id: number; name: string }[] };
    expect(meta.brokers.map((b) => b.name)).toEqual([broker]);

    // Auto-creation is off (kcat cannot create topics): create it with an admin client.
    const { Kafka, logLevel } = await import('kafkajs');
    const admin = new Kafka({ clientId: 'cli-test', brokers: [broker], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic: 'cli-test', numPartitions: 1 }], waitForLeaders: true });
    await admin.disconnect();

    const produce = kcat(
      ['-b', broker, '-P', '-t', 'cli-test', '-K', ':', '-X', 'acks=all'],
      'k1:hello\nk2:world\n',
    );
    expect(produce.status, produce.stderr).toBe(0);
    const consume = kcat(['-b', broker, '-C', '-t', 'cli-test', '-o', 'beginning', '-e', '-f', '%k=%s\n']);
    expect(consume.status, consume.stderr).toBe(0);
    expect(consume.stdout.trim().split('\n')).toEqual(['k1=hello', 'k2=world']);

    const status = kafka('status');
    expect(status.stdout).toContain(`node 1: pid ${pid}`);

    const down = kafka('down');
    expect(down.status, down.stderr).toBe(0);
    expect(() => process.kill(pid, 0), 'the broker process is gone').toThrow();
    expect(existsSync(join(dir, 'node-1', 'pid'))).toBe(false);
    const downAgain = kafka('down');
    expect(downAgain.status).toBe(0);
    expect(downAgain.stderr).toMatch(/nothing running/);
    expect(kafka('status').stdout.trim()).toBe('stopped');
  });

  it('bad usage exits 64 with the usage text', () => {
    const r = kafka('up', '--brokers', 'many');
    expect(r.status).toBe(64);
    expect(r.stderr).toMatch(/--brokers must be 1\.\.9/);
    const unknown = kafka('sideways');
    expect(unknown.status).toBe(64);
    expect(unknown.stderr).toMatch(/unknown command "sideways"/);
  });
});
