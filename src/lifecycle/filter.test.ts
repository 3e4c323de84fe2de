import { describe, expect, it } from 'vitest';
import { describeFilter, parseFilter } from '../ops/event-filter.ts';
import { filterSql } from './filter.ts';
import { STATUSES } from './statuses.ts';

const now = new Date('2026-11-22T12:00:00.000Z');
const any = { allowed: STATUSES, fallback: ['failed', 'dead', 'parked'] as const, now };

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
