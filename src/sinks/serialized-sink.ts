import type { Classified } from '../errors.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { Sink } from './sink.ts';

/**
 * One publish at a time across the stream and the sweeper: kafkajs' idempotent
 * producer numbers a partition's batches when a send starts, so two concurrent sends
 * could be numbered alike (one dropped as a "duplicate") or land out of order.
 */
export class SerializedSink implements Sink {
  readonly name: string;
  readonly #inner: Sink;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(inner: Sink) {
    this.#inner = inner;
    this.name = inner.name;
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#inner.publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  classify(e: unknown): Classified {
    return this.#inner.classify(e);
  }

  stop(): Promise<void> {
    return this.#inner.stop();
  }
}
