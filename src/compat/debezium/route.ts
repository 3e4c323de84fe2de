import type { OutboundMessage, OutboxEvent } from '../../route/event.ts';
import { type DebeziumRecord, debeziumRecord, type RouterState, type TableColumn } from './event-router.ts';
import type { DebeziumRouting } from './event-router-options.ts';

/** What the Debezium preset routes with: its options, the table's columns (from the catalog at stream start). */
export interface DebeziumRoute {
  routing: DebeziumRouting;
  table: { schema: string; table: string };
  columns: ReadonlyMap<string, TableColumn>;
  state: RouterState;
}

const LEGAL_TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

/**
 * The preset's message for a streamed row (event.columns). The key and header values are the
 * converters' bytes as text (String and Json converters write UTF-8); a NULL key stays null and a
 * repeated header name becomes an array, which kafkajs writes as such (the preset is Kafka only).
 * Throws an Error naming the problem; the router makes it the event's permanent failure.
 */
export function routeDebezium(event: OutboxEvent, d: DebeziumRoute): OutboundMessage {
  if (!event.columns)
    throw new Error('the row was not read as columns (the Debezium preset streams text values)');
  const r = debeziumRecord(event.columns, d.columns, d.routing, d.table, d.state);
  if (!LEGAL_TOPIC.test(r.topic) || r.topic === '.' || r.topic === '..')
    throw new Error(
      `topic ${JSON.stringify(r.topic)} is not a legal Kafka topic name (route.topic.regex / route.topic.replacement)`,
    );
  return messageOf(r, event);
}

export function messageOf(r: DebeziumRecord, event: OutboxEvent): OutboundMessage {
  const headers: Record<string, string | null | string[]> = {};
  let bytes = 160 + (r.key?.length ?? 0) + (r.value?.length ?? 0);
  for (const [name, value] of r.headers) {
    const text = value === null ? null : value.toString('utf8');
    bytes += name.length + (value?.length ?? 0);
    if (!Object.hasOwn(headers, name)) headers[name] = text;
    else {
      const before = headers[name];
      headers[name] = [...(Array.isArray(before) ? before : [before as string]), text as string];
    }
  }
  const m: OutboundMessage = {
    topic: r.topic,
    key: (r.key === null ? null : r.key.toString('utf8')) as string,
    value: r.value,
    headers: headers as Record<string, string>,
    timestamp: r.timestampMs ?? event.commitTimeMs,
    event,
    bytes,
  };
  if (r.partition !== undefined) m.partition = r.partition;
  return m;
}
