import { describe, expect, it } from 'vitest';
import { type LaneDone, sendInLanes } from './key-lanes.ts';

interface Item {
  key: string;
  n: number;
}

/** A fake broker: acknowledges after a random delay (seeded), records start order and concurrency. */
function broker(seed: number, fail?: (i: Item) => boolean) {
  let s = seed;
  const rand = () => ((s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 5;
  const started: Item[] = [];
  const acked: Item[] = [];
  const inFlightKeys = new Set<string>();
  let inFlight = 0;
  let maxInFlight = 0;
  let overlapPerKey = 0;
  const send = (i: Item, done: LaneDone) => {
    started.push(i);
    if (inFlightKeys.has(i.key)) overlapPerKey++;
    inFlightKeys.add(i.key);
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    setTimeout(() => {
      inFlight--;
      inFlightKeys.delete(i.key);
      if (fail?.(i)) done(new Error(`refused ${i.key}#${i.n}`));
      else {
        acked.push(i);
        done();
      }
    }, rand());
  };
  return { send, started, acked, stats: () => ({ maxInFlight, overlapPerKey }) };
}

const items = (keys: number, per: number): Item[] => {
  const out: Item[] = [];
  for (let n = 0; n < per; n++) for (let k = 0; k < keys; k++) out.push({ key: `k${k}`, n });
  return out;
};

describe('sendInLanes', () => {
  it('sends every item, one in flight per key, in each key order, within the limit', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const b = broker(seed);
      const failures = await sendInLanes(items(7, 20), (i) => i.key, 4, b.send);
      expect(failures).toEqual([]);
      expect(b.acked).toHaveLength(140);
      expect(b.stats().overlapPerKey).toBe(0);
      expect(b.stats().maxInFlight).toBeLessThanOrEqual(4);
      expect(b.stats().maxInFlight).toBeGreaterThan(1);
      for (let k = 0; k < 7; k++) {
        const ns = b.acked.filter((i) => i.key === `k${k}`).map((i) => i.n);
        expect(ns).toEqual([...ns].sort((x, y) => x - y));
      }
    }
  });

  it('after a failure starts nothing more, awaits those in flight, and never sends a later item of the failed key', async () => {
    const b = broker(9, (i) => i.key === 'k2' && i.n === 3);
    const failures = await sendInLanes(items(5, 10), (i) => i.key, 3, b.send);
    expect(failures.map((f) => f.item)).toEqual([{ key: 'k2', n: 3 }]);
    expect(b.started.some((i) => i.key === 'k2' && i.n > 3)).toBe(false);
    // Everything started was settled before sendInLanes returned.
    expect(b.stats().maxInFlight).toBeLessThanOrEqual(3);
    expect(b.started.length).toBe(b.acked.length + 1);
  });

  it('turns a synchronous throw into that item’s failure', async () => {
    const failures = await sendInLanes([1, 2], String, 2, (n, done) => {
      if (n === 2) throw new Error('bad header');
      setTimeout(() => done(), 1);
    });
    expect(failures.map((f) => [f.index, (f.error as Error).message])).toEqual([[1, 'bad header']]);
  });

  it('takes a done called at once (within send), and counts a second call of it once', async () => {
    const sent: number[] = [];
    const failures = await sendInLanes(
      [1, 2, 3, 4, 5],
      (n) => String(n % 2),
      2,
      (n, done) => {
        sent.push(n);
        done();
        done(new Error('late'));
      },
    );
    expect(failures).toEqual([]);
    expect(sent.sort()).toEqual([1, 2, 3, 4, 5]);
    const failed = await sendInLanes(
      [1, 2, 3],
      () => 'k',
      3,
      (n, done) => done(n === 2 ? new Error('no') : undefined),
    );
    expect(failed.map((f) => f.index)).toEqual([1]);
  });

  it('resolves at once for an empty batch', async () => {
    expect(await sendInLanes([], String, 1, (_, done) => done())).toEqual([]);
  });
});
