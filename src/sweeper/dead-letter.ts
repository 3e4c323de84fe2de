import type { Classified } from '../errors.ts';
import type { OutboundMessage, OutboxEvent } from '../route/event.ts';
import { type RouteConfig, route } from '../route/router.ts';

/**
 * The copy of a dead event on the dead-letter topic: same key, value (in the event's value
 * format) and headers, plus why.
 */
export function dlqMessage(
  e: OutboxEvent,
  dlqTopic: string,
  originalTopic: string,
  attempts: number,
  error: Classified,
  routing: Pick<RouteConfig, 'valueFormat' | 'valueFormatOverrides'> = {},
  now = new Date(),
): OutboundMessage {
  // The DLQ topic is a literal name (checked at start), so routing to it cannot fail.
  const m = route(e, { ...routing, topicTemplate: dlqTopic, topicOverrides: {} });
  return withWhy(m, originalTopic, attempts, error, now);
}

/**
 * The dead-letter copy of a record that is not routed from an outbox row (the Debezium preset's):
 * the record as routed — key, value, headers — on the dead-letter topic (its partitioner picks the
 * partition), plus why.
 */
export function dlqCopy(
  m: OutboundMessage,
  dlqTopic: string,
  attempts: number,
  error: Classified,
  now = new Date(),
): OutboundMessage {
  const { partition: _, ...copy } = m;
  return withWhy({ ...copy, topic: dlqTopic, headers: { ...m.headers } }, m.topic, attempts, error, now);
}

function withWhy(
  m: OutboundMessage,
  originalTopic: string,
  attempts: number,
  error: Classified,
  now: Date,
): OutboundMessage {
  m.headers['x-dlq-reason'] = `${error.reason}: ${error.message}`.slice(0, 1000);
  m.headers['x-dlq-attempts'] = String(attempts);
  m.headers['x-dlq-original-topic'] = originalTopic;
  m.headers['x-dlq-failed-at'] = now.toISOString();
  return m;
}
