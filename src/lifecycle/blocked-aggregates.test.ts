import { describe, expect, it } from 'vitest';
import { BlockedAggregates, hasAggregate } from './blocked-aggregates.ts';

describe('BlockedAggregates', () => {
  it('blocks on a failure decision and lists the blocked aggregates', () => {
    const b = new BlockedAggregates();
    b.blockDecided('Order', '1');
    expect(b.has('Order', '1')).toBe(true);
    expect(b.has('Order', '2')).toBe(false);
    expect(b.keys()).toEqual([['Order', '1']]);
  });

  it('a mark taken while a decision is unwritten never unblocks', () => {
    const b = new BlockedAggregates();
    b.blockDecided('Order', '1');
    const m = b.mark('Order', '1');
    expect(m).toBeNull();
    b.written('Order', '1'); // the failure row appears after the sweeper's read
    expect(b.unblockSince('Order', '1', m)).toBe(false);
    expect(b.has('Order', '1')).toBe(true);
  });

  it('a decision taken after the mark keeps the aggregate blocked, even once written', () => {
    const b = new BlockedAggregates();
    b.blockDecided('Order', '1');
    b.written('Order', '1');
    const m = b.mark('Order', '1');
    expect(m).not.toBeNull();
    b.parkDecided('Order', '1'); // parked after the sweeper read "nothing holds it"
    b.written('Order', '1');
    expect(b.unblockSince('Order', '1', m)).toBe(false);
    expect(b.has('Order', '1')).toBe(true);
    // A fresh read after the park was written may unblock (then it finds the parked row and does not).
    expect(b.unblockSince('Order', '1', b.mark('Order', '1'))).toBe(true);
    expect(b.has('Order', '1')).toBe(false);
  });

  it('counts several unwritten decisions of one aggregate', () => {
    const b = new BlockedAggregates();
    b.blockDecided('Order', '1');
    b.parkDecided('Order', '1');
    b.written('Order', '1');
    expect(b.mark('Order', '1')).toBeNull();
    b.written('Order', '1');
    expect(b.mark('Order', '1')).not.toBeNull();
  });

  it('a session starts from exactly the aggregates read back (replace)', () => {
    const b = new BlockedAggregates();
    b.blockDecided('Order', '1');
    b.replace([
      ['Missing', 'x-1'],
      ['Missing', ''],
    ]);
    expect(b.has('Order', '1')).toBe(false);
    expect(b.keys()).toEqual([
      ['Missing', 'x-1'],
      ['Missing', ''],
    ]);
  });

  it('keeps aggregate ids that contain separators apart', () => {
    const b = new BlockedAggregates();
    b.blockDecided('a', 'b:c');
    expect(b.has('a:b', 'c')).toBe(false);
    expect(b.keys()).toEqual([['a', 'b:c']]);
  });
});

describe('hasAggregate', () => {
  it('only events whose aggregate columns are text belong to an aggregate (a NULL id is not the aggregate "null")', () => {
    expect(hasAggregate({ aggregateType: 'Order', aggregateId: 'o-1' })).toBe(true);
    expect(hasAggregate({ aggregateType: 'Order', aggregateId: null })).toBe(false);
    expect(hasAggregate({ aggregateType: null, aggregateId: 'o-1' })).toBe(false);
    expect(hasAggregate({ aggregateType: 'Order', aggregateId: 42 })).toBe(false);
  });
});
