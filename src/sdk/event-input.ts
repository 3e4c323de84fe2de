import { type DescMessage, type Message, toBinary } from '@bufbuild/protobuf';
import { HEADER } from '../route/router.ts';
import { TRACEPARENT } from '../route/row-check.ts';
import { OutboxValidationError } from './errors.ts';

/** A protobuf-es v2 message and its schema, e.g. `{ schema: OrderPlacedSchema, message: create(OrderPlacedSchema, {...}) }`. */
export interface ProtobufPayload {
  schema: DescMessage;
  message: Message;
}

/** One event as the application hands it to the producer. */
export interface OutboxEventInput {
  /** Chooses the topic, e.g. "Order". */
  aggregateType: string;
  /** The message key: events of one aggregate keep their order. */
  aggregateId: string;
  eventType: string;
  /**
   * An object or array → JSON (application/json); bytes → as is (application/octet-stream);
   * a protobuf message → binary (application/x-protobuf; messageType=<type name>); null → a tombstone.
   */
  payload: object | Uint8Array | ProtobufPayload | null;
  /** Defaults to a new UUID v7. Pass your own to make a retried unit of work idempotent downstream. */
  eventId?: string;
  /** String values only; they become message headers. */
  headers?: Record<string, string>;
  /** Overrides the content type derived from the payload. */
  contentType?: string;
  /** Defaults to the active OpenTelemetry span's context, when there is one. */
  traceparent?: string;
}

/** A validated event, in the outbox table's terms. */
export interface OutboxRowValues {
  eventId: string;
  aggregateType: string;
  aggregateId: string;
  eventType: string;
  payload: Buffer | null;
  contentType: string;
  headers: Record<string, string>;
  traceparent: string | null;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Headers the relay writes itself from the row's columns: a producer value would be overwritten. */
const RELAY_HEADERS = new Set<string>(Object.values(HEADER));

function isProtobufPayload(p: object): p is ProtobufPayload {
  const schema = (p as { schema?: { kind?: unknown; typeName?: unknown } }).schema;
  return schema?.kind === 'message' && typeof schema.typeName === 'string';
}

function text(field: string, value: unknown, { required }: { required: boolean }): string {
  if (typeof value !== 'string')
    throw new OutboxValidationError(field, `must be a string, got ${typeof value}`);
  if (required && value === '') throw new OutboxValidationError(field, 'must not be empty');
  // PostgreSQL text and jsonb cannot hold U+0000; failing here names the field, the server would not.
  if (value.includes('\u0000')) throw new OutboxValidationError(field, 'must not contain the NUL character');
  return value;
}

function encodePayload(payload: OutboxEventInput['payload']): { bytes: Buffer | null; contentType: string } {
  if (payload === null) return { bytes: null, contentType: 'application/json' };
  if (payload instanceof Uint8Array) {
    return {
      bytes: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
      contentType: 'application/octet-stream',
    };
  }
  if (typeof payload !== 'object') {
    throw new OutboxValidationError(
      'payload',
      `must be an object (JSON), bytes, a protobuf { schema, message } or null, got ${typeof payload}; for a text body pass Buffer.from(text) and a contentType`,
    );
  }
  if (isProtobufPayload(payload)) {
    if (payload.message?.$typeName !== payload.schema.typeName) {
      throw new OutboxValidationError(
        'payload.message',
        `is not a ${payload.schema.typeName} (got ${String(payload.message?.$typeName)}); create it with create(${payload.schema.name}Schema, …)`,
      );
    }
    const bin = toBinary(payload.schema, payload.message);
    return {
      bytes: Buffer.from(bin.buffer, bin.byteOffset, bin.byteLength),
      contentType: `application/x-protobuf; messageType=${payload.schema.typeName}`,
    };
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (err) {
    throw new OutboxValidationError('payload', `cannot be serialised as JSON: ${(err as Error).message}`);
  }
  if (json === undefined) throw new OutboxValidationError('payload', 'serialises to nothing as JSON');
  return { bytes: Buffer.from(json, 'utf8'), contentType: 'application/json' };
}

/** Validates and encodes one event; pure apart from the id generator. */
export function toRowValues(
  input: OutboxEventInput,
  opts: { maxPayloadBytes: number; newEventId: () => string },
): OutboxRowValues {
  if (input === null || typeof input !== 'object') {
    throw new OutboxValidationError('event', 'must be an object');
  }
  const aggregateType = text('aggregateType', input.aggregateType, { required: true });
  const aggregateId = text('aggregateId', input.aggregateId, { required: true });
  const eventType = text('eventType', input.eventType, { required: true });

  let eventId: string;
  if (input.eventId === undefined) {
    eventId = opts.newEventId();
  } else {
    eventId = text('eventId', input.eventId, { required: true });
    if (!UUID.test(eventId))
      throw new OutboxValidationError('eventId', `must be a UUID, got ${JSON.stringify(eventId)}`);
  }

  const headers: Record<string, string> = {};
  if (input.headers !== undefined) {
    if (input.headers === null || typeof input.headers !== 'object' || Array.isArray(input.headers)) {
      throw new OutboxValidationError('headers', 'must be an object of string values');
    }
    for (const [k, v] of Object.entries(input.headers)) {
      const field = `headers.${k}`;
      if (typeof v !== 'string') {
        // The relay publishes only string entries: anything else would vanish silently on the way.
        throw new OutboxValidationError(
          field,
          `must be a string, got ${typeof v}; convert it (String(value)) or move it into the payload`,
        );
      }
      if (k === '') throw new OutboxValidationError('headers', 'a header name must not be empty');
      if (RELAY_HEADERS.has(k)) {
        throw new OutboxValidationError(
          field,
          `is written by the relay from the event's own fields; set those instead`,
        );
      }
      headers[text(field, k, { required: true })] = text(field, v, { required: false });
    }
  }

  const encoded = encodePayload(input.payload);
  const size = encoded.bytes?.byteLength ?? 0;
  if (size > opts.maxPayloadBytes) {
    throw new OutboxValidationError(
      'payload',
      `is ${size} bytes, over maxPayloadBytes (${opts.maxPayloadBytes}); Kafka refuses messages over its ` +
        'max.message.bytes (about 1 MB by default). Fix: store the body elsewhere and send a reference, or raise ' +
        'maxPayloadBytes together with the broker and topic limits',
    );
  }

  const contentType =
    input.contentType === undefined
      ? encoded.contentType
      : text('contentType', input.contentType, { required: true });

  let traceparent: string | null = null;
  if (input.traceparent !== undefined) {
    traceparent = text('traceparent', input.traceparent, { required: true });
    if (!TRACEPARENT.test(traceparent)) {
      throw new OutboxValidationError(
        'traceparent',
        'must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>',
      );
    }
  }

  return {
    eventId,
    aggregateType,
    aggregateId,
    eventType,
    payload: encoded.bytes,
    contentType,
    headers,
    traceparent,
  };
}
