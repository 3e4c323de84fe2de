import { describe, expect, it } from 'vitest';
import { AckTracker } from './ack-tracker.ts';

describe('AckTracker', () => {
  it('confirms nothing until every event of the transaction settles', () => {
    const t = new AckTracker(100n);
    const tx = t.begin();
    t.addEvent();
    t.addEvent();
    t.commit(200n);
    expect(t.confirmable).toBe(100n);
    t.settle(tx);
    expect(t.confirmable).toBe(100n);
    t.settle(tx);
    expect(t.confirmable).toBe(200n);
    expect(t.unsettled).toBe(0);
  });

  it('never confirms past an unsettled earlier transaction (commit order)', () => {
    const t = new AckTracker(0n);
    const a = t.begin();
    t.addEvent();
    t.commit(10n);
    const b = t.begin();
    t.addEvent();
    t.commit(20n);
    t.settle(b);
    expect(t.confirmable).toBe(0n);
    t.settle(a);
    expect(t.confirmable).toBe(20n);
  });

  it('settles transactions without outbox rows at once, in order', () => {
    const t = new AckTracker(0n);
    t.begin();
    t.commit(5n);
    expect(t.confirmable).toBe(5n);
    const a = t.begin();
    t.addEvent();
    t.commit(10n);
    t.begin();
    t.commit(15n);
    expect(t.confirmable).toBe(5n);
    t.settle(a);
    expect(t.confirmable).toBe(15n);
  });

  it('does not settle an open (uncommitted) transaction even when its events settled', () => {
    const t = new AckTracker(0n);
    const a = t.begin();
    t.addEvent();
    t.settle(a);
    expect(t.confirmable).toBe(0n);
    t.commit(30n);
    expect(t.confirmable).toBe(30n);
  });

  describe('idle advancement', () => {
    it('moves to a keepalive position when nothing is queued', () => {
      const t = new AckTracker(0n);
      t.noteServerPosition(500n);
      expect(t.confirmable).toBe(500n);
      t.noteServerPosition(400n);
      expect(t.confirmable).toBe(500n);
    });

    it('ignores keepalives while a transaction is open', () => {
      const t = new AckTracker(0n);
      t.begin();
      t.addEvent();
      t.noteServerPosition(900n);
      expect(t.confirmable).toBe(0n);
      expect(t.queued).toBe(1);
    });

    it('queues a keepalive position behind unsettled transactions and merges idle marks', () => {
      const t = new AckTracker(0n);
      const a = t.begin();
      t.addEvent();
      t.commit(10n);
      t.noteServerPosition(50n);
      t.noteServerPosition(60n);
      t.noteServerPosition(70n);
      expect(t.queued).toBe(2);
      expect(t.confirmable).toBe(0n);
      t.settle(a);
      expect(t.confirmable).toBe(70n);
      expect(t.queued).toBe(0);
    });
  });

  it('keeps the prefix rule over a long random interleaving', () => {
    // Model check: random settle order; confirmable must always equal the end of the
    // longest fully settled prefix computed independently.
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const t = new AckTracker(0n);
    const txns: { end: bigint; left: number; entry: ReturnType<AckTracker['begin']> }[] = [];
    const open: { tx: (typeof txns)[number] }[] = [];
    let lsn = 0n;
    for (let i = 0; i < 2000; i++) {
      const entry = t.begin();
      const n = Math.floor(rnd() * 4);
      const tx = { end: 0n, left: n, entry };
      for (let k = 0; k < n; k++) {
        t.addEvent();
        open.push({ tx });
      }
      lsn += BigInt(1 + Math.floor(rnd() * 100));
      tx.end = lsn;
      t.commit(lsn);
      txns.push(tx);
      while (open.length > 0 && rnd() < 0.6) {
        const [o] = open.splice(Math.floor(rnd() * open.length), 1);
        o!.tx.left--;
        t.settle(o!.tx.entry);
      }
      let expected = 0n;
      for (const x of txns) {
        if (x.left > 0) break;
        expected = x.end;
      }
      expect(t.confirmable).toBe(expected);
    }
  });
});
