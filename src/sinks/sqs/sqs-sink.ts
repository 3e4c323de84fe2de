import {
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { Config } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { type LaneDone, sendInLanes } from '../key-lanes.ts';
import type { Sink } from '../sink.ts';
import { isFifo, queueUrlFor } from './queue-url.ts';
import { classifySqsError, SqsSinkError } from './sqs-errors.ts';
import { type PreparedEntry, prepareEntry } from './sqs-message.ts';

export type SqsSinkConfig = Pick<
  Config,
  | 'sqsQueueUrlTemplate'
  | 'sqsRegion'
  | 'sqsEndpoint'
  | 'sqsMaxInFlight'
  | 'sqsTimeoutMs'
  | 'sqsMaxMessageBytes'
>;

/** SendMessageBatch takes at most 10 entries. */
const BATCH_ENTRIES = 10;

interface Item {
  m: OutboundMessage;
  url: string;
  prepared: PreparedEntry | SqsSinkError;
}

/** Entries waiting for their request, one queue's. */
interface Pending {
  entries: SendMessageBatchRequestEntry[];
  dones: LaneDone[];
  ids: string[];
  bytes: number;
}

/**
 * Amazon SQS through @aws-sdk/client-sqs: SendMessageBatch requests of up to 10 entries and at
 * most --sqs-max-message-bytes, to the queue from --sqs-queue-url-template. SQS answers per
 * entry: an entry in `Failed` is that event's outcome (SenderFault: permanent, ENTRY_REFUSED;
 * the server's fault: transient), the others of the request are stored. Credentials come from
 * the SDK's default chain. The SDK's own retries are off (maxAttempts 1): a failed request is the
 * relay's to retry, with its back-off, and nothing past it is confirmed.
 *
 * FIFO queues (URL ending .fifo): MessageGroupId = the aggregate id (the key), and
 * MessageDeduplicationId = the event id, so a re-send within SQS's 5-minute window is not stored
 * twice. Standard queues have no order and may deliver a message twice.
 *
 * Ordering. A batch request holds at most one message per key and queue, and a key's next
 * message leaves only once the previous one is stored (src/sinks/key-lanes.ts): SQS stores a
 * batch's entries independently, so a refused entry n followed by a stored n+1 of the same key
 * would come back after it. Different keys share the requests (--sqs-max-in-flight of them).
 */
export class SqsSink implements Sink {
  readonly name = 'sqs';
  readonly #c: SqsSinkConfig;
  readonly #log: Logger;
  readonly #client: SQSClient;
  #tail: Promise<unknown> = Promise.resolve();

  constructor(c: SqsSinkConfig, log: Logger) {
    this.#c = c;
    this.#log = log.child({ component: 'sqs' });
    this.#client = new SQSClient({
      ...(c.sqsRegion ? { region: c.sqsRegion } : {}),
      ...(c.sqsEndpoint ? { endpoint: c.sqsEndpoint } : {}),
      maxAttempts: 1,
      requestHandler: { requestTimeout: c.sqsTimeoutMs, connectionTimeout: c.sqsTimeoutMs },
    });
  }

  /**
   * Preflight: a region is known, and a literal queue URL answers (templated ones are checked at
   * first use: a missing queue then fails its events permanently). Warns when the queue takes less
   * than --sqs-max-message-bytes.
   */
  async start(): Promise<void> {
    try {
      await this.#client.config.region();
    } catch (e) {
      throw new Error(
        `no AWS region for SQS: set --sqs-region (SQS_REGION) or AWS_REGION (${(e as Error).message})`,
        { cause: e },
      );
    }
    const t = this.#c.sqsQueueUrlTemplate!;
    if (!t.includes('{')) await this.checkQueue(t);
  }

  /** The queue's attributes (FifoQueue, MaximumMessageSize); rejects as SQS does when it is missing. */
  async checkQueue(url: string): Promise<{ fifo: boolean; maximumMessageSize: number }> {
    const r = await this.#client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['FifoQueue', 'MaximumMessageSize'] }),
      { abortSignal: AbortSignal.timeout(this.#c.sqsTimeoutMs) },
    );
    const fifo = r.Attributes?.FifoQueue === 'true';
    const maximumMessageSize = Number(r.Attributes?.MaximumMessageSize ?? 262144);
    if (maximumMessageSize < this.#c.sqsMaxMessageBytes)
      this.#log.warn(
        { queue: url, maximumMessageSize, sqsMaxMessageBytes: this.#c.sqsMaxMessageBytes },
        'the queue takes smaller messages than --sqs-max-message-bytes: larger ones will be refused by SQS',
      );
    return { fifo, maximumMessageSize };
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[]): Promise<void> {
    const max = this.#c.sqsMaxMessageBytes;
    const items: Item[] = batch.map((m) => {
      const url = this.destinationOf(m);
      return { m, url, prepared: prepareEntry(m, isFifo(url), max) };
    });
    // Entries started in one turn of the lanes' pump go together, per queue, in requests of at
    // most 10 entries and `max` bytes; a queue's entries are sent when a request is full or at the
    // end of the turn (a microtask).
    const pending = new Map<string, Pending>();
    let flushScheduled = false;
    const flushAll = () => {
      flushScheduled = false;
      for (const [url, p] of pending) this.#send(url, p);
      pending.clear();
    };
    const failures = await sendInLanes(
      items,
      (it) => `${it.url}\u0000${it.m.key}`,
      this.#c.sqsMaxInFlight * BATCH_ENTRIES,
      (it, done) => {
        const p0 = it.prepared;
        if (p0 instanceof SqsSinkError) {
          done(p0);
          return;
        }
        let p = pending.get(it.url);
        if (p && (p.entries.length === BATCH_ENTRIES || p.bytes + p0.bytes > max)) {
          pending.delete(it.url);
          this.#send(it.url, p);
          p = undefined;
        }
        if (!p) pending.set(it.url, (p = { entries: [], dones: [], ids: [], bytes: 0 }));
        p.entries.push({ Id: String(p.entries.length), ...p0.entry });
        p.dones.push(done);
        p.ids.push(it.m.event.eventId);
        p.bytes += p0.bytes;
        if (!flushScheduled) {
          flushScheduled = true;
          queueMicrotask(flushAll);
        }
      },
    );
    if (failures.length === 0) return;
    const first = failures.find((f) => this.classify(f.error).class === 'permanent') ?? failures[0]!;
    throw first.error;
  }

  /** One SendMessageBatch; each entry's `done` with its own outcome. */
  #send(url: string, p: Pending): void {
    this.#client
      .send(new SendMessageBatchCommand({ QueueUrl: url, Entries: p.entries }), {
        abortSignal: AbortSignal.timeout(this.#c.sqsTimeoutMs),
      })
      .then(
        (r) => {
          const failed = new Map((r.Failed ?? []).map((f) => [f.Id, f]));
          const stored = new Set((r.Successful ?? []).map((s) => s.Id));
          for (let i = 0; i < p.dones.length; i++) {
            const id = String(i);
            const f = failed.get(id);
            if (f) {
              const code = f.Code ?? 'UNKNOWN';
              p.dones[i]!(
                new SqsSinkError(
                  f.SenderFault ? 'ENTRY_REFUSED' : 'ENTRY_FAILED',
                  `SQS refused event ${p.ids[i]} for ${url}: ${code}${f.Message ? ` (${f.Message})` : ''}`,
                  { awsCode: code },
                ),
              );
            } else if (stored.has(id)) p.dones[i]!();
            else p.dones[i]!(new SqsSinkError('ENTRY_FAILED', `SQS answered nothing for event ${p.ids[i]}`));
          }
        },
        (e: unknown) => {
          for (const done of p.dones) done(e);
        },
      );
  }

  classify(e: unknown): Classified {
    return classifySqsError(e);
  }

  /** A destination-wide refusal (no such queue, access denied) is the queue's. */
  destinationOf(m: OutboundMessage): string {
    return queueUrlFor(this.#c.sqsQueueUrlTemplate!, m);
  }

  async stop(): Promise<void> {
    await this.#tail;
    this.#client.destroy();
  }
}
