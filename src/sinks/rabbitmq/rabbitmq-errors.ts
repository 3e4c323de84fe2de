/**
 * Classifies what publishing to RabbitMQ raised (design.md §4). Pure and table-driven, as
 * src/sinks/kafka/kafka-errors.ts. Permanent: this message cannot be routed or taken as it is until
 * someone changes the exchange, its bindings, the permissions or the message — the event is
 * recorded failed, the others flow, the sweeper retries it later. Everything else — a nack, a
 * lost channel or connection, a confirm that does not come, anything unknown — is transient:
 * the batch is sent again (at-least-once), nothing is skipped, nothing confirmed past it.
 *
 * AMQP 0-9-1 reply codes: a channel closed by the server for a publish (404 no exchange, 403
 * access refused, 406 precondition failed — a message over max_message_size) is about that
 * publish; the same codes closing the connection (bad credentials, a vhost) are about the relay
 * and stay transient. A mandatory message that no queue binding matched comes back with
 * basic.return (312 NO_ROUTE) before its confirm: the sink raises UNROUTABLE.
 */
import type { Classified } from '../../errors.ts';

export type RabbitMqSinkCode =
  | 'UNROUTABLE'
  | 'NO_EXCHANGE'
  | 'INVALID_MESSAGE'
  | 'NACKED'
  | 'CONFIRM_TIMEOUT'
  | 'CHANNEL_CLOSED';

export class RabbitMqSinkError extends Error {
  override readonly name = 'RabbitMqSinkError';
  readonly code: RabbitMqSinkCode;
  constructor(code: RabbitMqSinkCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/**
 * destinationWide: the exchange as a whole refuses (every event to it would be refused), see
 * Classified.destinationWide. UNROUTABLE is not: a binding may take another routing key of the
 * same exchange, and a headers exchange routes by the message's headers.
 */
export const RABBITMQ_SINK_CODES: Readonly<
  Record<RabbitMqSinkCode, { permanent: boolean; destinationWide?: true; meaning: string }>
> = {
  UNROUTABLE: {
    permanent: true,
    meaning:
      'no queue is bound to the exchange for this routing key (mandatory message returned, 312 NO_ROUTE)',
  },
  NO_EXCHANGE: {
    permanent: true,
    destinationWide: true,
    meaning: 'the exchange does not exist (declare it, or fix --rabbitmq-exchange)',
  },
  INVALID_MESSAGE: {
    permanent: true,
    meaning: 'the event cannot be encoded as an AMQP message (headers over 64 KiB)',
  },
  NACKED: {
    permanent: false,
    meaning:
      'the broker nacked the message (a queue with overflow reject-publish is full, or an internal error)',
  },
  CONFIRM_TIMEOUT: { permanent: false, meaning: 'no publisher confirm within --rabbitmq-timeout-ms' },
  CHANNEL_CLOSED: { permanent: false, meaning: 'the channel or connection closed before the confirm' },
};

/** Reply codes of a channel the server closed because of a publish: permanent for that message. */
export const PERMANENT_CHANNEL_CODES: Readonly<Record<number, string>> = {
  403: 'not allowed to publish to the exchange (ACCESS_REFUSED)',
  404: 'the exchange does not exist (NOT_FOUND)',
  406: 'the broker refused the message (PRECONDITION_FAILED, e.g. over max_message_size)',
};

/** Of those, the refusals of the exchange itself (its existence, the permission to publish to it). */
const DESTINATION_WIDE_CHANNEL_CODES: ReadonlySet<number> = new Set([403, 404]);

interface AmqpLikeError {
  name?: string;
  message?: string;
  code?: unknown;
  cause?: unknown;
  /** Set by the sink: the error closed the channel (true) or the connection (false). */
  channelLevel?: boolean;
}

function* chain(e: unknown, depth = 0): Generator<AmqpLikeError> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const a = e as AmqpLikeError;
  yield a;
  yield* chain(a.cause, depth + 1);
}

export function classifyRabbitMqError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  for (const a of chain(e)) {
    if (a instanceof RabbitMqSinkError) {
      const c = RABBITMQ_SINK_CODES[a.code];
      // A channel closed by the server for a publish carries the server's reason as its cause.
      if (a.code === 'CHANNEL_CLOSED' && a.cause) {
        const inner = classifyRabbitMqError(a.cause);
        if (inner.class === 'permanent') return inner;
      }
      return {
        class: c.permanent ? 'permanent' : 'transient',
        reason: a.code,
        message,
        ...(c.destinationWide ? { destinationWide: true } : {}),
      };
    }
    if (a.channelLevel === true && typeof a.code === 'number' && PERMANENT_CHANNEL_CODES[a.code])
      return {
        class: 'permanent',
        reason: `AMQP_${a.code}`,
        message: `${PERMANENT_CHANNEL_CODES[a.code]}: ${a.message}`,
        ...(DESTINATION_WIDE_CHANNEL_CODES.has(a.code) ? { destinationWide: true } : {}),
      };
    if (a.name === 'RangeError' && /encoding buffer/.test(a.message ?? ''))
      return {
        class: 'permanent',
        reason: 'INVALID_MESSAGE',
        message: `${RABBITMQ_SINK_CODES.INVALID_MESSAGE.meaning}: ${a.message}`,
      };
  }
  let reason = 'UNKNOWN';
  for (const a of chain(e)) {
    if (typeof a.code === 'number') {
      reason = `AMQP_${a.code}`;
      break;
    }
    if (typeof a.code === 'string') {
      reason = a.code;
      break;
    }
    if (a.name && a.name !== 'Error') {
      reason = a.name;
      break;
    }
  }
  return { class: 'transient', reason, message };
}
