import { describe, expect, it } from 'vitest';
import { OpsInputError } from './input-error.ts';
import { parseTime } from './time-filter.ts';

const now = new Date('2026-11-22T12:00:00.000Z');

describe('parseTime', () => {
  it('takes durations back from now', () => {
    expect(parseTime('90s', now).toISOString()).toBe('2026-11-22T11:58:30.000Z');
    expect(parseTime('30m', now).toISOString()).toBe('2026-11-22T11:30:00.000Z');
    expect(parseTime('2h', now).toISOString()).toBe('2026-11-22T10:00:00.000Z');
    expect(parseTime('7d', now).toISOString()).toBe('2026-11-15T12:00:00.000Z');
    expect(parseTime('1w', now).toISOString()).toBe('2026-11-15T12:00:00.000Z');
  });

  it('takes ISO-8601 dates and date-times; no offset means UTC', () => {
    expect(parseTime('2026-11-20', now).toISOString()).toBe('2026-11-20T00:00:00.000Z');
    expect(parseTime('2026-11-20T14:05', now).toISOString()).toBe('2026-11-20T14:05:00.000Z');
    expect(parseTime('2026-11-20T14:05:07.25Z', now).toISOString()).toBe('2026-11-20T14:05:07.250Z');
    expect(parseTime('2026-11-20 14:05+02:00', now).toISOString()).toBe('2026-11-20T12:05:00.000Z');
    expect(parseTime('2026-11-20T14:05:00-0130', now).toISOString()).toBe('2026-11-20T15:35:00.000Z');
    expect(parseTime('2026-11-20T14:05:00+05', now).toISOString()).toBe('2026-11-20T09:05:00.000Z');
  });

  it.each([
    'yesterday',
    '2h ago',
    '-2h',
    '2026-02-31',
    '2026-13-01',
    '2026-11-20T25:00',
    '20261120',
    '',
    '5y',
  ])('rejects %j with a message that shows the accepted forms', (text) => {
    expect(() => parseTime(text, now)).toThrow(OpsInputError);
    expect(() => parseTime(text, now)).toThrow(/ISO-8601.*2h/);
  });
});
