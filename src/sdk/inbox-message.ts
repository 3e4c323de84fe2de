import { fromBinary, fromJsonString } from '@bufbuild/protobuf';
import type { EachMessagePayload, IHeaders } from 'kafkajs';
import { type Envelope, EnvelopeSchema } from '../gen/outbox/v1/envelope_pb.ts';
import { HEADER } from '../route/router.ts';
import { unframeProtobuf } from '../schema-registry/wire-format.ts';
import { InboxError } from './errors.ts';
import { UUID } from './event-input.ts';

/** One consumed event as an inbox handler sees it, the same in every value format. */
export interface InboxMessage {
  /** What the inbox deduplicates on. */
  eventId: string;
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  /** The event's body: the value (raw format) or the Envelope's payload (envelope formats). */
  payload: Buffer | null;
  /** Last value of each message header, as text. */
  headers: Record<string, string>;
  /** The decoded Envelope, in the envelope formats; null for raw values. */
  envelope: Envelope | null;
}

export function headerStrings(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) {
    // kafkajs gives an array when a header repeats; the last one wins, as on the producer side.
    const last = Array.isArray(v) ? v.at(-1) : v;
    if (last !== undefined) out[k] = last.toString();
  }
  return out;
}

/** The media type's essence and its `messageType` parameter, lower-cased where case does not matter. */
function mediaType(contentType: string | undefined): { essence: string; messageType: string | undefined } {
  const [essence = '', ...params] = (contentType ?? '').split(';').map((s) => s.trim());
  const messageType = params
    .find((p) => /^messagetype=/i.test(p))
    ?.slice('messageType='.length)
    .replace(/^"(.*)"$/, '$1');
  return { essence: essence.toLowerCase(), messageType };
}

export function isEnvelopeProtobuf(contentType: string | undefined): boolean {
  const t = mediaType(contentType);
  return t.essence === 'application/x-protobuf' && t.messageType === EnvelopeSchema.typeName;
}

/**
 * The event id and body of a consumed message. An Envelope is decoded when the content type names it
 * (binary) or when the caller says values are envelopes (`envelope: true`, needed for envelope-json,
 * whose content type is plain application/json). Otherwise the id comes from the `id` header.
 * Throws InboxError when there is no usable event id: processing without one could not be deduplicated.
 */
export function toInboxMessage(p: EachMessagePayload, opts: { envelope?: boolean } = {}): InboxMessage {
  const headers = headerStrings(p.message.headers);
  const where = `${p.topic}[${p.partition}]@${p.message.offset}`;
  const contentType = headers[HEADER.contentType];
  let envelope: Envelope | null = null;
  if (isEnvelopeProtobuf(contentType) || opts.envelope) {
    if (p.message.value === null) {
      throw new InboxError(
        `message ${where} has no value, so no Envelope: an envelope format never sends one`,
      );
    }
    try {
      envelope = isEnvelopeProtobuf(contentType)
        ? // With a Schema Registry (docs/kafka.md) the value is framed: the magic byte says so.
          fromBinary(EnvelopeSchema, unframeProtobuf(p.message.value))
        : fromJsonString(EnvelopeSchema, p.message.value.toString('utf8'), { ignoreUnknownFields: true });
    } catch (err) {
      throw new InboxError(
        `message ${where} (content-type ${JSON.stringify(contentType)}) is not an outbox.v1.Envelope: ${(err as Error).message}. ` +
          "Fix: consume raw values without `envelope: true`, or check the relay's --value-format for this topic",
        { cause: err },
      );
    }
  }
  const eventId = envelope?.eventId || headers[HEADER.id];
  if (eventId === undefined || !UUID.test(eventId)) {
    throw new InboxError(
      `message ${where} carries no event id (${eventId === undefined ? 'no' : `invalid: ${JSON.stringify(eventId)}`} \`id\` header${envelope ? ' or Envelope event_id' : ''}), so it cannot be deduplicated. ` +
        'Fix: produce it through the outbox relay (which always sets `id`), or handle this topic without the inbox',
    );
  }
  return {
    eventId,
    topic: p.topic,
    partition: p.partition,
    offset: p.message.offset,
    key: p.message.key?.toString() ?? null,
    payload: envelope
      ? Buffer.from(envelope.payload.buffer, envelope.payload.byteOffset, envelope.payload.byteLength)
      : p.message.value,
    headers,
    envelope,
  };
}
