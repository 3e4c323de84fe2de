import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { TxnEntry } from '../replication/ack-tracker.ts';
import type { OutboundMessage } from '../route/event.ts';
import { MessageQueue } from './message-queue.ts';

const txn: TxnEntry = { endLsn: 0n, pending: 0, committed: false };
const msg = (bytes: number) => ({ message: { bytes } as OutboundMessage, txn });

describe('MessageQueue', () => {
  it('takes in order, by count and by bytes, always at least one', () => {
    const q = new MessageQueue();
    for (const b of [10, 20, 30, 500, 5]) q.push(msg(b));
    expect(q.take(2, 1000).map((p) => p.message.bytes)).toEqual([10, 20]);
    expect(q.take(10, 100).map((p) => p.message.bytes)).toEqual([30]);
    expect(q.take(10, 100).map((p) => p.message.bytes)).toEqual([500]);
    expect(q.take(10, 100).map((p) => p.message.bytes)).toEqual([5]);
    expect(q.length).toBe(0);
  });

  describe('takeTransactions (exactly-once: batches end at PostgreSQL commits)', () => {
    /** A queue holding transactions of the given sizes (events of 1 byte); the last one open unless `committed`. */
    function queueOf(sizes: number[], lastCommitted = true) {
      const q = new MessageQueue();
      const txns = sizes.map((_, i) => ({
        endLsn: BigInt(i + 1),
        pending: 0,
        committed: lastCommitted || i < sizes.length - 1,
      }));
      sizes.forEach((n, t) => {
        for (let i = 0; i < n; i++) q.push({ message: { bytes: 1 } as OutboundMessage, txn: txns[t]! });
      });
      return { q, txns };
    }
    /** The sizes of the transactions' parts in a batch, in order. */
    const parts = (batch: { txn: TxnEntry }[]) => {
      const out: number[] = [];
      for (let i = 0; i < batch.length; i++)
        if (i > 0 && batch[i]!.txn === batch[i - 1]!.txn) out[out.length - 1]!++;
        else out.push(1);
      return out;
    };

    it('holds as many whole transactions as fit, and ends at a commit', () => {
      const { q } = queueOf([7, 7, 3, 2, 7]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([7]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([7, 3]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([2, 7]);
      expect(q.length).toBe(0);
    });

    it('cuts by bytes at a commit too', () => {
      const q = new MessageQueue();
      const a = { endLsn: 1n, pending: 0, committed: true };
      const b = { endLsn: 2n, pending: 0, committed: true };
      for (const [txn, bytes] of [
        [a, 300],
        [a, 300],
        [b, 300],
        [b, 300],
      ] as const)
        q.push({ message: { bytes } as OutboundMessage, txn });
      expect(q.takeTransactions(100, 1000, false).map((p) => p.txn)).toEqual([a, a]);
      expect(q.takeTransactions(100, 1000, false).map((p) => p.txn)).toEqual([b, b]);
    });

    it('splits only a transaction larger than the bounds, and goes on with whole ones after it', () => {
      const { q } = queueOf([25, 4, 7]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([10]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([10]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([5, 4]);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([7]);
    });

    it('splits a transaction whose first event alone passes the byte bound', () => {
      const q = new MessageQueue();
      const t = { endLsn: 1n, pending: 0, committed: false };
      q.push({ message: { bytes: 5000 } as OutboundMessage, txn: t });
      q.push({ message: { bytes: 10 } as OutboundMessage, txn: t });
      expect(q.takeTransactions(10, 1000, false).map((p) => p.message.bytes)).toEqual([5000]);
    });

    it('waits for a transaction still arriving ([]) unless told to split; a full batch of it goes at once', () => {
      const { q, txns } = queueOf([4], false);
      expect(q.takeTransactions(10, 1000, false)).toEqual([]);
      expect(q.length).toBe(4);
      txns[0]!.committed = true;
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([4]);

      const open = queueOf([4], false);
      expect(parts(open.q.takeTransactions(10, 1000, true))).toEqual([4]);
      const full = queueOf([10], false);
      expect(parts(full.q.takeTransactions(10, 1000, false))).toEqual([10]);
    });

    it('leaves a transaction still arriving behind the whole ones before it', () => {
      const { q, txns } = queueOf([3, 2, 4], false);
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([3, 2]);
      expect(q.takeTransactions(10, 1000, false)).toEqual([]);
      for (let i = 0; i < 6; i++) q.push({ message: { bytes: 1 } as OutboundMessage, txn: txns[2]! });
      expect(parts(q.takeTransactions(10, 1000, false))).toEqual([10]);
    });

    it('take (at-least-once) ignores commits', () => {
      const { q } = queueOf([7, 7], false);
      expect(parts(q.take(10, 1000))).toEqual([7, 3]);
    });
  });

  it('waitForMore resolves on the next push or nudge; a plain wait ignores nudges', async () => {
    const q = new MessageQueue();
    const ac = new AbortController();
    q.push(msg(1));
    let plain = false;
    const p = q.wait(3, 5000, ac.signal).then(() => (plain = true));
    q.nudge();
    await new Promise((r) => setTimeout(r, 10));
    expect(plain).toBe(false);
    q.push(msg(1));
    q.push(msg(1));
    await p;
    const more = q.waitForMore(5000, ac.signal);
    q.nudge();
    await more;
    const pushed = q.waitForMore(5000, ac.signal);
    q.push(msg(1));
    await pushed;
  });

  it('wait resolves when enough messages arrive, not on the first one', async () => {
    const q = new MessageQueue();
    const ac = new AbortController();
    let done = false;
    const p = q.wait(3, 5000, ac.signal).then(() => (done = true));
    q.push(msg(1));
    q.push(msg(1));
    await new Promise((r) => setTimeout(r, 10));
    expect(done).toBe(false);
    q.push(msg(1));
    await p;
    expect(done).toBe(true);
  });

  it('wait resolves on timeout and on abort', async () => {
    const q = new MessageQueue();
    const t0 = Date.now();
    await q.wait(5, 30, new AbortController().signal);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
    const ac = new AbortController();
    const p = q.wait(5, 10_000, ac.signal);
    ac.abort();
    await p;
  });

  it('listens to a signal once however many waits use it; its abort wakes the waiter of that signal only', async () => {
    const q = new MessageQueue();
    const ac = new AbortController();
    for (let i = 0; i < 3; i++) {
      const p = q.wait(1, Number.POSITIVE_INFINITY, ac.signal);
      q.push(msg(1));
      await p;
      q.take(10, 1000);
    }
    expect(getEventListeners(ac.signal, 'abort')).toHaveLength(1);
    const other = new AbortController();
    let woken = false;
    const p = q.wait(1, Number.POSITIVE_INFINITY, other.signal).then(() => (woken = true));
    ac.abort();
    await new Promise((r) => setImmediate(r));
    expect(woken).toBe(false);
    other.abort();
    await p;
  });
});
