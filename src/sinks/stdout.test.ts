import { describe, expect, it } from 'vitest';
import { formatLsn } from '../replication/lsn.ts';
import type { OutboundMessage } from '../route/event.ts';
import { isTextual, toJsonLine } from './stdout.ts';

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

describe('toJsonLine', () => {
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
  ];
  for (const [name, m] of cases)
    it(`matches JSON.stringify of the object: ${name}`, () => {
      const line = toJsonLine(m);
      expect(line).toBe(reference(m));
      expect(() => JSON.parse(line)).not.toThrow();
    });
});
