import type { OutboundMessage, OutboxEvent } from './event.ts';
import { checkEvent, hasNotUtf8Value, quote } from './row-check.ts';
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
  /**
   * A preset's own routing (compat/preset.ts PresetSession.route; e.g. records as Debezium's
   * EventRouter writes them), instead of the outbox table's. Throws a RouteError for a row it cannot route.
   */
  presetRoute?: (event: OutboxEvent) => OutboundMessage;
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

/**
 * Why a row cannot become a message; permanent for that event (it will not route better on retry):
 * ROUTE (no legal topic), ROW_INVALID (a column's value breaks the table's contract),
 * ROW_UNEXPECTED (anything else thrown on the way, e.g. by an encoder).
 */
export type RouteReason = 'ROUTE' | 'ROW_INVALID' | 'ROW_ENCODING' | 'ROW_UNEXPECTED';

/** Raised when a row cannot be routed: permanent for that event (it will not route better on retry). */
export class RouteError extends Error {
  override name = 'RouteError';
  readonly reason: RouteReason;

  constructor(message: string, reason: RouteReason = 'ROUTE') {
    super(message);
    this.reason = reason;
  }
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
  if (event.aggregateType === '')
    throw new RouteError(
      "aggregate_type is empty: no topic can be chosen. Fix: set it on the row and `outbox-relay events resend <id>` (or discard it); restore the CHECK (aggregate_type <> '') of docs/outbox-table.md",
    );
  // hasOwn: an aggregate type named "constructor" or "__proto__" must not pick up Object.prototype's.
  const template = Object.hasOwn(cfg.topicOverrides, event.aggregateType)
    ? cfg.topicOverrides[event.aggregateType]!
    : cfg.topicTemplate;
  // A topic is a pure function of the template, the aggregate type and (when the template names
  // it) the event type; the same few recur for every event, so legal ones are remembered.
  let byAggregate = topicCache.get(template);
  if (!byAggregate) topicCache.set(template, (byAggregate = new Map()));
  let byEventType = byAggregate.get(event.aggregateType);
  const eventType = template.includes('{event_type}') ? event.eventType : '';
  const cached = byEventType?.get(eventType);
  if (cached !== undefined) return cached;
  const topic = template.replace(PLACEHOLDER, (_, name: string) =>
    name === 'aggregate_type' ? event.aggregateType : event.eventType,
  );
  if (!LEGAL_TOPIC.test(topic) || topic === '.' || topic === '..') {
    throw new RouteError(
      `topic ${quote(topic)} (from aggregate_type ${quote(event.aggregateType)}) is not a legal Kafka topic name (letters, digits, ".", "_", "-", at most 249 characters). Fix: add a --topic-override for this aggregate type, then \`outbox-relay events resend <id>\` (or discard it)`,
    );
  }
  if (++cachedTopics > MAX_CACHED_TOPICS) {
    topicCache.clear();
    cachedTopics = 1;
    topicCache.set(template, (byAggregate = new Map()));
    byEventType = undefined;
  }
  if (!byEventType) byAggregate.set(event.aggregateType, (byEventType = new Map()));
  byEventType.set(eventType, topic);
  return topic;
}

/**
 * Legal topics by template, aggregate type and event type ('' when the template does not name
 * it); bounded, since rows are hostile input.
 */
const topicCache = new Map<string, Map<string, Map<string, string>>>();
const MAX_CACHED_TOPICS = 10_000;
let cachedTopics = 0;

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
  if (cfg.presetRoute) return cfg.presetRoute(event);
  const invalid = checkEvent(event);
  if (invalid) throw new RouteError(invalid, hasNotUtf8Value(event) ? 'ROW_ENCODING' : 'ROW_INVALID');
  const topic = topicFor(event, cfg);
  const format = valueFormatFor(
    event.aggregateType,
    cfg.valueFormat ?? 'raw',
    cfg.valueFormatOverrides ?? {},
  );
  let value: Buffer | null;
  let contentType: string;
  if (format === 'raw') {
    // encodeValue's raw case, without its result object (the per-event path of the default format).
    value = event.payload;
    contentType = event.contentType;
  } else {
    try {
      ({ value, contentType } = encodeValue(event, format));
    } catch (e) {
      throw new RouteError(
        `the ${format} value cannot be encoded: ${e instanceof Error ? e.message : String(e)}`,
        'ROW_INVALID',
      );
    }
  }
  // checkEvent made sure every value is a string. The row's own headers come first; the relay's
  // win over same-named ones. Without own headers (the usual case), one object literal.
  let headers: Record<string, string>;
  let bytes = 0;
  let own = false;
  for (const _ in event.headers) {
    own = true;
    break;
  }
  if (own) {
    headers = {};
    for (const k in event.headers) {
      if (!Object.hasOwn(event.headers, k)) continue;
      const v = event.headers[k] as string;
      headers[k] = v;
      bytes += k.length + v.length;
    }
    headers[HEADER.id] = event.eventId;
    headers[HEADER.eventType] = event.eventType;
    headers[HEADER.aggregateType] = event.aggregateType;
    headers[HEADER.aggregateId] = event.aggregateId;
    headers[HEADER.contentType] = contentType;
  }
  // HEADER's names, written out: a literal of constant keys is V8's fastest object.
  else
    headers = {
      id: event.eventId,
      event_type: event.eventType,
      aggregate_type: event.aggregateType,
      aggregate_id: event.aggregateId,
      'content-type': contentType,
    };
  if (event.traceparent) headers[HEADER.traceparent] = event.traceparent;
  bytes += 160 + event.eventId.length + event.eventType.length + event.aggregateId.length * 2;
  bytes += value?.length ?? 0;
  return {
    topic,
    key: event.aggregateId,
    value,
    headers,
    timestamp: event.createdAt.getTime(),
    event,
    bytes,
  };
}

/** Why a row cannot become a message (routeEvent's value for it): permanent for that event. */
export class RouteFailure {
  readonly error: string;
  readonly reason: RouteReason;

  constructor(error: string, reason: RouteReason) {
    this.error = error;
    this.reason = reason;
  }
}

/**
 * route(), with an unroutable row as a value: a RouteFailure with its reason, permanent for that
 * event. The exception boundary of the per-event path: whatever a row holds, this never throws —
 * a crash on a row would be a crash loop, since the slot sends the row again. The message itself
 * otherwise (no wrapper object per event).
 */
export function routeEvent(event: OutboxEvent, cfg: RouteConfig): OutboundMessage | RouteFailure {
  try {
    return route(event, cfg);
  } catch (e) {
    if (e instanceof RouteError) return new RouteFailure(e.message, e.reason);
    const text = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    return new RouteFailure(
      `the row cannot be turned into a message (${text.slice(0, 500)}). Fix: check the row's values against docs/outbox-table.md, correct the row and \`outbox-relay events resend <id>\` (or discard it); report it if the values look valid`,
      'ROW_UNEXPECTED',
    );
  }
}

/** routeEvent's result as `{ message }` or `{ error, reason }` (the sweeper's and slot recovery's form). */
export function tryRoute(
  event: OutboxEvent,
  cfg: RouteConfig,
): { message: OutboundMessage } | { error: string; reason: RouteReason } {
  const r = routeEvent(event, cfg);
  return r instanceof RouteFailure ? { error: r.error, reason: r.reason } : { message: r };
}
