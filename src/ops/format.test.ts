import { describe, expect, it } from 'vitest';
import { formatAge, formatBytes, formatTable, renderPayload, truncate } from './format.ts';

describe('formatTable', () => {
  it('aligns columns, rules the header and keeps cells on one line', () => {
    expect(
      formatTable(
        ['id', 'status', 'last_error'],
        [
          ['7', 'dead', 'permanent/X:\nboom'],
          ['12345', 'failed', ''],
        ],
      ),
    ).toBe(
      [
        'id     status  last_error',
        '-----  ------  -----------------',
        '7      dead    permanent/X: boom',
        '12345  failed',
      ].join('\n'),
    );
  });
});

describe('renderPayload', () => {
  it('JSON when it parses, pretty-printed', () => {
    const r = renderPayload(Buffer.from('{"a":1}'));
    expect(r).toEqual({ encoding: 'json', text: '{\n  "a": 1\n}', value: { a: 1 } });
  });
  it('text when valid UTF-8 without control characters', () => {
    expect(renderPayload(Buffer.from('héllo\nworld'))).toEqual({ encoding: 'text', text: 'héllo\nworld' });
  });
  it('hex for invalid UTF-8 or control bytes (protobuf and friends)', () => {
    expect(renderPayload(Buffer.from([0xff, 0xfe, 0x01]))).toEqual({
      encoding: 'hex',
      text: 'fffe01',
      bytes: 3,
    });
    expect(renderPayload(Buffer.from([0x08, 0x96, 0x01]))).toMatchObject({ encoding: 'hex', text: '089601' });
    expect(renderPayload(Buffer.from('a\u0000b'))).toMatchObject({ encoding: 'hex' });
  });
  it('null is a tombstone', () => {
    expect(renderPayload(null)).toMatchObject({ encoding: 'null' });
  });
});

describe('small formatters', () => {
  it('ages', () => {
    expect([formatAge(null), formatAge(5.9), formatAge(95), formatAge(7260), formatAge(200000)]).toEqual([
      '-',
      '5s',
      '1m35s',
      '2h1m',
      '2d7h',
    ]);
  });
  it('bytes', () => {
    expect([formatBytes(null), formatBytes(512), formatBytes(1536), formatBytes(5 * 1024 ** 3)]).toEqual([
      '-',
      '512 B',
      '1.5 KiB',
      '5.0 GiB',
    ]);
  });
  it('truncate', () => {
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });
});
