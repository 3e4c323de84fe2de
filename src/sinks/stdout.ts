import type { Writable } from 'node:stream';
import { formatLsn } from '../replication/lsn.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Classified } from './kafka-errors.ts';
import type { Sink } from './sink.ts';

const TEXTUAL = /^(text\/|application\/(json|xml|yaml|x-ndjson|[a-z.+-]*\+(json|xml)))/i;

export function isTextual(contentType: string): boolean {
  return TEXTUAL.test(contentType);
}

/** One NDJSON line: value as UTF-8 when the message's content type is textual, else base64. */
export function toJsonLine(m: OutboundMessage): string {
  // The message's content type, not the row's: an envelope-protobuf value is binary whatever the payload.
  const textual = isTextual(m.headers['content-type'] ?? m.event.contentType);
  return JSON.stringify({
    topic: m.topic,
    key: m.key,
    headers: m.headers,
    value: m.value === null ? null : textual ? m.value.toString('utf8') : m.value.toString('base64'),
    value_encoding: m.value === null ? null : textual ? 'utf8' : 'base64',
    timestamp: new Date(m.timestamp).toISOString(),
    event_id: m.event.eventId,
    id: m.event.id,
    lsn: formatLsn(m.event.lsn),
  });
}

/**
 * Writes each event as a line of NDJSON. An event counts as acknowledged once its line
 * has been handed to the OS (the write callback fired). For the demo and for piping.
 */
export class StdoutSink implements Sink {
  readonly name = 'stdout';
  readonly #out: Writable;

  constructor(out: Writable = process.stdout) {
    this.#out = out;
  }

  async start(): Promise<void> {}

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    let text = '';
    for (const m of batch) text += `${toJsonLine(m)}\n`;
    return new Promise((resolve, reject) => {
      this.#out.write(text, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** A failed write to stdout is never the event's fault: always transient. */
  classify(e: unknown): Classified {
    return {
      class: 'transient',
      reason: (e as { code?: string }).code ?? 'WRITE_FAILED',
      message: String(e),
    };
  }

  async stop(): Promise<void> {}
}
