import type { OutboxEvent } from '../../src/route/event.ts';

/** A decoded outbox row for unit tests of the pure data path; `over` replaces any field. */
export function outboxEvent(over: Partial<OutboxEvent> = {}): OutboxEvent {
  return {
    id: '17',
    eventId: '0190f6b0-0000-7000-8000-000000000001',
    aggregateType: 'Order',
    aggregateId: 'order-42',
    eventType: 'OrderPlaced',
    payload: Buffer.from('{"total":10}'),
    contentType: 'application/json',
    headers: {},
    traceparent: null,
    createdAt: new Date('2026-01-02T03:04:05.678Z'),
    lsn: 1n,
    commitTimeMs: 0,
    xid: 0,
    ...over,
  };
}
