import { describe, expect, it } from 'vitest';
import { formatLsn } from '../replication/lsn.ts';
import type { OutboundMessage } from '../route/event.ts';
import { encodeLines, isTextual } from './ndjson.ts';

/** The line as JSON.stringify of the object gives it (what toJsonLine builds by hand). */
function reference(m: OutboundMessage): string {
  const textual = isTextual(m.headers['content-type'] ?? m.event.contentType);
  return JSON.stringify({
    topic: m.topic,
    key: m.key,
    headers: m.headers,
    value: m.value === null ? null : textual ? m.value.toString('utf8') : m.value.toString('base64'),
    value_encoding: m.value === null ? null : textual ? 'utf8' : 'base64',
    timestamp: new Date(m.timestamp).toISOString(),
    event_id: m.event.eventId,
    id: m.event.id,
    lsn: formatLsn(m.event.lsn),
  });
}

function message(over: Partial<OutboundMessage>, contentType = 'application/json'): OutboundMessage {
  return {
    topic: 'outbox.event.Order',
    key: 'order-1',
    value: Buffer.from('{"a":1}'),
    headers: { id: 'e1', 'content-type': contentType },
    timestamp: Date.UTC(2026, 10, 23, 3, 4, 5, 678),
    bytes: 10,
    event: {
      id: '9007199254740993',
      eventId: '0b3c5a52-3c1e-4d57-9b43-cbb1d0f2a001',
      aggregateType: 'Order',
      aggregateId: 'order-1',
      eventType: 'Created',
      payload: null,
      contentType,
      headers: {},
      traceparent: null,
      createdAt: new Date(0),
      lsn: 0x16b374d848n,
      commitTimeMs: 0,
      xid: 1,
    },
    ...over,
  };
}

const toJsonLine = (m: OutboundMessage) => {
  const out = encodeLines([m]).toString('utf8');
  expect(out.endsWith('\n')).toBe(true);
  return out.slice(0, -1);
};

describe('encodeLines', () => {
  const cases: [string, OutboundMessage][] = [
    ['textual', message({})],
    ['binary', message({ value: Buffer.from([0, 1, 2, 250, 255]) }, 'application/octet-stream')],
    ['tombstone', message({ value: null })],
    [
      'strings that need escaping',
      message({
        topic: 'a"b\\c',
        key: 'line\nbreak\u2028 "quoted" \u0001',
        value: Buffer.from('he said "hi"\n\t\u00e9\u{1f600}'),
        headers: { 'content-type': 'text/plain', 'x-"odd"': 'v\\"\n' },
      }),
    ],
    ['no content-type header: the row decides', message({ headers: { id: 'e1' } }, 'application/protobuf')],
    ['invalid UTF-8 in a textual value', message({ value: Buffer.from([0x61, 0xff, 0xfe, 0x62]) })],
    ['a lone surrogate in a key', message({ key: 'a\ud800b' })],
    [
      'long plain strings (copied natively) and an empty value',
      message({ key: 'k'.repeat(100), topic: 't'.repeat(200), value: Buffer.alloc(0) }),
    ],
    ['a timestamp before 1970', message({ timestamp: -1 })],
    ['a timestamp after 9999', message({ timestamp: 253_402_300_800_123 })],
    ['a timestamp on a whole second', message({ timestamp: 1_700_000_000_000 })],
    [
      'integer-like header names (enumerated first)',
      message({ headers: { b: '1', '2': 'x', a: '3', '1': 'y' } }),
    ],
  ];
  for (const [name, m] of cases)
    it(`matches JSON.stringify of the object: ${name}`, () => {
      const line = toJsonLine(m);
      expect(line).toBe(reference(m));
      expect(() => JSON.parse(line)).not.toThrow();
    });

  it('writes a batch as one line per message, in order, whatever the mix (random messages)', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 1;
      return seed % n;
    };
    const alphabet = [
      'a',
      'Z',
      '0',
      ' ',
      '"',
      '\\',
      '\n',
      '\u0001',
      '\u007f',
      'é',
      '€',
      '😀',
      '\u2028',
      '\ud800',
    ];
    const text = (n: number) =>
      Array.from({ length: rand(n) }, () => alphabet[rand(alphabet.length)]).join('');
    const batch = Array.from({ length: 300 }, (_, i) =>
      message(
        {
          key: text(40),
          topic: `topic.${text(5)}`,
          value: rand(5) === 0 ? null : Buffer.from(text(200), rand(2) ? 'utf8' : 'latin1'),
          headers: {
            id: `e${i}`,
            [text(6)]: text(20),
            'content-type': rand(2) ? 'application/json' : 'image/png',
          },
          timestamp: 1_700_000_000_000 + rand(5000) - 2500,
          event: {
            ...message({}).event,
            id: String(i),
            lsn: BigInt(rand(1000)) * 0x100000000n + BigInt(rand(1000)),
          },
        },
        rand(2) ? 'application/json' : 'application/octet-stream',
      ),
    );
    const lines = encodeLines(batch).toString('utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toEqual(batch.map(reference));
  });
});
