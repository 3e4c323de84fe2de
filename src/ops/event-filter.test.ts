import { describe, expect, it } from 'vitest';
import { describeFilter, filterSql, parseFilter, STATUSES } from './event-filter.ts';
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

describe('filterSql', () => {
  it('parameterises every value, numbering from the given parameter', () => {
    const f = parseFilter(
      {
        status: ['dead'],
        since: '2026-11-20',
        until: '2026-11-21',
        aggregateType: "O'Brien",
        aggregateId: '42',
        eventId: '0193A1B2-0000-7000-8000-000000000001',
        afterId: 17,
      },
      { ...any },
    );
    const w = filterSql(f, 3);
    expect(w.sql).toBe(
      'status = ANY($3::text[]) AND created_at >= $4::timestamptz AND created_at < $5::timestamptz AND aggregate_type = $6 AND aggregate_id = $7 AND event_id = $8::uuid AND id > $9::bigint',
    );
    expect(w.params).toEqual([
      ['dead'],
      '2026-11-20T00:00:00.000Z',
      '2026-11-21T00:00:00.000Z',
      "O'Brien",
      '42',
      '0193a1b2-0000-7000-8000-000000000001',
      '17',
    ]);
    expect(describeFilter(f)).toMatchObject({ status: 'dead', aggregateType: "O'Brien", afterId: '17' });
  });

  it('event type and text in last_error (case-insensitive, no LIKE wildcards to escape)', () => {
    const f = parseFilter({ eventType: 'OrderPlaced', errorContains: '50%_off' }, any);
    expect(filterSql(f)).toEqual({
      sql: 'status = ANY($1::text[]) AND event_type = $2 AND strpos(lower(last_error), lower($3)) > 0',
      params: [['failed', 'dead', 'parked'], 'OrderPlaced', '50%_off'],
    });
    expect(describeFilter(f)).toMatchObject({ eventType: 'OrderPlaced', errorContains: '50%_off' });
    expect(() => parseFilter({ errorContains: '' }, any)).toThrow(/--error-contains needs some text/);
  });

  it('only the status when nothing else is given', () => {
    expect(filterSql(parseFilter({}, any))).toEqual({
      sql: 'status = ANY($1::text[])',
      params: [['failed', 'dead', 'parked']],
    });
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
