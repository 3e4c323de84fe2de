import { describe, expect, it } from 'vitest';
import { orderViolations, tally } from './tally.ts';

const ks = (list: string) =>
  list.split(' ').map((s) => {
    const [key, seq] = s.split('#');
    return { key: key!, seq: Number(seq) };
  });

describe('tally (what the separate consumer read, against what was committed)', () => {
  it('counts nothing wrong for an exact delivery', () => {
    expect(tally(ks('a#0 a#1 b#0'), ks('a#0 b#0 a#1'))).toMatchObject({
      written: 3,
      read: 3,
      lost: 0,
      duplicates: 0,
      orderViolations: 0,
    });
  });

  it('a replay of older events after newer ones is duplicates, not an order violation', () => {
    const t = tally(ks('a#0 a#1 a#2'), ks('a#0 a#1 a#2 a#1 a#2'));
    expect(t).toMatchObject({ lost: 0, duplicates: 2, orderViolations: 0 });
  });

  it('a missing event is lost, and a later one of its key read without it is a violation', () => {
    const t = tally(ks('a#0 a#1 a#2 b#0'), ks('a#0 a#2 b#0'));
    expect(t).toMatchObject({ lost: 1, orderViolations: 1 });
    expect(t.lostSample).toEqual(['a#1']);
  });

  it('an overtaking event is a violation even when the overtaken one arrives later', () => {
    expect(orderViolations(ks('a#1 a#0 a#2'))).toEqual(['key a: seq 1 arrived before seq 0']);
  });

  it('records of keys the writer did not write (hostile rows, other topics) are ignored', () => {
    expect(tally(ks('a#0'), ks('a#0 h#5 h#5'))).toMatchObject({ read: 1, duplicates: 0, orderViolations: 0 });
  });
});
