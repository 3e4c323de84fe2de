import { create, fromBinary } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import { EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import { OutboxValidationError } from './errors.ts';
import { type OutboxEventInput, toRowValues } from './event-input.ts';

const ID = '0190f6b0-0000-7000-8000-000000000001';
const opts = { maxPayloadBytes: 64, newEventId: () => ID };

function input(over: Partial<OutboxEventInput> = {}): OutboxEventInput {
  return {
    aggregateType: 'Order',
    aggregateId: 'o-1',
    eventType: 'OrderPlaced',
    payload: { total: 10 },
    ...over,
  };
}

/** The field an input is refused for, or null when it is accepted. */
function refusedField(over: Partial<OutboxEventInput> | Record<string, unknown>, o = opts): string | null {
  try {
    toRowValues(input(over as Partial<OutboxEventInput>), o);
    return null;
  } catch (err) {
    if (!(err instanceof OutboxValidationError)) throw err;
    expect(err.message.startsWith(`${err.field}: `)).toBe(true);
    return err.field;
  }
}

describe('toRowValues: payloads', () => {
  it('an object becomes JSON', () => {
    const row = toRowValues(input(), opts);
    expect(row.payload?.toString()).toBe('{"total":10}');
    expect(row.contentType).toBe('application/json');
    expect(toRowValues(input({ payload: [1, 'a'] }), opts).payload?.toString()).toBe('[1,"a"]');
  });

  it('bytes are kept as is (also a view into a larger buffer)', () => {
    const big = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const row = toRowValues(input({ payload: big.subarray(2, 5) }), opts);
    expect([...row.payload!]).toEqual([1, 2, 3]);
    expect(row.contentType).toBe('application/octet-stream');
  });

  it('a protobuf message becomes its binary form, typed by name', () => {
    const message = create(EnvelopeSchema, { eventId: 'x', eventVersion: 2 });
    const row = toRowValues(input({ payload: { schema: EnvelopeSchema, message } }), opts);
    expect(row.contentType).toBe('application/x-protobuf; messageType=outbox.v1.Envelope');
    const back = fromBinary(EnvelopeSchema, row.payload!);
    expect([back.eventId, back.eventVersion]).toEqual(['x', 2]);
  });

  it('a protobuf message of another type than its schema is refused', () => {
    const message = create(TimestampSchema, { seconds: 1n });
    expect(refusedField({ payload: { schema: EnvelopeSchema, message } })).toBe('payload.message');
  });

  it('null is a tombstone', () => {
    const row = toRowValues(input({ payload: null }), opts);
    expect(row.payload).toBeNull();
  });

  it('an explicit content type wins', () => {
    expect(toRowValues(input({ contentType: 'application/vnd.acme+json' }), opts).contentType).toBe(
      'application/vnd.acme+json',
    );
  });

  it('refuses what cannot be a payload, and one over the size limit', () => {
    expect(refusedField({ payload: 'text' })).toBe('payload');
    expect(refusedField({ payload: { n: 1n } })).toBe('payload');
    expect(refusedField({ payload: new Uint8Array(64) })).toBeNull();
    expect(refusedField({ payload: new Uint8Array(65) })).toBe('payload');
    expect(refusedField({ payload: { s: 'x'.repeat(100) } })).toBe('payload');
  });
});

describe('toRowValues: fields', () => {
  it('defaults the event id from the generator and keeps a given UUID', () => {
    expect(toRowValues(input(), opts).eventId).toBe(ID);
    const own = '7d444840-9dc0-11d1-b245-5ffdce74fad2';
    expect(toRowValues(input({ eventId: own }), opts).eventId).toBe(own);
  });

  it('names the field of each refusal', () => {
    expect(refusedField({ aggregateType: '' })).toBe('aggregateType');
    expect(refusedField({ aggregateId: '' })).toBe('aggregateId');
    expect(refusedField({ eventType: '' })).toBe('eventType');
    expect(refusedField({ aggregateId: 42 })).toBe('aggregateId');
    expect(refusedField({ aggregateId: 'a\u0000b' })).toBe('aggregateId');
    expect(refusedField({ eventId: 'not-a-uuid' })).toBe('eventId');
    expect(refusedField({ contentType: '' })).toBe('contentType');
    expect(refusedField({ traceparent: 'garbage' })).toBe('traceparent');
    expect(refusedField({ traceparent: '00-00000000000000000000000000000000-00f067aa0ba902b7-01' })).toBe(
      'traceparent',
    );
  });

  it('accepts string headers and refuses others by name', () => {
    const row = toRowValues(input({ headers: { tenant: 'acme', empty: '' } }), opts);
    expect(row.headers).toEqual({ tenant: 'acme', empty: '' });
    expect(refusedField({ headers: { tenant: 'acme', retries: 3 } })).toBe('headers.retries');
    expect(refusedField({ headers: { nested: { a: 1 } } })).toBe('headers.nested');
    expect(refusedField({ headers: ['a'] })).toBe('headers');
  });

  it('refuses headers the relay writes itself (they would be overwritten)', () => {
    expect(refusedField({ headers: { id: 'forged' } })).toBe('headers.id');
    expect(refusedField({ headers: { 'content-type': 'x' } })).toBe('headers.content-type');
  });

  it('keeps a valid traceparent', () => {
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(toRowValues(input({ traceparent: tp }), opts).traceparent).toBe(tp);
    expect(toRowValues(input(), opts).traceparent).toBeNull();
  });
});
