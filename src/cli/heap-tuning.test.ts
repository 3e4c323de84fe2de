import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const TUNING = fileURLToPath(new URL('./heap-tuning.ts', import.meta.url));

/**
 * A node process that imports heap-tuning.ts, then allocates like a relay draining a backlog
 * (20,000 objects alive at a time, each with a 600-byte Buffer, 1.5 million in all): the size
 * of its young generation (V8's new space) afterwards, in MiB.
 */
function newSpaceMib(nodeArgs: string[]): number {
  const script = `
    await import(${JSON.stringify(TUNING)});
    const v8 = await import('node:v8');
    const ring = new Array(20000);
    for (let i = 0; i < 1_500_000; i++) ring[i % 20000] = { i, s: 'x' + i, b: Buffer.allocUnsafe(600) };
    const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
    console.log(s.space_size / 1048576);
  `;
  const out = execFileSync(process.execPath, [...nodeArgs, '--input-type=module', '-e', script], {
    env: { ...process.env, NODE_OPTIONS: '' },
    encoding: 'utf8',
  });
  return Number(out.trim());
}

describe('heap-tuning', () => {
  it('keeps the young generation at the size it had when the module ran', () => {
    expect(newSpaceMib([])).toBeLessThanOrEqual(16);
  });

  it('leaves a young-generation size given to node alone', () => {
    expect(newSpaceMib(['--max-semi-space-size=32'])).toBeGreaterThan(16);
  });
});
