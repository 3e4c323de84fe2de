/**
 * Classifies what publishing to NATS JetStream raised (design.md §4). Pure and table-driven, as
 * src/sinks/kafka/kafka-errors.ts. Permanent: this message cannot be stored as it is until someone
 * changes the stream, the permissions or the message — the event is recorded failed and the
 * sweeper retries it later. Everything else, unknown included, is transient: back off, resend the
 * same batch (the duplicate window drops what was stored already), never confirm past it.
 *
 * Codes checked against nats-server 2.9 and @nats-io/jetstream 3.4 (test/integration/nats-sink.test.ts):
 * - a publish to a subject no stream listens on gets "no responders" (503), which the client
 *   raises as JetStreamNotEnabled — the same answer as a stream whose server is restarting. The
 *   sink asks JetStream which stream holds the subject and raises NO_STREAM only when JetStream
 *   itself answers "none"; a bare no-responders stays transient.
 * - 10054 "message size exceeds maximum allowed" (the stream's max_msg_size);
 * - 10077 "maximum messages exceeded" / "maximum bytes exceeded" / "maximum messages per subject
 *   exceeded" with discard new (the stream is full); other 10077s are store failures (disk).
 */
import type { Classified } from '../../errors.ts';

/** The sink's own refusals, raised before or instead of a JetStream answer. */
export type NatsSinkCode =
  | 'NO_STREAM'
  | 'STREAM_CONFIG'
  | 'INVALID_SUBJECT'
  | 'INVALID_MESSAGE'
  | 'NO_PUBACK';

export class NatsSinkError extends Error {
  override readonly name = 'NatsSinkError';
  readonly code: NatsSinkCode;
  constructor(code: NatsSinkCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/**
 * The sink's codes: permanent ones with what the operator does about them. destinationWide: the
 * subject as a whole is refused (every event to it would be), see Classified.destinationWide.
 */
export const NATS_SINK_CODES: Readonly<
  Record<NatsSinkCode, { permanent: boolean; destinationWide?: true; meaning: string }>
> = {
  NO_STREAM: {
    permanent: true,
    destinationWide: true,
    meaning:
      'no JetStream stream listens on the subject (create one, or fix --topic-template / --topic-override)',
  },
  STREAM_CONFIG: {
    permanent: true,
    destinationWide: true,
    meaning:
      "the subject's stream cannot keep the relay's promise (memory storage, or a duplicate window below the retry horizon)",
  },
  INVALID_SUBJECT: { permanent: true, destinationWide: true, meaning: 'not a valid NATS subject' },
  INVALID_MESSAGE: {
    permanent: true,
    meaning: 'the event cannot be written as a NATS message (a header name or value)',
  },
  NO_PUBACK: { permanent: false, meaning: 'the server answered without a stream acknowledgement' },
};

/** JetStream API error codes (err_code) that are permanent for the message that got them. */
export const PERMANENT_JS_CODES: Readonly<Record<number, string>> = {
  10054: "message larger than the stream's max_msg_size",
  10097: 'headers larger than JetStream accepts (64 KiB)',
  10109: 'the stream is sealed',
};

/** Of those, the ones about the subject's stream rather than the message: every event to it is refused. */
const DESTINATION_WIDE_JS_CODES: ReadonlySet<number> = new Set([10109]);

/** 10077 (store failed) is permanent only when the stream is full and discards new messages. */
const STREAM_FULL = /^maximum (messages|bytes|messages per subject) exceeded/;

/** nats.js error names that are permanent for the message (both are about its subject: destination-wide). */
const PERMANENT_CLIENT_NAMES: Readonly<Record<string, string>> = {
  InvalidSubjectError: 'not a valid NATS subject',
  PermissionViolationError: 'this connection may not publish to the subject',
};

interface NatsLikeError {
  name?: string;
  message?: string;
  code?: unknown;
  cause?: unknown;
  apiError?: () => { err_code?: number; code?: number; description?: string };
}

function* chain(e: unknown, depth = 0): Generator<NatsLikeError> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const n = e as NatsLikeError;
  yield n;
  yield* chain(n.cause, depth + 1);
}

function apiError(n: NatsLikeError): { err_code?: number; description?: string } | undefined {
  try {
    return typeof n.apiError === 'function' ? n.apiError() : undefined;
  } catch {
    return undefined;
  }
}

export function classifyNatsError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  const permanent = (reason: string, why: string, msg = message, wide = false): Classified => ({
    class: 'permanent',
    reason,
    message: `${why}: ${msg}`,
    ...(wide ? { destinationWide: true } : {}),
  });
  for (const n of chain(e)) {
    if (n instanceof NatsSinkError) {
      const c = NATS_SINK_CODES[n.code];
      return {
        class: c.permanent ? 'permanent' : 'transient',
        reason: n.code,
        message: n.message,
        ...(c.destinationWide ? { destinationWide: true } : {}),
      };
    }
    const api = apiError(n);
    if (api?.err_code !== undefined) {
      const why = PERMANENT_JS_CODES[api.err_code];
      if (why)
        return permanent(
          `JS_${api.err_code}`,
          why,
          api.description ?? message,
          DESTINATION_WIDE_JS_CODES.has(api.err_code),
        );
      if (api.err_code === 10077 && STREAM_FULL.test(api.description ?? ''))
        return permanent('STREAM_FULL', 'the stream is full and discards new messages', api.description);
      return { class: 'transient', reason: `JS_${api.err_code}`, message: api.description ?? message };
    }
    if (n.name === 'InvalidArgumentError' && /max_payload/.test(n.message ?? ''))
      return permanent('MAX_PAYLOAD', "message larger than the server's max_payload", n.message);
    if (n.name && PERMANENT_CLIENT_NAMES[n.name])
      return permanent(n.name, PERMANENT_CLIENT_NAMES[n.name]!, n.message, true);
  }
  // Transient: TimeoutError, ClosedConnectionError, ConnectionError, DrainingConnectionError,
  // JetStreamNotEnabled (no responders while a server restarts), AuthorizationError (the
  // relay's credentials, not the event's fault), anything unknown.
  let reason = 'UNKNOWN';
  for (const n of chain(e))
    if (n.name && n.name !== 'Error') {
      reason = n.name;
      break;
    }
  return { class: 'transient', reason, message };
}
