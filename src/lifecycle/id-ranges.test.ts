import { describe, expect, it } from 'vitest';
import { coveredBy, idRanges, parseIdRanges } from './id-ranges.ts';

describe('idRanges', () => {
  it('merges a contiguous batch into one range, whatever its size', () => {
    const ids = Array.from({ length: 5000 }, (_, i) => String(1000 + i));
    expect(idRanges(ids)).toBe('{[1000,6000)}');
  });

  it('keeps gaps (ids of transactions not in the batch, rolled back or still open)', () => {
    expect(idRanges(['7', '1', '2', '3', '9', '10'])).toBe('{[1,4),[7,8),[9,11)}');
  });

  it('ignores duplicates and order; empty is the empty multirange', () => {
    expect(idRanges(['5', '5', '4'])).toBe('{[4,6)}');
    expect(idRanges([])).toBe('{}');
  });

  it('handles ids beyond 2^53 exactly', () => {
    expect(idRanges(['9007199254740993', '9007199254740992'])).toBe('{[9007199254740992,9007199254740994)}');
  });

  it('round-trips through parseIdRanges and coveredBy (seeded random)', () => {
    let seed = 42;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let round = 0; round < 50; round++) {
      const set = new Set<number>();
      for (let i = 0; i < 40; i++) set.add(Math.floor(rnd() * 60));
      const ranges = parseIdRanges(idRanges([...set].map(String)));
      for (let id = -2; id < 62; id++) expect(coveredBy(ranges, BigInt(id))).toBe(set.has(id));
      // Maximal runs: no two ranges touch.
      for (let i = 1; i < ranges.length; i++) expect(ranges[i]![0] > ranges[i - 1]![1]).toBe(true);
    }
  });

  it('the fast path (ids below 2^53, as doubles) gives the exact BigInt answer (seeded random, negatives, near 2^53)', () => {
    const reference = (ids: string[]) => {
      const xs = [...new Set(ids.map((i) => BigInt(i)))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const parts: string[] = [];
      for (let i = 0; i < xs.length; ) {
        let j = i;
        while (j + 1 < xs.length && xs[j + 1] === xs[j]! + 1n) j++;
        parts.push(`[${xs[i]},${xs[j]! + 1n})`);
        i = j + 1;
      }
      return `{${parts.join(',')}}`;
    };
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const bases = [0, -500, 2 ** 31, 9007199254740991 - 100, 9007199254740991 - 30];
    for (let round = 0; round < 200; round++) {
      const base = bases[round % bases.length]!;
      const ids = Array.from({ length: 1 + Math.floor(rnd() * 50) }, () =>
        String(base + Math.floor(rnd() * 60)),
      ).filter((id) => BigInt(id) < 2n ** 63n);
      expect(idRanges(ids), ids.join(' ')).toBe(reference(ids));
      // The one-pass path of ascending batches (a stream's usual order), duplicates included.
      const ascending = [...ids].sort((a, b) => Number(a) - Number(b));
      expect(idRanges(ascending), ascending.join(' ')).toBe(reference(ascending));
      // Ascending up to its last id, which then goes back (the sorting path from there).
      const back = [...ascending, ascending[0]!];
      expect(idRanges(back), back.join(' ')).toBe(reference(back));
    }
  });
});
