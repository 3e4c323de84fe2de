import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

describe('standalone entry point', () => {
  it('prints its address, serves kafkajs and exits cleanly on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [MAIN, '--port', '0', '--topic', 'cli.t:3', '--auto-create-topics'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let out = '';
      child.stdout.setEncoding('utf8');
      const address = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: string) => {
          out += chunk;
          const m = /^listening (127\.0\.0\.1:\d+)$/m.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`exited with ${code} before listening: ${out}`)));
      });
      const admin = new Kafka({
        clientId: 'cli-test',
        brokers: [address],
        logLevel: logLevel.NOTHING,
      }).admin();
      await admin.connect();
      const meta = await admin.fetchTopicMetadata({ topics: ['cli.t'] });
      await admin.disconnect();
      expect(meta.topics[0]!.partitions.map((p) => p.partitionId)).toEqual([0, 1, 2]);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
