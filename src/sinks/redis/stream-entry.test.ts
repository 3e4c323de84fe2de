import { describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../route/event.ts';
import { dedupId } from '../dedup-id.ts';
import { dedupKey, entryFields, hashTag, largestArgument, streamFor } from './stream-entry.ts';

function msg(
  o: { headers?: Record<string, string>; eventHeaders?: Record<string, unknown>; value?: Buffer | null } = {},
) {
  return {
    topic: 'outbox.event.Order',
    key: 'o1',
    value: o.value === undefined ? Buffer.from('{}') : o.value,
    headers: o.headers ?? { id: 'e1', event_type: 'Created', aggregate_id: 'o1' },
    event: {
      id: '7',
      eventId: 'e1',
      aggregateType: 'Order',
      eventType: 'Created',
      headers: o.eventHeaders ?? {},
    },
  } as unknown as OutboundMessage;
}

describe('stream entry', () => {
  it('fields: id, type, the other headers prefixed h:, the value last; a tombstone has none', () => {
    expect(entryFields(msg()).map(String)).toEqual([
      'id',
      'e1',
      'type',
      'Created',
      'h:aggregate_id',
      'o1',
      'value',
      '{}',
    ]);
    expect(entryFields(msg({ value: null })).map(String)).not.toContain('value');
  });

  it('stream template: {topic}, {aggregate_type}, {event_type}; other braces (hash tags) stay', () => {
    expect(streamFor('{topic}', msg())).toBe('outbox.event.Order');
    expect(streamFor('{tenant}:{aggregate_type}.{event_type}', msg())).toBe('{tenant}:Order.Created');
  });

  it('the dedup key shares the stream’s hash slot', () => {
    expect(hashTag('orders')).toBe('orders');
    expect(hashTag('{t}.orders')).toBe('t');
    expect(hashTag('a{}b')).toBe('a{}b');
    expect(dedupKey('orders', 'e1')).toBe('{orders}:dedup:e1');
    expect(hashTag(dedupKey('orders', 'e1'))).toBe('orders');
    expect(hashTag(dedupKey('{t}.orders', 'e1'))).toBe('t');
  });

  it('a replay and a dead-letter copy have dedup ids of their own', () => {
    expect(dedupId(msg())).toBe('e1');
    expect(dedupId(msg({ eventHeaders: { 'x-replay-of': '3' } }))).toBe('e1:7');
    expect(dedupId(msg({ headers: { 'x-dlq-original-topic': 't' } }))).toBe('e1:dead-letter');
  });

  it('largest argument in bytes', () => {
    expect(largestArgument(['ab', Buffer.alloc(5), 'é'])).toBe(5);
  });
});
