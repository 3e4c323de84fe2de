import type { Classified } from '../errors.ts';
import type { OutboundMessage } from '../route/event.ts';
import type { ExactlyOnceProgress, PublishOptions, Sink } from './sink.ts';

/**
 * One publish at a time across the stream and the sweeper: kafkajs' idempotent
 * producer numbers a partition's batches when a send starts, so two concurrent sends
 * could be numbered alike (one dropped as a "duplicate") or land out of order.
 */
export class SerializedSink implements Sink {
  readonly name: string;
  readonly abandonStart?: () => void;
  /** The inner sink's (a webhook URL, a stream, a queue, an exchange), where it names one. */
  readonly destinationOf?: (m: OutboundMessage) => string;
  readonly #inner: Sink;
  #tail: Promise<unknown> = Promise.resolve();

  readonly exactlyOnce?: ExactlyOnceProgress;

  constructor(inner: Sink) {
    this.#inner = inner;
    this.name = inner.name;
    // Only where the inner sink has one (the relay's message says whether clients were dropped).
    if (inner.abandonStart) this.abandonStart = () => inner.abandonStart?.();
    if (inner.destinationOf) this.destinationOf = (m) => inner.destinationOf!(m);
    const eo = inner.exactlyOnce;
    // Reading Kafka's progress may replace the transactional producer: never beside a publish.
    if (eo)
      this.exactlyOnce = {
        committed: () => this.#serial(() => eo.committed()),
        recorded: (ids) => eo.recorded(ids),
        timeline: (key) => eo.timeline(key),
        fenced: () => eo.fenced(),
        counts: () => eo.counts(),
      };
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(f);
    this.#tail = run.catch(() => {});
    return run;
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  publish(batch: readonly OutboundMessage[], opts?: PublishOptions): Promise<void> {
    return this.#serial(() => this.#inner.publish(batch, opts));
  }

  classify(e: unknown): Classified {
    return this.#inner.classify(e);
  }

  stop(): Promise<void> {
    return this.#inner.stop();
  }
}
