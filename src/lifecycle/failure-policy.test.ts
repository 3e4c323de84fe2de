import { describe, expect, it } from 'vitest';
import { failureBackoff, formatError } from './failure-policy.ts';

const c = { failureBackoffMs: 1000, failureBackoffFactor: 2, failureBackoffMaxMs: 60_000 };

describe('failure policy', () => {
  it('backs off exponentially with full jitter, capped, never 0', () => {
    const top = (n: number) => failureBackoff(c, n, () => 0.999999);
    expect([1, 2, 3, 4].map(top)).toEqual([999, 1999, 3999, 7999]);
    expect(top(20)).toBe(59999);
    expect(failureBackoff(c, 3, () => 0)).toBe(1);
  });

  it('formats last_error as class/reason: message', () => {
    expect(formatError({ class: 'permanent', reason: 'MESSAGE_TOO_LARGE', message: 'too big' })).toBe(
      'permanent/MESSAGE_TOO_LARGE: too big',
    );
  });
});
