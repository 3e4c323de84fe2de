import { describe, expect, it } from 'vitest';
import { STATUSES } from '../lifecycle/statuses.ts';
import { parseFilter } from './event-filter.ts';
import { parseIds } from './input-error.ts';

const now = new Date('2026-11-22T12:00:00.000Z');
const any = { allowed: STATUSES, fallback: ['failed', 'dead', 'parked'] as const, now };

describe('parseFilter', () => {
  it('defaults the statuses and parses times', () => {
    const f = parseFilter({ since: '2h', until: '2026-11-22T11:30Z', aggregateType: 'Order' }, any);
    expect(f).toEqual({
      statuses: ['failed', 'dead', 'parked'],
      since: new Date('2026-11-22T10:00:00Z'),
      until: new Date('2026-11-22T11:30:00Z'),
      aggregateType: 'Order',
    });
  });

  it('rejects unknown and not-allowed statuses, naming the valid ones', () => {
    expect(() => parseFilter({ status: ['failed', 'broken'] }, any)).toThrow(
      /unknown status "broken" \(known: pending, published, failed, dead, parked, discarded\)/,
    );
    expect(() =>
      parseFilter({ status: ['published'] }, { allowed: ['failed', 'dead'], fallback: ['failed', 'dead'] }),
    ).toThrow(/"published" is not allowed here \(allowed: failed, dead\)/);
  });

  it('rejects an empty or inverted window and a malformed event id', () => {
    expect(() => parseFilter({ since: '1h', until: '2h' }, any)).toThrow(/--since .* must be before --until/);
    expect(() => parseFilter({ eventId: 'not-a-uuid' }, any)).toThrow(/not a UUID/);
  });
});

describe('parseIds', () => {
  it('takes ids as separate arguments or comma-separated, deduplicated, as text', () => {
    expect(parseIds(['3', '10,11', '3', '9223372036854775807'])).toEqual([
      '3',
      '10',
      '11',
      '9223372036854775807',
    ]);
  });
  it.each(['abc', '-1', '1.5', '9223372036854775808'])('rejects %j', (id) => {
    expect(() => parseIds([id])).toThrow(/is not an event id/);
  });
});
