/**
 * The queue of an event: --sqs-queue-url-template with {topic}, {aggregate_type} and
 * {event_type} filled in. Pure. A filled-in value is URL-encoded, so a hostile aggregate type
 * cannot leave the queue's path (SQS then refuses the queue: a permanent failure of the event).
 */
import type { OutboundMessage } from '../../route/event.ts';

const PLACEHOLDER = /\{([^{}]*)\}/g;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const KNOWN = new Set(['topic', 'aggregate_type', 'event_type']);

/** null, or why the template is not a usable queue URL template. */
export function checkQueueUrlTemplate(template: string): string | null {
  for (const m of template.matchAll(PLACEHOLDER))
    if (!KNOWN.has(m[1]!))
      return `unknown placeholder {${m[1]}} (known: {topic}, {aggregate_type}, {event_type})`;
  let u: URL;
  try {
    u = new URL(template.replace(PLACEHOLDER, 'x'));
  } catch {
    return 'not a URL: give the queue URL as SQS shows it (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must start with https:// (or http://)';
  if (u.pathname.split('/').filter(Boolean).length !== 2)
    return 'the path must be /ACCOUNT_ID/QUEUE_NAME (https://sqs.REGION.amazonaws.com/123456789012/orders.fifo)';
  return null;
}

export function queueUrlFor(template: string, m: Pick<OutboundMessage, 'topic' | 'event'>): string {
  if (!template.includes('{')) return template;
  return template.replace(PLACEHOLDER, (_, name: string) =>
    // A lone surrogate would make encodeURIComponent throw: replaced by U+FFFD.
    encodeURIComponent(
      (name === 'topic'
        ? m.topic
        : name === 'aggregate_type'
          ? m.event.aggregateType
          : m.event.eventType
      ).replace(LONE_SURROGATE, '\uFFFD'),
    ),
  );
}

export const isFifo = (queueUrl: string): boolean => queueUrl.endsWith('.fifo');
