import { describe, expect, it } from 'vitest';
import { within } from './within.ts';

describe('within', () => {
  it('resolves and rejects as the call does when it settles in time', async () => {
    await expect(within(Promise.resolve(7), 1000, () => new Error('late'))).resolves.toBe(7);
    await expect(within(Promise.reject(new Error('no')), 1000, () => new Error('late'))).rejects.toThrow(
      'no',
    );
  });

  it('rejects with the timeout error past ms, runs onTimeout first, and hands a late value to late', async () => {
    const order: string[] = [];
    let settle!: (v: number) => void;
    const call = new Promise<number>((r) => {
      settle = r;
    });
    const late: number[] = [];
    const bounded = within(
      call,
      20,
      () => {
        order.push('rejected');
        return new Error('timed out');
      },
      {
        onTimeout: () => order.push('onTimeout'),
        late: (v) => late.push(v),
      },
    );
    await expect(bounded).rejects.toThrow('timed out');
    expect(order).toEqual(['onTimeout', 'rejected']);
    settle(5);
    await call;
    expect(late).toEqual([5]);
  });
});
