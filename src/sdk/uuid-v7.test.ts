import { describe, expect, it } from 'vitest';
import { createUuidV7, uuidV7Time, uuidv7 } from './uuid-v7.ts';

const SHAPE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A clock the test moves by hand. */
function manualClock(start: number) {
  let now = start;
  return { clock: () => now, set: (ms: number) => (now = ms) };
}

const fill = (value: number) => (b: Uint8Array) => b.fill(value);

describe('uuidv7', () => {
  it('has the RFC 9562 layout: version 7, variant 10, lowercase hex with dashes', () => {
    for (let i = 0; i < 100; i++) expect(uuidv7()).toMatch(SHAPE);
    // Random bits all set must not leak into the version or variant.
    const id = createUuidV7(() => 0, fill(0xff))();
    expect(id[14]).toBe('7');
    expect(id[19]).toBe('b');
  });

  it('carries the clock in its first 48 bits, big-endian', () => {
    const ms = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
    const id = createUuidV7(() => ms, fill(0))();
    expect(id.slice(0, 13)).toBe(
      `${ms.toString(16).padStart(12, '0').slice(0, 8)}-${ms.toString(16).slice(-4)}`,
    );
    expect(uuidV7Time(id)).toBe(ms);
    expect(uuidV7Time(createUuidV7(() => 0xffff_ffff_ffff, fill(0))())).toBe(0xffff_ffff_ffff);
  });

  it('is strictly increasing within one millisecond', () => {
    const gen = createUuidV7(() => 1_700_000_000_000);
    const ids = Array.from({ length: 2000 }, gen);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(ids.every((id) => uuidV7Time(id) === 1_700_000_000_000)).toBe(true);
  });

  it('carries the timestamp forward when the counter runs out, and stays ordered', () => {
    const gen = createUuidV7(() => 1000, fill(0xff)); // seed = 0x7ff, so 2048 ids fill the counter
    const ids = Array.from({ length: 5000 }, gen);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(uuidV7Time(ids.at(-1)!)).toBeGreaterThan(1000);
  });

  it('stays ordered when the clock steps back', () => {
    const t = manualClock(5000);
    const gen = createUuidV7(t.clock);
    const a = gen();
    t.set(4000);
    const b = gen();
    t.set(5001);
    const c = gen();
    expect([a, b, c].sort()).toEqual([a, b, c]);
    expect(uuidV7Time(b)).toBe(5000);
  });

  it('orders ids of later milliseconds after earlier ones regardless of the random bits', () => {
    const t = manualClock(10);
    let r = 0xff;
    const gen = createUuidV7(t.clock, (b) => b.fill(r));
    const early = gen();
    t.set(11);
    r = 0;
    expect(gen() > early).toBe(true);
  });

  it('is random where it should be', () => {
    const ids = Array.from({ length: 1000 }, () => uuidv7());
    expect(new Set(ids.map((id) => id.slice(19))).size).toBe(1000);
  });

  it('refuses timestamps outside 48 bits, and uuidV7Time refuses other UUIDs', () => {
    expect(() => createUuidV7(() => 2 ** 48)()).toThrow(/outside 48 bits/);
    expect(() => createUuidV7(() => -1)()).toThrow(/outside 48 bits/);
    expect(() => uuidV7Time('0f7c0b2e-2b1a-4f9e-9b7e-2c8a1d3f4a5b')).toThrow(/not a UUID v7/);
  });
});
