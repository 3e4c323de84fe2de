/**
 * The body of a batched webhook (--http-batch-size > 1): a JSON array, one object per event in
 * stream order (docs/sinks.md, "HTTP webhooks"):
 *
 *   {"id": event id, "topic", "type": event type, "aggregate_type", "aggregate_id",
 *    "timestamp": the row's created_at (ISO 8601), "headers": {the event's headers},
 *    "content_type", and the value as one of
 *    "data": <the value itself> when it is JSON (its content type says json and it parses),
 *    "data_base64": "<base64 of the value>" otherwise, or "data": null (a null value)}
 *
 * A JSON value is copied byte for byte, not re-serialised: the receiver reads the row's bytes.
 * The request's `webhook-id` is `batch_` + a hash of the event ids: the same events sent again
 * carry the same id, another cut of them (the relay halving a refused batch) another one —
 * receivers deduplicate by each element's `id`.
 */
import { isUtf8 } from 'node:buffer';
import { createHash } from 'node:crypto';
import type { OutboundMessage } from '../../route/event.ts';

export function batchId(messages: readonly OutboundMessage[]): string {
  const h = createHash('sha256');
  for (const m of messages) h.update(m.event.eventId).update('\n');
  return `batch_${h.digest('base64url').slice(0, 32)}`;
}

export function batchBody(messages: readonly OutboundMessage[]): Buffer {
  const parts: Buffer[] = [Buffer.from('[')];
  messages.forEach((m, i) => {
    const e = m.event;
    const contentType = m.headers['content-type'] ?? e.contentType;
    const head = JSON.stringify({
      id: e.eventId,
      topic: m.topic,
      type: e.eventType,
      aggregate_type: e.aggregateType,
      aggregate_id: e.aggregateId,
      timestamp: new Date(m.timestamp).toISOString(),
      headers: m.headers,
      content_type: contentType,
    });
    // `head` ends with '}': the value goes in before it.
    parts.push(Buffer.from(`${i === 0 ? '' : ','}${head.slice(0, -1)},`));
    if (m.value === null) parts.push(Buffer.from('"data":null}'));
    else if (isJson(contentType, m.value)) parts.push(Buffer.from('"data":'), m.value, Buffer.from('}'));
    else parts.push(Buffer.from(`"data_base64":${JSON.stringify(m.value.toString('base64'))}}`));
  });
  parts.push(Buffer.from(']'));
  return Buffer.concat(parts);
}

function isJson(contentType: string | undefined, value: Buffer): boolean {
  if (!contentType || !/json/i.test(contentType) || !isUtf8(value)) return false;
  try {
    JSON.parse(value.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}
