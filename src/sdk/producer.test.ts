import { describe, expect, it } from 'vitest';
import type { OutboxRowValues } from './event-input.ts';
import { insertSql, MAX_ROWS_PER_INSERT, withTrace } from './producer.ts';

describe('insertSql', () => {
  it('is one multi-row INSERT whose placeholders appear once each, in order (so $n → ? adapters work)', () => {
    const sql = insertSql('"public"."outbox"', 3);
    const numbers = [...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    expect(sql.match(/INSERT/g)).toHaveLength(1);
    expect(sql).toContain('RETURNING id::text AS id, event_id::text AS event_id');
    expect(sql).not.toContain('?');
  });

  it('stays under PostgreSQL’s 65,535 bind parameters per statement', () => {
    expect(MAX_ROWS_PER_INSERT * 8).toBeLessThanOrEqual(65_535);
    expect((MAX_ROWS_PER_INSERT + 1) * 8).toBeGreaterThan(65_535);
  });
});

describe('withTrace', () => {
  const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const OWN = '00-11111111111111111111111111111111-2222222222222222-00';
  const row = (over: Partial<OutboxRowValues> = {}): OutboxRowValues => ({
    eventId: '0190f6b0-0000-7000-8000-000000000001',
    aggregateType: 'Order',
    aggregateId: 'o-1',
    eventType: 'E',
    payload: null,
    contentType: 'application/json',
    headers: {},
    traceparent: null,
    ...over,
  });

  it('fills in the active span’s context when the event has none', () => {
    const r = withTrace(row(), { traceparent: TP, tracestate: 'v=1' });
    expect(r.traceparent).toBe(TP);
    expect(r.headers).toEqual({ tracestate: 'v=1' });
  });

  it('never overrides what the event says itself', () => {
    expect(withTrace(row({ traceparent: OWN }), { traceparent: TP, tracestate: 'v=1' })).toEqual(
      row({ traceparent: OWN }),
    );
    const r = withTrace(row({ headers: { tracestate: 'mine=1' } }), { traceparent: TP, tracestate: 'v=1' });
    expect(r.headers.tracestate).toBe('mine=1');
    expect(withTrace(row(), null)).toEqual(row());
  });
});
