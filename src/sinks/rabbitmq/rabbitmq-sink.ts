import amqp, { type ChannelModel, type ConfirmChannel, type Message } from 'amqplib';
import type { Config } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import { within } from '../../retry/within.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { type LaneDone, sendInLanes } from '../key-lanes.ts';
import type { Sink } from '../sink.ts';
import { warnClassicQueues } from './management.ts';
import { classifyRabbitMqError, RabbitMqSinkError } from './rabbitmq-errors.ts';

export type RabbitMqSinkConfig = Pick<
  Config,
  | 'rabbitmqUrl'
  | 'rabbitmqExchange'
  | 'rabbitmqMaxUnconfirmed'
  | 'rabbitmqTimeoutMs'
  | 'rabbitmqManagementUrl'
>;

/** One connection and its confirm channel; replaced as a whole when either closes or hangs. */
interface Link {
  conn: ChannelModel;
  ch: ConfirmChannel;
  /** Why the server closed the channel or the connection, once it did. */
  closed: (Error & { channelLevel?: boolean }) | null;
  /** Messages awaiting their confirm, by message id: a basic.return marks the first unreturned one. */
  waiting: Map<string, Waiting[]>;
  /** Every message awaiting its confirm, for the timeout sweep. */
  unconfirmed: Set<Waiting>;
  /** Fails what waits past --rabbitmq-timeout-ms (one timer per link, not one per message). */
  sweep: NodeJS.Timeout | null;
}

interface Waiting {
  returned: Message | null;
  deadline: number;
  /** The confirm never came in time: this message fails with `e` (the link is abandoned). */
  expire: (e: RabbitMqSinkError) => void;
}

/**
 * RabbitMQ through amqplib, AMQP 0-9-1 with publisher confirms. Each event is one persistent
 * message (delivery mode 2) with message_id = the event id, the row's headers as AMQP headers,
 * published `mandatory` to the exchange from --rabbitmq-exchange (a template) with the event's
 * topic as routing key.
 *
 * A message counts as delivered when the broker confirms it (ack) and did not return it first: a
 * mandatory message no binding matches comes back (basic.return, 312 NO_ROUTE) before its ack —
 * RabbitMQ acks it too, and Debezium Server's sink, which sets no `mandatory`, loses it there.
 * Returned = UNROUTABLE, that event's permanent failure. A nack, a lost channel or connection, or
 * no confirm within --rabbitmq-timeout-ms: the batch is sent again, never skipped (duplicates
 * possible: consumers deduplicate by message_id).
 *
 * Ordering. RabbitMQ enqueues one channel's messages in the order they were published, but a
 * nacked message (a full queue with reject-publish) or one lost with its connection may be
 * followed by a stored later one. So at most one message per key (per exchange and routing key)
 * awaits its confirm (src/sinks/key-lanes.ts); other keys share --rabbitmq-max-unconfirmed.
 */
export class RabbitMqSink implements Sink {
  readonly name = 'rabbitmq';
  readonly #c: RabbitMqSinkConfig;
  readonly #log: Logger;
  #link: Link | null = null;
  #opening: Promise<Link> | null = null;
  /** Exchanges found to exist (a NO_EXCHANGE failure forgets its entry). */
  readonly #exchanges = new Set<string>();
  #tail: Promise<unknown> = Promise.resolve();

  constructor(c: RabbitMqSinkConfig, log: Logger) {
    this.#c = c;
    this.#log = log.child({ component: 'rabbitmq' });
  }

