import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PUBLISHED } from '../outcome/outcome.ts';
import type { TxnEntry } from '../replication/ack-tracker.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Pending } from './message-queue.ts';
import { PROGRESS_LINGER_MS, RecordBehind } from './record-behind.ts';

const txn: TxnEntry = { endLsn: 0n, pending: 0, committed: true };
/** A live stream's batch: one event. */
const one = (id: number): Pending[] => [
  { message: { bytes: 1, event: { id: String(id) } } as unknown as OutboundMessage, txn },
];
const ids = (batch: Pending[]) =>
  batch.map((p) => (p.message as unknown as { event: { id: string } }).event.id);

function recorder(signal = new AbortController().signal) {
  const recorded: string[][] = [];
  const behind = new RecordBehind({
    batchSize: 500,
    signal,
    paused: () => false,
    record: async (batch) => {
      recorded.push(ids(batch));
    },
    fail: (e) => {
      throw e;
    },
  });
  return { behind, recorded };
}

describe('RecordBehind: one progress statement for the small batches of a linger', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('records the single-event batches published within 50 ms together (2,000 commits/s: one statement per 100 events)', async () => {
    expect(PROGRESS_LINGER_MS).toBe(50);
    const { behind, recorded } = recorder();
    behind.push(one(1), [PUBLISHED]);
    await vi.advanceTimersByTimeAsync(20);
    behind.push(one(2), [PUBLISHED]);
    await vi.advanceTimersByTimeAsync(20);
    behind.push(one(3), [PUBLISHED]);
    expect(recorded).toEqual([]); // nothing recorded, so nothing settled or confirmed, yet
    await vi.advanceTimersByTimeAsync(10);
    await behind.done();
    expect(recorded).toEqual([['1', '2', '3']]);
  });

  it('a stop does not wait for the linger: the last batches are recorded at once', async () => {
    const stop = new AbortController();
    const { behind, recorded } = recorder(stop.signal);
    behind.push(one(1), [PUBLISHED]);
    behind.push(one(2), [PUBLISHED]);
    await vi.advanceTimersByTimeAsync(5);
    stop.abort();
    await vi.advanceTimersByTimeAsync(0);
    await behind.done();
    expect(recorded).toEqual([['1', '2']]);
  });
});
