import type { Config } from '../config/load.ts';
import type { OutcomeDeps } from '../outcome/outcome.ts';
import type { Sink } from '../sinks/sink.ts';
import type { BatchQueue, DeliveryMode, Queued } from './mode.ts';

/**
 * At-least-once (every sink): batches are cut by size alone, regardless of commits; PostgreSQL's
 * progress record is the only record of what was published, so a crash between the broker's
 * acknowledgement and that record publishes those events again (duplicates, never losses).
 */
export class AtLeastOnce implements DeliveryMode {
  readonly name = 'at-least-once';
  readonly retryHeaders = {};
  readonly #c: Pick<Config, 'batchSize' | 'batchBytes'>;

  constructor(config: Pick<Config, 'batchSize' | 'batchBytes'>) {
    this.#c = config;
  }

  streamSink(sink: Sink): OutcomeDeps['sink'] {
    // The stream's own attempts: a destination just found missing is refused without asking again.
    return streamPublishes(sink, { stream: true });
  }

  async nextBatch<T extends Queued>(queue: BatchQueue<T>): Promise<T[]> {
    return queue.take(this.#c.batchSize, this.#c.batchBytes);
  }

  committed(): void {}
  recorded(): void {}
  async sync(): Promise<void> {}
  streamStarted(): null {
    return null;
  }
  fatal(): null {
    return null;
  }
}

/** `sink` publishing every batch with `opts`. */
export function streamPublishes(sink: Sink, opts: Parameters<Sink['publish']>[1]): OutcomeDeps['sink'] {
  return {
    publish: (b) => sink.publish(b, opts),
    classify: (e) => sink.classify(e),
    ...(sink.destinationOf ? { destinationOf: (m) => sink.destinationOf!(m) } : {}),
  };
}
