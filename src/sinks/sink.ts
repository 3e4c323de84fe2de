import type { Classified } from '../errors.ts';
import type { OutboundMessage } from '../route/event.ts';

/**
 * Where events go. publish() resolves only once the destination acknowledged every
 * message of the batch (Kafka: acks = all); it rejects when any message may not have
 * been taken, and the relay then retries the whole batch (at-least-once).
 * Messages of one key must be delivered in the order given.
 */
export interface Sink {
  readonly name: string;
  start(): Promise<void>;
  publish(batch: readonly OutboundMessage[]): Promise<void>;
  /** Permanent (this message cannot be published as it is) or transient (retry). */
  classify(e: unknown): Classified;
  /**
   * What a destination-wide refusal (Classified.destinationWide) refers to for this message: the
   * topic when absent (Kafka, NATS: the subject); RabbitMQ: the exchange.
   */
  destinationOf?(m: OutboundMessage): string;
  stop(): Promise<void>;
}
