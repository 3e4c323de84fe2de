import { describe, expect, it } from 'vitest';
import { canBePoison, describePoison, POISON_REPEATS, PoisonDetector, type StreamFailure } from './poison.ts';

const utf8: StreamFailure = {
  confirmedLsn: 0x16b3748n,
  sqlstate: '22021',
  message: 'invalid byte sequence for encoding "UTF8": 0xff',
  transactionLsn: 0x16b3800n,
};

describe('canBePoison', () => {
  it.each([
    ['22021', true],
    ['XX000', true],
    ['54000', true],
    ['08006', false],
    ['57P01', false],
    ['53300', false],
    ['55006', false],
    ['42704', false],
    ['40001', false],
    [undefined, false],
    ['ECONNREFUSED', false],
  ])('%s → %s', (code, expected) => {
    expect(canBePoison(code)).toBe(expected);
  });
});

describe('PoisonDetector', () => {
  it(`the same error at the same position ${POISON_REPEATS} times in a row is poison`, () => {
    const d = new PoisonDetector();
    for (let i = 1; i < POISON_REPEATS; i++) expect(d.failed(utf8, 1000 + i)).toBeNull();
    const p = d.failed(utf8, 9999);
    expect(p).toEqual({
      confirmedLsn: '0/16B3748',
      transactionLsn: '0/16B3800',
      sqlstate: '22021',
      message: utf8.message,
      repeats: POISON_REPEATS,
      sinceMs: 1001,
    });
    expect(describePoison(p!)).toBe(
      `poison position after 0/16B3748, in the transaction committed at 0/16B3800: the stream failed ${POISON_REPEATS} times in a row with [22021] ${utf8.message}`,
    );
    // It stays poison while it repeats.
    expect(d.failed(utf8)?.repeats).toBe(POISON_REPEATS + 1);
  });

  it('progress clears the streak and the poison', () => {
    const d = new PoisonDetector(2);
    d.failed(utf8);
    expect(d.failed(utf8)).not.toBeNull();
    d.progressed();
    expect(d.poison).toBeNull();
    expect(d.failed(utf8)).toBeNull();
  });

  it('another position or another error starts a new count', () => {
    const d = new PoisonDetector(2);
    d.failed(utf8);
    expect(d.failed({ ...utf8, confirmedLsn: utf8.confirmedLsn + 1n })).toBeNull();
    expect(d.failed({ ...utf8, confirmedLsn: utf8.confirmedLsn + 1n, message: 'other' })).toBeNull();
    expect(d.failed({ ...utf8, confirmedLsn: utf8.confirmedLsn + 1n, message: 'other' })).not.toBeNull();
    expect(d.failed(utf8)).toBeNull();
    expect(d.poison).toBeNull();
  });
});
