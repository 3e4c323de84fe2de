import { create, toBinary, toJsonString } from '@bufbuild/protobuf';
import { type Timestamp, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { type Envelope, EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import type { OutboxEvent } from './event.ts';

/**
 * What a message value holds (docs/envelope.md):
 * - raw: the row's payload as is; the event's metadata travels in headers only.
 * - envelope-protobuf: an outbox.v1.Envelope, binary: metadata and payload in one self-describing value,
 *   for consumers or sinks (archives, other brokers) that drop headers.
 * - envelope-json: the same Envelope in the canonical protobuf JSON mapping.
 */
export type ValueFormat = 'raw' | 'envelope-protobuf' | 'envelope-json';

export const VALUE_FORMATS: readonly ValueFormat[] = ['raw', 'envelope-protobuf', 'envelope-json'];

/** The `content-type` of an envelope-protobuf value: names the message so a consumer can pick the decoder. */
export const ENVELOPE_PROTOBUF_CONTENT_TYPE = `application/x-protobuf; messageType=${EnvelopeSchema.typeName}`;
export const ENVELOPE_JSON_CONTENT_TYPE = 'application/json';

/** Row headers the envelope lifts into fields of their own (they stay in `headers` too). */
export const ENVELOPE_HEADER = {
  eventVersion: 'event_version',
  source: 'source',
  tracestate: 'tracestate',
} as const;

export interface EncodedValue {
  /** null only for a raw tombstone. */
  value: Buffer | null;
  /** The message's `content-type` header. */
  contentType: string;
}

export function isValueFormat(s: string): s is ValueFormat {
  return (VALUE_FORMATS as readonly string[]).includes(s);
}

/** The format for one aggregate type: its override, else the default. */
export function valueFormatFor(
  aggregateType: string,
  defaultFormat: ValueFormat,
  overrides: Record<string, ValueFormat>,
): ValueFormat {
  // hasOwn: an aggregate type named "constructor" must not pick up Object.prototype's.
  return Object.hasOwn(overrides, aggregateType) ? overrides[aggregateType]! : defaultFormat;
}

const MAX_UINT32 = 0xffff_ffff;

/** `event_version` header as a positive uint32; anything else (absent, "v2", "0", "-1", "1.5") is version 1. */
export function eventVersionOf(raw: unknown): number {
  if (typeof raw !== 'string' || !/^[0-9]{1,10}$/.test(raw)) return 1;
  const n = Number(raw);
  return n >= 1 && n <= MAX_UINT32 ? n : 1;
}

/**
 * A Date holds milliseconds; created_at has microseconds. A timestamptz parser that keeps them
 * (the CLI installs one: src/route/timestamptz.ts) sets this on the Date: the microseconds within its
 * millisecond, 0–999.
 */
export const SUB_MILLISECOND_MICROS = Symbol.for('pg-outbox-relay.subMillisecondMicros');

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

/** The message value and its content type for `format`. Pure. */
export function encodeValue(event: OutboxEvent, format: ValueFormat): EncodedValue {
  switch (format) {
    case 'raw':
      return { value: event.payload, contentType: event.contentType };
    case 'envelope-protobuf': {
      const bin = toBinary(EnvelopeSchema, toEnvelope(event));
      // Buffer view over the same bytes: kafkajs wants a Buffer, no copy needed.
      return {
        value: Buffer.from(bin.buffer, bin.byteOffset, bin.byteLength),
        contentType: ENVELOPE_PROTOBUF_CONTENT_TYPE,
      };
    }
    case 'envelope-json':
      return {
        value: Buffer.from(toJsonString(EnvelopeSchema, toEnvelope(event)), 'utf8'),
        contentType: ENVELOPE_JSON_CONTENT_TYPE,
      };
    default: {
      const never: never = format;
      throw new Error(`unknown value format ${JSON.stringify(never)} (known: ${VALUE_FORMATS.join(', ')})`);
    }
  }
}