  /**
   * Preflight: the broker answers and a literal exchange exists (templated exchanges are checked at
   * first use); with --rabbitmq-management-url, a warning for each classic queue bound to it.
   */
  async start(): Promise<void> {
    await this.#open();
    const x = this.#c.rabbitmqExchange;
    if (x.includes('{')) return;
    await this.#checkExchange(x);
    const api = this.#c.rabbitmqManagementUrl;
    if (api) await warnClassicQueues(this.#log, api, this.#c.rabbitmqUrl!, x, this.#c.rabbitmqTimeoutMs);
  }

  #url(): string {
    const u = new URL(this.#c.rabbitmqUrl!);
    // Heartbeats notice a frozen or vanished broker even while nothing is published.
    if (!u.searchParams.has('heartbeat')) u.searchParams.set('heartbeat', '10');
    return u.toString();
  }

  #open(): Promise<Link> {
    if (this.#link && !this.#link.closed) return Promise.resolve(this.#link);
    this.#opening ??= (async () => {
      try {
        const conn = await withinRabbit(
          amqp.connect(this.#url(), { timeout: this.#c.rabbitmqTimeoutMs }),
          this.#c.rabbitmqTimeoutMs,
          'connect',
          (late) => void late.close().catch(() => {}),
        );
        const ch = await withinRabbit(
          conn.createConfirmChannel(),
          this.#c.rabbitmqTimeoutMs,
          'open a channel',
        ).catch((e: unknown) => {
          void conn.close().catch(() => {});
          throw e;
        });
        const link: Link = {
          conn,
          ch,
          closed: null,
          waiting: new Map(),
          unconfirmed: new Set(),
          sweep: null,
        };
        const closedBy = (channelLevel: boolean) => (e: Error) => {
          link.closed ??= Object.assign(e, { channelLevel });
          this.#log.warn({ err: e.message }, `RabbitMQ ${channelLevel ? 'channel' : 'connection'} closed`);
        };
        ch.on('error', closedBy(true));
        conn.on('error', closedBy(false));
        ch.on('close', () => {
          link.closed ??= Object.assign(new Error('channel closed'), { channelLevel: false });
          void conn.close().catch(() => {});
        });
        // A memory or disk alarm: the broker stops reading; confirms time out and are retried.
        conn.on('blocked', (reason: string) =>
          this.#log.warn({ reason }, 'RabbitMQ blocked this connection'),
        );
        conn.on('unblocked', () => this.#log.info('RabbitMQ unblocked this connection'));
        conn.on('close', () => {
          link.closed ??= Object.assign(new Error('connection closed'), { channelLevel: false });
        });
        ch.on('return', (m: Message) => {
          const list = link.waiting.get(String(m.properties.messageId));
          const entry = list?.find((w) => !w.returned);
          if (entry) entry.returned = m;
        });
        this.#link = link;
        return link;
      } finally {
        this.#opening = null;
      }
    })();
    return this.#opening;
  }

  /** Drops a link that hangs (a frozen broker): its late confirms can no longer be mistaken for new ones. */
  #abandon(link: Link, why: Error): void {
    link.closed ??= Object.assign(why, { channelLevel: false });
    if (this.#link === link) this.#link = null;
    void link.conn.close().catch(() => {});
  }

  /** checkExchange on a channel of its own: a missing exchange closes the channel that asked. */
  async #checkExchange(exchange: string): Promise<void> {
    if (exchange === '' || this.#exchanges.has(exchange)) return;
    const link = await this.#open();
    const ch = await withinRabbit(link.conn.createChannel(), this.#c.rabbitmqTimeoutMs, 'open a channel');
    ch.on('error', () => {});
    try {
      await withinRabbit(ch.checkExchange(exchange), this.#c.rabbitmqTimeoutMs, 'check the exchange');
      this.#exchanges.add(exchange);
    } catch (e) {
      if ((e as { code?: number }).code === 404)
        throw new RabbitMqSinkError(
          'NO_EXCHANGE',
          `exchange ${JSON.stringify(exchange)} does not exist: declare it (rabbitmqadmin declare exchange name=${exchange} type=topic durable=true) and bind queues to it, or fix --rabbitmq-exchange`,
          { cause: e },
        );
      throw e;
    } finally {
      void ch.close().catch(() => {});
    }
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[]): Promise<void> {
    const exchanges = batch.map((m) => exchangeFor(this.#c.rabbitmqExchange, m));
    for (const x of new Set(exchanges)) await this.#checkExchange(x);
    const link = await this.#open();
    const failures = await sendInLanes(
      batch.map((m, i) => ({ m, exchange: exchanges[i]! })),
      ({ m, exchange }) => `${exchange}\u0000${m.topic}\u0000${m.key}`,
      this.#c.rabbitmqMaxUnconfirmed,
      ({ m, exchange }, done) => this.#sendOne(link, exchange, m, done),
    );
    if (failures.length === 0) return;
    const first = failures.find((f) => this.classify(f.error).class === 'permanent') ?? failures[0]!;
    const reason = this.classify(first.error).reason;
    if (reason === 'NO_EXCHANGE' || reason === 'AMQP_404') this.#exchanges.delete(first.item.exchange);
    throw first.error;
  }

  /**
   * Publishes one message; `done` once it is confirmed and not returned, or with why not. No
   * confirm within --rabbitmq-timeout-ms: the link is abandoned (its other messages fail with it).
   */
  #sendOne(link: Link, exchange: string, m: OutboundMessage, done: LaneDone): void {
    if (link.closed) {
      done(new RabbitMqSinkError('CHANNEL_CLOSED', link.closed.message, { cause: link.closed }));
      return;
    }
    const id = m.event.eventId;
    const timeoutMs = this.#c.rabbitmqTimeoutMs;
    let list = link.waiting.get(id);
    if (!list) link.waiting.set(id, (list = []));
    const entry: Waiting = { returned: null, deadline: Date.now() + timeoutMs, expire: () => {} };
    list.push(entry);
    link.unconfirmed.add(entry);
    const settle = () => {
      link.unconfirmed.delete(entry);
      list.splice(list.indexOf(entry), 1);
      if (list.length === 0) link.waiting.delete(id);
    };
    entry.expire = (e) => {
      settle();
      done(e);
    };
    link.sweep ??= setInterval(() => this.#expire(link), Math.min(250, timeoutMs / 4));
    try {
      link.ch.publish(
        exchange,
        m.topic,
        m.value ?? EMPTY,
        {
          persistent: true,
          mandatory: true,
          messageId: id,
          contentType: m.event.contentType,
          type: m.event.eventType,
          timestamp: Math.floor(m.timestamp / 1000),
          headers: m.headers,
        },
        (err: unknown) => {
          if (!link.unconfirmed.has(entry)) return; // expired already
          settle();
          if (err) {
            const nacked = (err as Error).message === 'message nacked';
            done(
              nacked
                ? new RabbitMqSinkError('NACKED', `the broker nacked event ${id}`)
                : new RabbitMqSinkError('CHANNEL_CLOSED', link.closed?.message ?? String(err), {
                    cause: link.closed ?? err,
                  }),
            );
          } else if (entry.returned) {
            const f = entry.returned.fields as unknown as { replyCode?: number; replyText?: string };
            done(
              new RabbitMqSinkError(
                'UNROUTABLE',
                `no queue bound to exchange ${JSON.stringify(exchange)} takes routing key ${JSON.stringify(m.topic)} (${f.replyCode ?? 312} ${f.replyText ?? 'NO_ROUTE'}): bind a queue, or fix --rabbitmq-exchange / --topic-template`,
              ),
            );
          } else done();
        },
      );
    } catch (e) {
      settle();
      done(e);
    }
  }

  /**
   * The sweep: a message past its deadline fails with CONFIRM_TIMEOUT and the link is dropped (the
   * others then fail as the channel closes, or at their own deadlines: the sweep runs on while
   * anything waits, as each message's own timer did).
   */
  #expire(link: Link): void {
    const now = Date.now();
    let late: Waiting[] | null = null;
    for (const w of link.unconfirmed) if (w.deadline <= now) (late ??= []).push(w);
    if (late) {
      const e = new RabbitMqSinkError(
        'CONFIRM_TIMEOUT',
        `no publisher confirm within ${this.#c.rabbitmqTimeoutMs} ms`,
      );
      this.#abandon(link, e);
      for (const w of late) w.expire(e);
    } else if (link.unconfirmed.size === 0 && link.sweep) {
      clearInterval(link.sweep);
      link.sweep = null;
    }
  }

  classify(e: unknown): Classified {
    return classifyRabbitMqError(e);
  }

  /** A destination-wide refusal (no exchange, no permission) is the exchange's. */
  destinationOf(m: OutboundMessage): string {
    return exchangeFor(this.#c.rabbitmqExchange, m);
  }

  async stop(): Promise<void> {
    await this.#tail;
    const link = this.#link;
    this.#link = null;
    await link?.conn.close().catch(() => {});
    if (link?.sweep) clearInterval(link.sweep);
  }
}

const EMPTY = Buffer.alloc(0);

/** The exchange of an event: --rabbitmq-exchange with {aggregate_type} and {event_type} filled in. */
export function exchangeFor(template: string, m: Pick<OutboundMessage, 'event'>): string {
  if (!template.includes('{')) return template;
  return template
    .replaceAll('{aggregate_type}', m.event.aggregateType)
    .replaceAll('{event_type}', m.event.eventType);
}

/** `p`, or CONFIRM_TIMEOUT after `ms`; a late result is handed to `late` (to close what it opened). */
function withinRabbit<T>(p: Promise<T>, ms: number, what: string, late?: (v: T) => void): Promise<T> {
  return within(
    p,
    ms,
    () => new RabbitMqSinkError('CONFIRM_TIMEOUT', `RabbitMQ did not answer within ${ms} ms (${what})`),
    late ? { late } : {},
  );
}
