import { fromBinary, fromJsonString } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import { EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import {
  checkTopicTemplate,
  DEFAULT_TOPIC_TEMPLATE,
  HEADER,
  RouteError,
  route,
  topicFor,
  tryRoute,
} from './router.ts';
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

  it('writes the identity headers, traceparent when set, and the entries of headers', () => {
    const m = route(
      event({
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        headers: { tenant: 'acme', tracestate: 'k=v', id: 'forged' },
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

  it('writes the same headers, in the same order, with and without headers of the row', () => {
    const plain = route(event({ headers: {} }), cfg).headers;
    expect(Object.keys(plain)).toEqual([
      HEADER.id,
      HEADER.eventType,
      HEADER.aggregateType,
      HEADER.aggregateId,
      HEADER.contentType,
    ]);
    const withOwn = route(event({ headers: { tenant: 'acme' } }), cfg).headers;
    expect(Object.keys(withOwn)).toEqual(['tenant', ...Object.keys(plain)]);
    expect({ ...withOwn, tenant: undefined }).toEqual({ ...plain, tenant: undefined });
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

  it('remembers legal topics without mixing templates, aggregate types or event types (hostile names included)', () => {
    const withEvent = {
      topicTemplate: 'app.{aggregate_type}.{event_type}',
      topicOverrides: { C: 'c.{event_type}' },
    };
    const plain = { topicTemplate: 'x.{aggregate_type}', topicOverrides: { C: 'customers' } };
    const fresh = (a: string, e: string, c: typeof plain) => {
      const t = Object.hasOwn(c.topicOverrides, a) ? c.topicOverrides[a as 'C'] : c.topicTemplate;
      return t.replace('{aggregate_type}', a).replace('{event_type}', e);
    };
    const names = ['Order', 'C', 'constructor', '__proto__', 'a\u0000b', 'b', 'a', 'q r', 'x'.repeat(240)];
    for (let round = 0; round < 2; round++) {
      for (const a of names) {
        for (const e of names) {
          for (const c of [withEvent, plain]) {
            const want = fresh(a, e, c);
            if (/^[a-zA-Z0-9._-]{1,249}$/.test(want))
              expect(topicFor({ aggregateType: a, eventType: e }, c)).toBe(want);
            else expect(() => topicFor({ aggregateType: a, eventType: e }, c)).toThrow(RouteError);
          }
        }
      }
    }
    // Past its bound the memory starts over; answers stay right.
    for (let i = 0; i < 25_000; i++) {
      const a = `T${i % 12_000}`;
      expect(topicFor({ aggregateType: a, eventType: 'E' }, plain)).toBe(`x.${a}`);
    }
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

describe('route: hostile rows', () => {
  // Values a row of a user-owned table can hold once its constraints are gone. Each must be a
  // RouteError (permanent for that event, recorded with the reason) naming the column — never a
  // TypeError out of the stream, never a null handed to the Kafka client.
  const bad: [string, Partial<Record<keyof ReturnType<typeof event>, unknown>>, RegExp][] = [
    ['NULL aggregate_id', { aggregateId: null }, /^aggregate_id is NULL.*Fix: /],
    ['NULL aggregate_type', { aggregateType: null }, /^aggregate_type is NULL/],
    ['NULL event_type', { eventType: null }, /^event_type is NULL/],
    ['NULL event_id', { eventId: null }, /^event_id is NULL/],
    ['NULL content_type', { contentType: null }, /^content_type is NULL/],
    ['NULL created_at', { createdAt: null }, /^created_at is NULL/],
    ['infinite created_at', { createdAt: Number.POSITIVE_INFINITY }, /^created_at is a number/],
    [
      'a giant aggregate_id',
      { aggregateId: 'k'.repeat(2049) },
      /^aggregate_id is 2049 bytes, over the relay's limit of 2048/,
    ],
    ['numeric aggregate_id', { aggregateId: 42 }, /^aggregate_id is a number \("42"\), not text/],
    ['jsonb payload', { payload: { a: 1 } }, /^payload is an object, not bytea/],
    ['headers an array', { headers: ['a'] }, /^headers is an array, not a JSON object/],
    ['headers a string', { headers: 'x' }, /^headers is the string "x", not a JSON object/],
    [
      'a number header',
      { headers: { n: 3 } },
      /^headers\."n" is a number \("3"\): header values must be strings/,
    ],
    ['a nested header', { headers: { n: { a: 1 } } }, /^headers\."n" is an object/],
    ['a null header', { headers: { n: null } }, /^headers\."n" is NULL/],
    ['an invalid traceparent', { traceparent: 'nope' }, /^traceparent "nope" is not a W3C traceparent/],
    ['a numeric traceparent', { traceparent: 7 }, /^traceparent is a number/],
  ];
  for (const [name, over, reason] of bad) {
    it(`${name}: ROW_INVALID, naming the column and the fix`, () => {
      const r = tryRoute(event(over as never), cfg);
      expect(r).toMatchObject({ reason: 'ROW_INVALID', error: expect.stringMatching(reason) });
      expect('error' in r && r.error).toMatch(/Fix: /);
    });
  }

  it('topics that Kafka refuses, and aggregate types that look like placeholders or prototype keys', () => {
    for (const aggregateType of ['order item', 'x'.repeat(300), '{event_type}', 'a/b', 'Bestellung-ü']) {
      const r = tryRoute(event({ aggregateType }), cfg);
      expect(r, aggregateType).toMatchObject({
        reason: 'ROUTE',
        error: expect.stringMatching(/not a legal Kafka topic/),
      });
    }
    const overrides = { topicTemplate: DEFAULT_TOPIC_TEMPLATE, topicOverrides: { Customer: 'customers' } };
    for (const aggregateType of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(route(event({ aggregateType }), overrides).topic).toBe(`outbox.event.${aggregateType}`);
    }
  });

  it('a giant aggregate type is quoted in part in the reason, never whole', () => {
    const r = tryRoute(event({ aggregateType: 'y'.repeat(1_000_000) }), cfg);
    expect('error' in r && r.error.length).toBeLessThan(1000);
  });

  it('NULL payload is a tombstone and NULL headers are none (the contract allows both)', () => {
    expect(tryRoute(event({ payload: null, headers: {} }), cfg)).toHaveProperty('message');
  });

  it('anything else thrown on the way becomes ROW_UNEXPECTED, not an exception', () => {
    const hostile = event();
    Object.defineProperty(hostile, 'headers', {
      get() {
        throw new TypeError('boom');
      },
    });
    expect(tryRoute(hostile, cfg)).toMatchObject({
      reason: 'ROW_UNEXPECTED',
      error: expect.stringMatching(/TypeError: boom/),
    });
  });
});
