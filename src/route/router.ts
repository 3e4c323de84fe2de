import type { OutboundMessage, OutboxEvent } from './event.ts';
import { encodeValue, type ValueFormat, valueFormatFor } from './value-format.ts';

export interface RouteConfig {
  /** Topic template; placeholders {aggregate_type} and {event_type}. */
  topicTemplate: string;
  /** Per-aggregate-type topic (a template too), overriding topicTemplate. */
  topicOverrides: Record<string, string>;
  /** What the message value holds (docs/envelope.md); default raw. */
  valueFormat?: ValueFormat;
  /** Per-aggregate-type value format, overriding valueFormat. */
  valueFormatOverrides?: Record<string, ValueFormat>;
}

/** The routing part of the relay's configuration. */
export function routeConfigOf(c: RouteConfig): RouteConfig {
  return {
    topicTemplate: c.topicTemplate,
    topicOverrides: c.topicOverrides,
    valueFormat: c.valueFormat ?? 'raw',
    valueFormatOverrides: c.valueFormatOverrides ?? {},
  };
}

export const DEFAULT_TOPIC_TEMPLATE = 'outbox.event.{aggregate_type}';

/** Raised when a row cannot be routed: permanent for that event (it will not route better on retry). */
export class RouteError extends Error {
  override name = 'RouteError';
}

const PLACEHOLDER = /\{([a-z_]+)\}/g;
const KNOWN_PLACEHOLDERS = new Set(['aggregate_type', 'event_type']);
const LEGAL_TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

/** Validates a template at config time, so a typo fails at start and not per event. */
export function checkTopicTemplate(template: string): string | null {
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (!KNOWN_PLACEHOLDERS.has(m[1]!)) {
      return `unknown placeholder {${m[1]}} (known: {aggregate_type}, {event_type})`;
    }
  }
  const literal = template.replace(PLACEHOLDER, 'x');
  if (!LEGAL_TOPIC.test(literal)) {
    return 'a topic may hold only letters, digits, ".", "_" and "-", at most 249 characters';
  }
  return null;
}

export function topicFor(event: Pick<OutboxEvent, 'aggregateType' | 'eventType'>, cfg: RouteConfig): string {
  if (event.aggregateType === '') throw new RouteError('aggregate_type is empty: no topic can be chosen');
  const template = cfg.topicOverrides[event.aggregateType] ?? cfg.topicTemplate;
  const topic = template.replace(PLACEHOLDER, (_, name: string) =>
    name === 'aggregate_type' ? event.aggregateType : event.eventType,
  );
  if (!LEGAL_TOPIC.test(topic) || topic === '.' || topic === '..') {
    throw new RouteError(
      `topic ${JSON.stringify(topic)} (from aggregate_type ${JSON.stringify(event.aggregateType)}) is not a legal Kafka topic name; add a --topic-override for this aggregate type`,
    );
  }
  return topic;
}

/**
 * Header names written by the relay. They win over same-named entries of the row's
 * `headers` column, so a producer cannot forge the identity a consumer deduplicates on.
 * Names match Debezium's outbox event router where it has one (`id`).
 */
export const HEADER = {
  id: 'id',
  eventType: 'event_type',
  aggregateType: 'aggregate_type',
  aggregateId: 'aggregate_id',
  contentType: 'content-type',
  traceparent: 'traceparent',
} as const;

/** Pure: turns a decoded row into the message a sink publishes. */
export function route(event: OutboxEvent, cfg: RouteConfig): OutboundMessage {
  const topic = topicFor(event, cfg);
  const format = valueFormatFor(
    event.aggregateType,
    cfg.valueFormat ?? 'raw',
    cfg.valueFormatOverrides ?? {},
  );
  let encoded: ReturnType<typeof encodeValue>;
  try {
    encoded = encodeValue(event, format);
  } catch (e) {
    throw new RouteError(
      `the ${format} value cannot be encoded: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  const headers: Record<string, string> = {};
  let bytes = 0;
  for (const [k, v] of Object.entries(event.headers)) {
    if (typeof v === 'string') {
      headers[k] = v;
      bytes += k.length + v.length;
    }
  }
  headers[HEADER.id] = event.eventId;
  headers[HEADER.eventType] = event.eventType;
  headers[HEADER.aggregateType] = event.aggregateType;
  headers[HEADER.aggregateId] = event.aggregateId;
  headers[HEADER.contentType] = encoded.contentType;
  if (event.traceparent) headers[HEADER.traceparent] = event.traceparent;
  bytes += 160 + event.eventId.length + event.eventType.length + event.aggregateId.length * 2;
  bytes += encoded.value?.length ?? 0;
  return {
    topic,
    key: event.aggregateId,
    value: encoded.value,
    headers,
    timestamp: event.createdAt.getTime(),
    event,
    bytes,
  };
}

/** route(), with an unroutable row as a value: its reason, permanent for that event. */
export function tryRoute(
  event: OutboxEvent,
  cfg: RouteConfig,
): { message: OutboundMessage } | { error: string } {
  try {
    return { message: route(event, cfg) };
  } catch (e) {
    if (!(e instanceof RouteError)) throw e;
    return { error: e.message };
  }
}
