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
});
