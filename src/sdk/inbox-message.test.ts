import type { EachMessagePayload, IHeaders } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { outboxEvent } from '../../test/support/outbox-event.ts';
import type { OutboxEvent } from '../route/event.ts';
import { encodeValue, type ValueFormat } from '../route/value-format.ts';
import { frame, frameHeader } from '../schema-registry/wire-format.ts';
import { InboxError } from './errors.ts';
import { isEnvelopeProtobuf, toInboxMessage } from './inbox-message.ts';

const ID = '0190f6b0-0000-7000-8000-000000000001';

function payload(value: Buffer | null, headers: IHeaders): EachMessagePayload {
  return {
    topic: 'outbox.event.Order',
    partition: 2,
    message: { key: Buffer.from('o-1'), value, timestamp: '0', attributes: 0, offset: '41', headers },
    heartbeat: async () => {},
    pause: () => () => {},
  };
}

/** A message as the relay would publish it in `format` (value + the headers that matter here). */
function published(format: ValueFormat, over: Partial<OutboxEvent> = {}): EachMessagePayload {
  const event = outboxEvent({ id: '1', eventId: ID, aggregateId: 'o-1', createdAt: new Date(0), ...over });
  const { value, contentType } = encodeValue(event, format);
  return payload(value, { id: event.eventId, 'content-type': contentType });
}

describe('toInboxMessage', () => {
  it('raw: event id from the `id` header, body = value', () => {
    const m = toInboxMessage(published('raw'));
    expect(m.eventId).toBe(ID);
    expect(m.payload?.toString()).toBe('{"total":10}');
    expect(m.envelope).toBeNull();
    expect([m.topic, m.partition, m.offset, m.key]).toEqual(['outbox.event.Order', 2, '41', 'o-1']);
  });

  it('envelope-protobuf is recognised by its content type; body = the Envelope payload', () => {
    const p = published('envelope-protobuf');
    p.message.headers!.id = undefined; // header-dropping pipelines: the Envelope alone is enough
    const m = toInboxMessage(p);
    expect(m.eventId).toBe(ID);
    expect(m.envelope?.eventType).toBe('OrderPlaced');
    expect(m.payload?.toString()).toBe('{"total":10}');
  });

  it('envelope-protobuf framed for a Schema Registry (magic byte, schema id, message indexes) decodes too', () => {
    const p = published('envelope-protobuf');
    p.message.value = frame(frameHeader(42, [0]), p.message.value!);
    const m = toInboxMessage(p);
    expect(m.eventId).toBe(ID);
    expect(m.payload?.toString()).toBe('{"total":10}');
  });

  it('envelope-json needs `envelope: true` (its content type is plain JSON)', () => {
    const m = toInboxMessage(published('envelope-json'), { envelope: true });
    expect(m.envelope?.aggregateId).toBe('o-1');
    expect(m.payload?.toString()).toBe('{"total":10}');
    // Without the flag it is an ordinary JSON value, identified by its header.
    expect(toInboxMessage(published('envelope-json')).envelope).toBeNull();
  });

  it('takes the last value of a repeated header', () => {
    const m = toInboxMessage(payload(Buffer.from('x'), { id: ['7d444840-9dc0-11d1-b245-5ffdce74fad2', ID] }));
    expect(m.eventId).toBe(ID);
  });

  it('refuses messages it could not deduplicate, saying where they are', () => {
    expect(() => toInboxMessage(payload(Buffer.from('x'), {}))).toThrow(InboxError);
    expect(() => toInboxMessage(payload(Buffer.from('x'), {}))).toThrow(
      /outbox\.event\.Order\[2\]@41.*no `id`/,
    );
    expect(() => toInboxMessage(payload(Buffer.from('x'), { id: 'nope' }))).toThrow(/invalid: "nope"/);
    expect(() => toInboxMessage(payload(Buffer.from('{not json'), { id: ID }), { envelope: true })).toThrow(
      /not an outbox\.v1\.Envelope/,
    );
    expect(() => toInboxMessage(payload(null, { id: ID }), { envelope: true })).toThrow(/no value/);
  });
});

describe('isEnvelopeProtobuf', () => {
  it('matches the media type and message type, tolerating case, spacing and quotes', () => {
    expect(isEnvelopeProtobuf('application/x-protobuf; messageType=outbox.v1.Envelope')).toBe(true);
    expect(isEnvelopeProtobuf('Application/X-Protobuf;messagetype="outbox.v1.Envelope"')).toBe(true);
    expect(isEnvelopeProtobuf('application/x-protobuf; messageType=shop.v1.Order')).toBe(false);
    expect(isEnvelopeProtobuf('application/json')).toBe(false);
    expect(isEnvelopeProtobuf(undefined)).toBe(false);
  });
});
