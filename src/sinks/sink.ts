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
  /** `opts.progress`: the batch is the stream's (exactly-once: its ids join the slot's Kafka progress). */
  publish(batch: readonly OutboundMessage[], opts?: PublishOptions): Promise<void>;
  /** Permanent (this message cannot be published as it is) or transient (retry). */
  classify(e: unknown): Classified;
  /**
   * What a destination-wide refusal (Classified.destinationWide) refers to for this message: the
   * topic when absent (Kafka, NATS: the subject); RabbitMQ: the exchange.
   */
  destinationOf?(m: OutboundMessage): string;
  stop(): Promise<void>;
  /**
   * The relay gave up waiting for start() (--sink-start-timeout-ms): drop the clients the start
   * may hang on, so that the next start() connects afresh. The abandoned start may still settle
   * later; it must not leave state the next start trusts. Sinks whose start cannot hang (each
   * step bounded by its own timeout: NATS, RabbitMQ, SQS; HTTP opens nothing) need none
   * (test/integration/frozen-start.test.ts).
   */
  abandonStart?(): void;
  /** Present in exactly-once mode only (Kafka transactions: docs/delivery.md). */
  readonly exactlyOnce?: ExactlyOnceProgress;
}

export interface PublishOptions {
  /** The stream's batch: exactly-once keeps its ids in the slot's Kafka progress record until PostgreSQL records them. */
  progress?: boolean;
  /**
   * The stream's first attempt of these events (not a sweeper's retry): a destination found
   * missing less than a second ago may be refused without asking again (src/sinks/kafka/missing-topics.ts).
   */
  stream?: boolean;
}

/** The slot's progress as Kafka holds it, committed in the same transactions as the events. */
export interface ExactlyOnceProgress {
  /**
   * The outbox ids Kafka's latest committed progress record covers (int8multirange text),
   * read read_committed after fencing every older producer. Rejects with PRODUCER_FENCED when
   * another relay wrote it since this one's last commit.
   */
  committed(): Promise<{ published: string; timeline: string | null }>;
  /**
   * The database timeline (store/timeline.ts) of the ids published from now on, written into each
   * progress record. A change forgets the ids not yet recorded: they name rows of the old timeline.
   */
  timeline(key: string): void;
  /** Ids PostgreSQL's progress record now holds ('all': every id committed so far). */
  recorded(ids: readonly string[] | 'all'): void;
  /** The PRODUCER_FENCED error once this relay was fenced (it never publishes again), else null. */
  fenced(): Error | null;
  /** Counts so far, for the metrics: transactions committed, producers replaced, progress topic losses. */
  counts(): ExactlyOnceCounts;
}

export interface ExactlyOnceCounts {
  commits: number;
  replacements: number;
  /** Each a window in which a restart would publish again what PostgreSQL had not recorded yet. */
  progressTopicLosses: number;
}
