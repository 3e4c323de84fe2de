import { describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../route/event.ts';
import { SqsSinkError } from './sqs-errors.ts';
import {
  attributeName,
  attributesOf,
  fifoId,
  OVERFLOW_ATTRIBUTE,
  prepareEntry,
  sizeOf,
} from './sqs-message.ts';

function msg(
  over: Partial<OutboundMessage> = {},
  eventHeaders: Record<string, unknown> = {},
): OutboundMessage {
  const value = Buffer.from('{"a":1}');
  return {
    topic: 't',
    key: 'k1',
    value,
    headers: { id: 'e-1', aggregate_id: 'k1' },
    timestamp: 0,
    bytes: value.length,
    event: { id: '7', eventId: 'e-1', aggregateType: 'A', eventType: 'T', headers: eventHeaders },
    ...over,
  } as unknown as OutboundMessage;
}

describe('SQS message attributes', () => {
  it('names are made valid: other characters to _, no leading/trailing/doubled period, reserved prefixes kept out', () => {
    expect(attributeName('tenant')).toBe('tenant');
    expect(attributeName('bad name!')).toBe('bad_name_');
    expect(attributeName('..a..b..')).toBe('a.b');
    expect(attributeName('AWS.x')).toBe('x-AWS.x');
    expect(attributeName('amazon.y')).toBe('x-amazon.y');
    expect(attributeName('')).toBe('_');
    expect(attributeName('é'.repeat(300))).toHaveLength(256);
  });

  it('at most 10: the relay\u2019s own first, the rest in outbox_headers under their original names; empty values left out', () => {
    const headers: Record<string, string> = { extra0: 'x', id: 'e', aggregate_id: 'k', empty: '' };
    for (let i = 1; i < 12; i++) headers[`extra${i}`] = `v${i}`;
    const a = attributesOf(headers)!;
    expect(Object.keys(a)).toHaveLength(10);
    expect(Object.keys(a).slice(0, 2)).toEqual(['id', 'aggregate_id']);
    const overflow = JSON.parse(a[OVERFLOW_ATTRIBUTE]!.StringValue) as Record<string, string>;
    expect(Object.keys(overflow)).toEqual(['extra7', 'extra8', 'extra9', 'extra10', 'extra11']);
    expect('empty' in a || 'empty' in overflow).toBe(false);
  });

  it('10 fit without an overflow attribute; two names made valid alike: the second in the overflow', () => {
    const ten: Record<string, string> = {};
    for (let i = 0; i < 10; i++) ten[`h${i}`] = 'v';
    expect(Object.keys(attributesOf(ten)!)).toHaveLength(10);
    expect(attributesOf(ten)![OVERFLOW_ATTRIBUTE]).toBeUndefined();
    const clash = attributesOf({ 'a b': '1', a_b: '2' })!;
    expect(clash.a_b!.StringValue).toBe('1');
    expect(JSON.parse(clash[OVERFLOW_ATTRIBUTE]!.StringValue)).toEqual({ a_b: '2' });
    expect(attributesOf({})).toBeUndefined();
  });
});

describe('SQS entry', () => {
  it('FIFO: group = the key, dedup = the event id (a replay and a dead-letter copy get ids of their own)', () => {
    const e = prepareEntry(msg(), true, 262_144);
    if (e instanceof SqsSinkError) throw e;
    expect(e.entry.MessageGroupId).toBe('k1');
    expect(e.entry.MessageDeduplicationId).toBe('e-1');
    expect(e.bytes).toBe(sizeOf(e.entry));
    const replay = prepareEntry(msg({}, { 'x-replay-of': '3' }), true, 262_144) as {
      entry: { MessageDeduplicationId: string };
    };
    expect(replay.entry.MessageDeduplicationId).toBe('e-1:7');
    const standard = prepareEntry(msg(), false, 262_144) as { entry: object };
    expect(standard.entry).not.toHaveProperty('MessageGroupId');
  });

  it('a key that is no valid FIFO id is hashed (the same key, the same group)', () => {
    expect(fifoId('k 1')).toMatch(/^sha256-[0-9a-f]{64}$/);
    expect(fifoId('k 1')).toBe(fifoId('k 1'));
    expect(fifoId('x'.repeat(129))).not.toBe(fifoId('x'.repeat(130)));
    expect(fifoId('')).toMatch(/^sha256-/);
    expect(fifoId('ok-key_1.2:3')).toBe('ok-key_1.2:3');
  });

  it('size counts body, attribute names, types and values; over the limit is SQS_MESSAGE_TOO_LARGE', () => {
    const e = prepareEntry(msg({ headers: { ab: 'cd' } }), false, 262_144) as { bytes: number };
    expect(e.bytes).toBe(7 + 2 + 'String'.length + 2);
    const big = prepareEntry(msg({ value: Buffer.alloc(300_000, 'x') }), false, 262_144);
    expect(big).toBeInstanceOf(SqsSinkError);
    expect((big as SqsSinkError).code).toBe('SQS_MESSAGE_TOO_LARGE');
  });

  it('a tombstone or a value that is not UTF-8 is SQS_INVALID_MESSAGE; nothing throws', () => {
    for (const value of [null, Buffer.alloc(0), Buffer.from([0xff, 0xfe])]) {
      const r = prepareEntry(msg({ value }), true, 262_144);
      expect((r as SqsSinkError).code).toBe('SQS_INVALID_MESSAGE');
    }
    const hostile = msg({
      headers: new Proxy(
        {},
        {
          ownKeys: () => {
            throw new Error('boom');
          },
        },
      ),
    });
    expect((prepareEntry(hostile, true, 262_144) as SqsSinkError).code).toBe('SQS_INVALID_MESSAGE');
  });
});
