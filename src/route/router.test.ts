import { fromBinary, fromJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import { EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import { checkTopicTemplate, DEFAULT_TOPIC_TEMPLATE, RouteError, route, topicFor } from './router.ts';
import { ENVELOPE_PROTOBUF_CONTENT_TYPE } from './value-format.ts';

const cfg = { topicTemplate: DEFAULT_TOPIC_TEMPLATE, topicOverrides: {} };

const event = outboxEvent;

describe('route', () => {
  it('uses the Debezium default topic, aggregate id as key, payload as value, created_at as timestamp', () => {
    const m = route(event(), cfg);
    expect(m.topic).toBe('outbox.event.Order');
    expect(m.key).toBe('order-42');
    expect(m.value?.toString()).toBe('{"total":10}');
    expect(m.timestamp).toBe(Date.parse('2026-01-02T03:04:05.678Z'));
  });

  it('writes the identity headers, traceparent when set, and string entries of headers', () => {
    const m = route(
      event({
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        headers: { tenant: 'acme', tracestate: 'k=v', count: 3, nested: { a: 1 }, id: 'forged' },
      }),
      cfg,
    );
    expect(m.headers).toEqual({
      id: '0190f6b0-0000-7000-8000-000000000001',
      event_type: 'OrderPlaced',
      aggregate_type: 'Order',
      aggregate_id: 'order-42',
      'content-type': 'application/json',
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tenant: 'acme',
      tracestate: 'k=v',
    });
  });

  it('omits traceparent when absent and keeps a null payload as a tombstone', () => {
    const m = route(event({ payload: null }), cfg);
    expect(m.value).toBeNull();
    expect('traceparent' in m.headers).toBe(false);
  });

  it('fills {event_type} and applies per-aggregate overrides', () => {
    const c = {
      topicTemplate: 'app.{aggregate_type}.{event_type}',
      topicOverrides: { Customer: 'customers' },
    };
    expect(topicFor(event(), c)).toBe('app.Order.OrderPlaced');
    expect(topicFor(event({ aggregateType: 'Customer' }), c)).toBe('customers');
  });

  it('refuses an empty aggregate type and an illegal topic with a RouteError naming the value', () => {
    expect(() => topicFor(event({ aggregateType: '' }), cfg)).toThrow(RouteError);
    expect(() => topicFor(event({ aggregateType: 'order item' }), cfg)).toThrow(/"outbox.event.order item"/);
    expect(() => topicFor(event({ aggregateType: 'x'.repeat(260) }), cfg)).toThrow(RouteError);
  });

  it('checks templates at config time', () => {
    expect(checkTopicTemplate(DEFAULT_TOPIC_TEMPLATE)).toBeNull();
    expect(checkTopicTemplate('t.{aggregate}')).toMatch(/unknown placeholder \{aggregate\}/);
    expect(checkTopicTemplate('bad topic')).toMatch(/only letters/);
  });
});

describe('route: value format', () => {
  const envelopeCfg = {
    ...cfg,
    valueFormat: 'raw' as const,
    valueFormatOverrides: { Order: 'envelope-protobuf' as const, Invoice: 'envelope-json' as const },
  };

  it('raw by default: the payload as is, the row content type', () => {
    const m = route(event({ aggregateType: 'Customer', contentType: 'text/plain' }), envelopeCfg);
    expect(m.value?.toString()).toBe('{"total":10}');
    expect(m.headers['content-type']).toBe('text/plain');
  });

  it('a per-aggregate-type override encodes an Envelope and says so in content-type', () => {
    const m = route(event(), envelopeCfg);
    const env = fromBinary(EnvelopeSchema, m.value!);
    expect(env.eventId).toBe('0190f6b0-0000-7000-8000-000000000001');
    expect(env.aggregateId).toBe('order-42');
    expect(Buffer.from(env.payload).toString()).toBe('{"total":10}');
    expect(env.contentType).toBe('application/json');
    expect(m.headers['content-type']).toBe(ENVELOPE_PROTOBUF_CONTENT_TYPE);
    expect(m.bytes).toBeGreaterThan(m.value!.length);
  });

  it('envelope-json is the canonical JSON of the same Envelope', () => {
    const m = route(event({ aggregateType: 'Invoice' }), envelopeCfg);
    const env = fromJsonString(EnvelopeSchema, m.value!.toString());
    expect(env.aggregateType).toBe('Invoice');
    expect(m.headers['content-type']).toBe('application/json');
  });

  it('the default format applies to every aggregate type without an override', () => {
    const m = route(event({ aggregateType: 'Customer' }), { ...cfg, valueFormat: 'envelope-json' });
    expect(fromJsonString(EnvelopeSchema, m.value!.toString()).aggregateType).toBe('Customer');
  });
});
