import type { Writable } from 'node:stream';
import type { Classified } from '../errors.ts';
import type { OutboundMessage } from '../route/event.ts';
import { encodeLines } from './ndjson.ts';
import type { Sink } from './sink.ts';

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
    const lines = encodeLines(batch);
    return new Promise((resolve, reject) => {
      this.#out.write(lines, (err) => (err ? reject(err) : resolve()));
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
