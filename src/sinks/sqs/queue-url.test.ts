import { describe, expect, it } from 'vitest';
import type { OutboundMessage } from '../../route/event.ts';
import { checkQueueUrlTemplate, isFifo, queueUrlFor } from './queue-url.ts';

const msg = (topic: string, aggregateType: string, eventType = 'Created') =>
  ({ topic, event: { aggregateType, eventType } }) as unknown as OutboundMessage;

describe('queue URL template', () => {
  it('fills {topic}, {aggregate_type} and {event_type}; a literal URL is every event\u2019s', () => {
    const t = 'https://sqs.eu-west-1.amazonaws.com/123456789012/{aggregate_type}-{event_type}';
    expect(queueUrlFor(t, msg('x', 'Order'))).toBe(
      'https://sqs.eu-west-1.amazonaws.com/123456789012/Order-Created',
    );
    expect(queueUrlFor('http://h/0/{topic}', msg('orders.fifo', 'Order'))).toBe('http://h/0/orders.fifo');
    expect(queueUrlFor('http://h/0/q', msg('t', 'Order'))).toBe('http://h/0/q');
  });

  it('hostile values stay in the path segment and never throw (a lone surrogate included)', () => {
    expect(queueUrlFor('http://h/0/{aggregate_type}', msg('t', '../../x?y#z'))).toBe(
      'http://h/0/..%2F..%2Fx%3Fy%23z',
    );
    expect(queueUrlFor('http://h/0/{aggregate_type}', msg('t', 'a\uD800b'))).toBe('http://h/0/a%EF%BF%BDb');
  });

  it('checks placeholders, scheme and the /ACCOUNT/NAME path', () => {
    expect(checkQueueUrlTemplate('https://sqs.x.amazonaws.com/1/{topic}')).toBeNull();
    expect(checkQueueUrlTemplate('https://sqs.x.amazonaws.com/1/{nope}')).toMatch(
      /unknown placeholder \{nope\}/,
    );
    expect(checkQueueUrlTemplate('ftp://h/1/q')).toMatch(/https:\/\//);
    expect(checkQueueUrlTemplate('https://h/q')).toMatch(/ACCOUNT_ID\/QUEUE_NAME/);
  });

  it('a URL ending in .fifo is a FIFO queue', () => {
    expect(isFifo('https://h/1/orders.fifo')).toBe(true);
    expect(isFifo('https://h/1/orders')).toBe(false);
  });
});
