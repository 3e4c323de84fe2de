import { create, toBinary, toJsonString } from '@bufbuild/protobuf';
import { type Timestamp, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { type Envelope, EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import type { OutboxEvent } from './event.ts';
import {
  ENVELOPE_HEADER,
  ENVELOPE_JSON_CONTENT_TYPE,
  ENVELOPE_PROTOBUF_CONTENT_TYPE,
  type EncodedValue,
  eventVersionOf,
  SUB_MILLISECOND_MICROS,
} from './value-format.ts';

/**
 * The envelope value formats (docs/envelope.md): an outbox.v1.Envelope, binary or in the protobuf
 * JSON mapping. A module of its own, loaded by value-format.ts on the first envelope value, so
 * that a relay writing raw values does not load protobuf-es.
 */

/** The row's created_at as a protobuf Timestamp, to the microsecond when the Date carries them. */
export function timestampOf(d: Date): Timestamp {
  const ts = timestampFromDate(d);
  const micros = (d as unknown as Record<symbol, unknown>)[SUB_MILLISECOND_MICROS];
  if (typeof micros === 'number' && Number.isInteger(micros) && micros > 0 && micros < 1000) {
    ts.nanos += micros * 1000;
  }
  return ts;
}

/** The Envelope of a row. Pure. */
export function toEnvelope(event: OutboxEvent): Envelope {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers)) {
    if (typeof v === 'string') headers[k] = v;
  }
  return create(EnvelopeSchema, {
    eventId: event.eventId,
    eventType: event.eventType,
    eventVersion: eventVersionOf(event.headers[ENVELOPE_HEADER.eventVersion]),
    aggregateType: event.aggregateType,
    aggregateId: event.aggregateId,
    occurredAt: timestampOf(event.createdAt),
    traceparent: event.traceparent ?? '',
    headers,
    contentType: event.contentType,
    // A tombstone (payload NULL) becomes an Envelope with an empty payload, not a null value: an
    // envelope always carries the event's identity, and a null Kafka value would be a compaction
    // tombstone that deletes the key. Consumers needing the distinction read event_type.
    payload: event.payload ?? new Uint8Array(0),
    source: headerString(event, ENVELOPE_HEADER.source),
    tracestate: headerString(event, ENVELOPE_HEADER.tracestate),
  });
}

function headerString(event: OutboxEvent, name: string): string {
  const v = event.headers[name];
  return typeof v === 'string' ? v : '';
}

/** An envelope format's message value and content type. Pure. */
export function encodeEnvelope(
  event: OutboxEvent,
  format: 'envelope-protobuf' | 'envelope-json',
): EncodedValue {
  if (format === 'envelope-json')
    return {
      value: Buffer.from(toJsonString(EnvelopeSchema, toEnvelope(event)), 'utf8'),
      contentType: ENVELOPE_JSON_CONTENT_TYPE,
    };
  const bin = toBinary(EnvelopeSchema, toEnvelope(event));
  // Buffer view over the same bytes: kafkajs wants a Buffer, no copy needed.
  return {
    value: Buffer.from(bin.buffer, bin.byteOffset, bin.byteLength),
    contentType: ENVELOPE_PROTOBUF_CONTENT_TYPE,
  };
}
