import { createRequire } from 'node:module';
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

/**
 * The `content-type` of an envelope-protobuf value: names the message so a consumer can pick the
 * decoder (EnvelopeSchema.typeName; written out so that this module does not load protobuf-es).
 */
export const ENVELOPE_PROTOBUF_CONTENT_TYPE = 'application/x-protobuf; messageType=outbox.v1.Envelope';
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

/** The message value and its content type for `format`. Pure. */
export function encodeValue(event: OutboxEvent, format: ValueFormat): EncodedValue {
  switch (format) {
    case 'raw':
      return { value: event.payload, contentType: event.contentType };
    case 'envelope-protobuf':
    case 'envelope-json':
      return envelopeValue().encodeEnvelope(event, format);
    default: {
      const never: never = format;
      throw new Error(`unknown value format ${JSON.stringify(never)} (known: ${VALUE_FORMATS.join(', ')})`);
    }
  }
}

type EnvelopeValue = typeof import('./envelope-value.ts');
let envelopeModule: EnvelopeValue | undefined;

/**
 * ./envelope-value.ts, loaded on the first envelope value. It brings protobuf-es and the generated
 * code (~8 MB of RSS), which a relay writing raw values (the default) never uses (issue 39, item 4;
 * docs/benchmarks.md). `require` of an ES module (Node ≥ 22.12) loads it synchronously, so the
 * per-event path stays sync; from dist/ the module is a .js file, from src/ a .ts one.
 */
function envelopeValue(): EnvelopeValue {
  envelopeModule ??= createRequire(import.meta.url)(
    `./envelope-value${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`,
  ) as EnvelopeValue;
  return envelopeModule;
}
