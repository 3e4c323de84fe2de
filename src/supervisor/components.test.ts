import { describe, expect, it } from 'vitest';
import { silentLogger } from '../observability/logger.ts';
import { type Component, Components } from './components.ts';

function recording(names: string[], calls: string[], fail?: string): Component[] {
  return names.map((name) => ({
    name,
    start: async () => {
      calls.push(`start ${name}`);
      if (name === fail) throw new Error(`${name} failed`);
    },
    stop: async () => {
      calls.push(`stop ${name}`);
      if (name === 'b') throw new Error('b stop failed');
    },
  }));
}

describe('the relay components', () => {
  it('start in order every round and stop once, in reverse, even when one stop fails', async () => {
    const calls: string[] = [];
    const c = new Components(recording(['a', 'b', 'c'], calls), silentLogger());
    await c.start(() => false);
    await c.start(() => false);
    await c.stop();
    expect(calls).toEqual([
      'start a',
      'start b',
      'start c',
      'start a',
      'start b',
      'start c',
      'stop c',
      'stop b',
      'stop a',
    ]);
  });

  it('a round ends at a failed start or when interrupted; every component stops once at the end', async () => {
    const calls: string[] = [];
    const c = new Components(recording(['a', 'b', 'c'], calls, 'b'), silentLogger());
    await expect(c.start(() => false)).rejects.toThrow('b failed');
    await c.stop();
    await c.stop();
    expect(calls).toEqual(['start a', 'start b', 'stop c', 'stop b', 'stop a']);

    const calls2: string[] = [];
    const d = new Components(recording(['a', 'b', 'c'], calls2), silentLogger());
    await d.start(() => calls2.length >= 1);
    expect(calls2).toEqual(['start a']);
  });
});
