import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { timestampOf } from './envelope-value.ts';
import { keepTimestampMicroseconds, parseIsoTimestamptz } from './timestamptz.ts';
import { SUB_MILLISECOND_MICROS } from './value-format.ts';

const microsOf = (d: unknown) => (d as Record<symbol, unknown>)[SUB_MILLISECOND_MICROS];

describe('parseIsoTimestamptz', () => {
  it('reads PostgreSQL ISO output to the microsecond, every offset form', () => {
    const d = parseIsoTimestamptz('2026-11-23 01:37:03.123456+00')!;
    expect(d).toBeInstanceOf(Date);
    expect(d.toISOString()).toBe('2026-11-23T01:37:03.123Z');
    expect(microsOf(d)).toBe(456);
    expect(parseIsoTimestamptz('2026-11-23 07:07:03.5+05:30')!.toISOString()).toBe(
      '2026-11-23T01:37:03.500Z',
    );
    expect(microsOf(parseIsoTimestamptz('2026-11-23 07:07:03.5+05:30'))).toBe(0);
    expect(parseIsoTimestamptz('2026-11-22 17:37:03-08')!.toISOString()).toBe('2026-11-23T01:37:03.000Z');
    expect(parseIsoTimestamptz('2000-02-29 23:59:59.999999+00')!.getTime()).toBe(
      Date.UTC(2000, 1, 29, 23, 59, 59, 999),
    );
    expect(microsOf(parseIsoTimestamptz('2000-02-29 23:59:59.999999+00'))).toBe(999);
    expect(microsOf(parseIsoTimestamptz('2000-01-01 00:00:00.000001+00'))).toBe(1);
  });

  it('is a plain Date to equality checks, JSON and the envelope', () => {
    const d = parseIsoTimestamptz('2026-11-23 01:37:03.123456+00')!;
    expect(d).toEqual(new Date('2026-11-23T01:37:03.123Z'));
    expect(Object.getOwnPropertySymbols(d)).toEqual([]);
    expect(JSON.stringify({ d })).toBe('{"d":"2026-11-23T01:37:03.123Z"}');
    expect(timestampOf(d).nanos).toBe(123_456_000);
  });

  it('agrees with pg’s own parser on random timestamps (milliseconds), offsets and fractions', () => {
    const pgParse = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (t: string) => Date;
    let seed = 3;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const p2 = (v: number) => String(v).padStart(2, '0');
    for (let n = 0; n < 5000; n++) {
      const frac = [
        '',
        `.${rnd(10)}`,
        `.${String(rnd(1_000_000)).padStart(6, '0').replace(/0+$/, '') || '1'}`,
      ][rnd(3)]!;
      const off = ['+00', `-${p2(rnd(13))}`, `+${p2(rnd(15))}:${p2(rnd(4) * 15)}`][rnd(3)];
      const text = `${1900 + rnd(200)}-${p2(1 + rnd(12))}-${p2(1 + rnd(28))} ${p2(rnd(24))}:${p2(rnd(60))}:${p2(rnd(60))}${frac}${off}`;
      const ours = parseIsoTimestamptz(text)!;
      // pg's parser multiplies the fraction as a float (e.g. .29 → 289.99…): compare to the millisecond it meant.
      const theirs = pgParse(text).getTime();
      expect(Math.abs(ours.getTime() - theirs), text).toBeLessThanOrEqual(1);
      const digits = frac.slice(1).padEnd(6, '0');
      expect(ours.getUTCMilliseconds(), text).toBe(Number(digits.slice(0, 3)));
      expect(microsOf(ours), text).toBe(Number(digits.slice(3)));
    }
  });

  it('declines every other shape (the installed parser falls back to pg’s)', () => {
    for (const t of [
      'infinity',
      '-infinity',
      '0099-01-01 00:00:00+00',
      '2026-11-23 01:37:03+00 BC',
      '12026-11-23 01:37:03+00',
      '1890-01-01 00:00:00+00:53:28',
      '2026-11-23T01:37:03Z',
      '2026-11-23 01:37:03.+00',
      '2026-1x-23 01:37:03+00',
      '',
    ])
      expect(parseIsoTimestamptz(t), t).toBeNull();
  });

  it('installed: the fast shape and the fallbacks, microseconds kept in both', () => {
    keepTimestampMicroseconds();
    const parse = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (t: string) => unknown;
    expect(microsOf(parse('2026-11-23 01:37:03.123456+00'))).toBe(456);
    const lmt = parse('1890-01-01 00:00:00.000250+00:53:28') as Date;
    expect(lmt).toBeInstanceOf(Date);
    expect(microsOf(lmt)).toBe(250);
    expect(parse('infinity')).toBe(Number.POSITIVE_INFINITY);
  });
});
