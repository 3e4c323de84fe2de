import type { Writable } from 'node:stream';
import { formatLsn } from '../replication/lsn.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Classified } from './kafka-errors.ts';
import type { Sink } from './sink.ts';

const TEXTUAL = /^(text\/|application\/(json|xml|yaml|x-ndjson|[a-z.+-]*\+(json|xml)))/i;

export function isTextual(contentType: string): boolean {
  return TEXTUAL.test(contentType);
}

/** isTextual per content type: a handful of distinct values, asked once per event. */
const textualCache = new Map<string, boolean>();

function textualCached(contentType: string): boolean {
  let t = textualCache.get(contentType);
  if (t === undefined) {
    t = isTextual(contentType);
    if (textualCache.size < 1000) textualCache.set(contentType, t);
  }
  return t;
}

/**
 * One NDJSON line: value as UTF-8 when the message's content type is textual, else base64.
 * Built by hand, with the same keys in the same order as JSON.stringify of the object would give:
 * base64, the ISO timestamp, the id and the LSN need no escaping, every other string is
 * JSON.stringify'd on its own.
 */
export function toJsonLine(m: OutboundMessage): string {
  // The message's content type, not the row's: an envelope-protobuf value is binary whatever the payload.
  const textual = textualCached(m.headers['content-type'] ?? m.event.contentType);
  const v = m.value;
  const value =
    v === null
      ? 'null,"value_encoding":null'
      : textual
        ? `${JSON.stringify(v.toString('utf8'))},"value_encoding":"utf8"`
        : `"${v.toString('base64')}","value_encoding":"base64"`;
  return `{"topic":${JSON.stringify(m.topic)},"key":${JSON.stringify(m.key)},"headers":${JSON.stringify(m.headers)},"value":${value},"timestamp":"${new Date(m.timestamp).toISOString()}","event_id":${JSON.stringify(m.event.eventId)},"id":${JSON.stringify(m.event.id)},"lsn":"${formatLsn(m.event.lsn)}"}`;
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
