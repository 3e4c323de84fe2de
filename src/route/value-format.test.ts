import { fromBinary, fromJsonString } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import { type Envelope, EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import type { OutboxEvent } from './event.ts';
import {
  ENVELOPE_PROTOBUF_CONTENT_TYPE,
  encodeValue,
  eventVersionOf,
  isValueFormat,
  type ValueFormat,
  valueFormatFor,
} from './value-format.ts';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function event(over: Partial<OutboxEvent> = {}): OutboxEvent {
  return outboxEvent({
    payload: Buffer.from([0, 1, 2, 0xfe, 0xff]),
    contentType: 'application/x-protobuf; messageType=shop.v1.OrderPlaced',
    headers: {
      event_version: '3',
      source: 'orders-svc',
      tracestate: 'vendor=x',
      tenant: 'acme',
      retries: 3,
      nested: { a: 1 },
    },
    traceparent: TRACEPARENT,
    ...over,
  });
}

/** What a consumer with the generated code gets back, per envelope format. */
function decode(format: ValueFormat, value: Buffer | null): Envelope {
  expect(value).not.toBeNull();
  return format === 'envelope-protobuf'
    ? fromBinary(EnvelopeSchema, value!)
    : fromJsonString(EnvelopeSchema, value!.toString('utf8'));
}

/** Every Envelope field, as plain data, so a dropped or mis-mapped field fails the comparison. */
function fields(e: Envelope) {
  return {
    eventId: e.eventId,
    eventType: e.eventType,
    eventVersion: e.eventVersion,
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    occurredAt: e.occurredAt ? timestampDate(e.occurredAt).toISOString() : null,
    traceparent: e.traceparent,
    headers: { ...e.headers },
    contentType: e.contentType,
    payload: [...e.payload],
    source: e.source,
    tracestate: e.tracestate,
  };
}

describe('encodeValue', () => {
  it('raw: the payload as is, with the row content type', () => {
    const ev = event();
    const { value, contentType } = encodeValue(ev, 'raw');
    expect(value).toBe(ev.payload);
    expect(contentType).toBe('application/x-protobuf; messageType=shop.v1.OrderPlaced');
  });

  it.each(['envelope-protobuf', 'envelope-json'] as const)('%s round-trips every field', (format) => {
    const { value, contentType } = encodeValue(event(), format);
    expect(contentType).toBe(
      format === 'envelope-protobuf' ? ENVELOPE_PROTOBUF_CONTENT_TYPE : 'application/json',
    );
    expect(fields(decode(format, value))).toEqual({
      eventId: '0190f6b0-0000-7000-8000-000000000001',
      eventType: 'OrderPlaced',
      eventVersion: 3,
      aggregateType: 'Order',
      aggregateId: 'order-42',
      occurredAt: '2026-01-02T03:04:05.678Z',
      traceparent: TRACEPARENT,
      // Only string entries, as for message headers; the lifted ones stay too.
      headers: { event_version: '3', source: 'orders-svc', tracestate: 'vendor=x', tenant: 'acme' },
      contentType: 'application/x-protobuf; messageType=shop.v1.OrderPlaced',
      payload: [0, 1, 2, 0xfe, 0xff],
      source: 'orders-svc',
      tracestate: 'vendor=x',
    });
  });

  it('envelope-protobuf names its message type in the content type', () => {
    expect(ENVELOPE_PROTOBUF_CONTENT_TYPE).toBe('application/x-protobuf; messageType=outbox.v1.Envelope');
    // Written out in value-format.ts (which does not load protobuf-es): the generated schema's name.
    expect(ENVELOPE_PROTOBUF_CONTENT_TYPE).toBe(
      `application/x-protobuf; messageType=${EnvelopeSchema.typeName}`,
    );
  });

  it('envelope-json is the canonical protobuf JSON mapping (camelCase, base64 bytes, RFC 3339 time)', () => {
    const { value } = encodeValue(event({ payload: Buffer.from('{"total":10}') }), 'envelope-json');
    const json = JSON.parse(value!.toString('utf8'));
    expect(json.eventId).toBe('0190f6b0-0000-7000-8000-000000000001');
    expect(json.aggregateType).toBe('Order');
    expect(json.eventVersion).toBe(3);
    expect(json.occurredAt).toBe('2026-01-02T03:04:05.678Z');
    expect(Buffer.from(json.payload, 'base64').toString()).toBe('{"total":10}');
  });

  it.each(['envelope-protobuf', 'envelope-json'] as const)(
    '%s: defaults when the row has no extras',
    (format) => {
      const { value } = encodeValue(event({ headers: {}, traceparent: null }), format);
      const e = fields(decode(format, value));
      expect(e.eventVersion).toBe(1);
      expect(e.traceparent).toBe('');
      expect(e.source).toBe('');
      expect(e.tracestate).toBe('');
      expect(e.headers).toEqual({});
    },
  );

  it('tombstone: raw gives a null value, envelopes an Envelope with an empty payload', () => {
    expect(encodeValue(event({ payload: null }), 'raw').value).toBeNull();
    for (const format of ['envelope-protobuf', 'envelope-json'] as const) {
      const { value } = encodeValue(event({ payload: null }), format);
      const e = decode(format, value);
      expect(e.payload).toHaveLength(0);
      expect(e.eventId).toBe('0190f6b0-0000-7000-8000-000000000001');
    }
  });
});

describe('eventVersionOf', () => {
  it.each([
    ['7', 7],
    ['4294967295', 4294967295],
    [undefined, 1],
    [2, 1],
    ['', 1],
    ['0', 1],
    ['-1', 1],
    ['1.5', 1],
    ['v2', 1],
    ['4294967296', 1],
  ])('%j → %d', (raw, expected) => {
    expect(eventVersionOf(raw)).toBe(expected);
  });
});

describe('valueFormatFor', () => {
  const overrides: Record<string, ValueFormat> = { Payment: 'envelope-protobuf', Audit: 'envelope-json' };
  it('takes the aggregate type override, else the default', () => {
    expect(valueFormatFor('Payment', 'raw', overrides)).toBe('envelope-protobuf');
    expect(valueFormatFor('Audit', 'raw', overrides)).toBe('envelope-json');
    expect(valueFormatFor('Order', 'raw', overrides)).toBe('raw');
    expect(valueFormatFor('Order', 'envelope-json', {})).toBe('envelope-json');
  });
  it('ignores inherited properties ("constructor" is an aggregate type like any other)', () => {
    expect(valueFormatFor('constructor', 'raw', {})).toBe('raw');
    expect(valueFormatFor('toString', 'raw', overrides)).toBe('raw');
  });
  it('isValueFormat accepts exactly the three formats', () => {
    expect(['raw', 'envelope-protobuf', 'envelope-json', 'json', ''].map(isValueFormat)).toEqual([
      true,
      true,
      true,
      false,
      false,
    ]);
  });
});
