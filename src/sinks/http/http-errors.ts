/**
 * Classifies what a webhook POST met (design.md §4). Pure and table-driven, as
 * src/sinks/kafka/kafka-errors.ts. The receiver's status decides:
 *
 *   2xx                     delivered
 *   408, 429, 5xx           transient: the batch is sent again (429/503 with Retry-After: after it)
 *   3xx                     permanent: redirects are not followed (a webhook re-sent to wherever a
 *                           Location points would carry its signature there); fix --http-url
 *   other 4xx, 1xx, ≥ 600   permanent: the receiver refuses this event as it is (the event fails
 *                           with the status and up to 1 KB of the response body; others flow)
 *
 * Anything that is not an answer — no answer within --http-timeout-ms, a refused or reset
 * connection, a TLS failure, an unknown error — is transient: nothing is skipped and nothing is
 * confirmed past it. An event that cannot be made into a request at all (a header undici refuses)
 * is permanent: sending it again cannot help, and retrying it would stop the stream for good.
 */
import type { Classified } from '../../errors.ts';

export type HttpSinkCode =
  | 'REFUSED'
  | 'REDIRECT'
  | 'INVALID_EVENT'
  | 'RETRYABLE_STATUS'
  | 'TIMEOUT'
  | 'CONNECTION';

export class HttpSinkError extends Error {
  override readonly name = 'HttpSinkError';
  readonly code: HttpSinkCode;
  /** The receiver's status, when it answered. */
  readonly status: number | undefined;
  /** From a Retry-After header (a transient status): wait this long before the next attempt. */
  readonly retryAfterMs: number | undefined;
  constructor(
    code: HttpSinkCode,
    message: string,
    options: ErrorOptions & { status?: number; retryAfterMs?: number } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
  }
}

export const HTTP_SINK_CODES: Readonly<Record<HttpSinkCode, { permanent: boolean; meaning: string }>> = {
  REFUSED: {
    permanent: true,
    meaning: 'the receiver refused the event (a 4xx other than 408 and 429, or a status outside 2xx–5xx)',
  },
  REDIRECT: {
    permanent: true,
    meaning: 'the receiver answered with a redirect (3xx), which the relay does not follow: fix --http-url',
  },
  INVALID_EVENT: {
    permanent: true,
    meaning: 'the event cannot be sent as an HTTP request (a header value or name HTTP cannot carry)',
  },
  RETRYABLE_STATUS: {
    permanent: false,
    meaning:
      'the receiver is overloaded or failing (408, 429 or 5xx): sent again, after Retry-After if given',
  },
  TIMEOUT: { permanent: false, meaning: 'no complete answer within --http-timeout-ms' },
  CONNECTION: { permanent: false, meaning: 'the connection failed (refused, reset, closed, TLS)' },
};

/** The code of a receiver's answer; null = delivered. */
export function statusCode(status: number): HttpSinkCode | null {
  if (status >= 200 && status < 300) return null;
  if (status === 408 || status === 429 || (status >= 500 && status < 600)) return 'RETRYABLE_STATUS';
  if (status >= 300 && status < 400) return 'REDIRECT';
  return 'REFUSED';
}

/** A Retry-After is honoured up to this long; a longer one (a misconfigured receiver) is cut to it. */
export const RETRY_AFTER_MAX_MS = 300_000;

/**
 * Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date; undefined when absent or not
 * one of those. Bounded by RETRY_AFTER_MAX_MS.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  let ms: number;
  if (/^\d+$/.test(v)) ms = Number(v) * 1000;
  else {
    const at = Date.parse(v);
    if (!/[a-z]/i.test(v) || Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - nowMs);
  }
  return Math.min(ms, RETRY_AFTER_MAX_MS);
}

/** Undici's error codes for a request undici refused to build: about the event, not the receiver. */
const INVALID_REQUEST_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_INVALID_ARG',
  'ERR_INVALID_CHAR',
  'ERR_INVALID_HTTP_TOKEN',
]);

interface ErrorLike {
  name?: string;
  message?: string;
  code?: unknown;
  cause?: unknown;
}

function* chain(e: unknown, depth = 0): Generator<ErrorLike> {
  if (!e || typeof e !== 'object' || depth > 8) return;
  const a = e as ErrorLike;
  yield a;
  yield* chain(a.cause, depth + 1);
}

export function classifyHttpError(e: unknown): Classified {
  const message = e instanceof Error ? e.message : String(e);
  for (const a of chain(e)) {
    if (a instanceof HttpSinkError) {
      const c = HTTP_SINK_CODES[a.code];
      return {
        class: c.permanent ? 'permanent' : 'transient',
        reason: a.status !== undefined ? `HTTP_${a.status}` : a.code,
        message,
        ...(a.retryAfterMs !== undefined ? { retryAfterMs: a.retryAfterMs } : {}),
      };
    }
    if (typeof a.code === 'string' && INVALID_REQUEST_CODES.has(a.code))
      return {
        class: 'permanent',
        reason: 'INVALID_EVENT',
        message: `${HTTP_SINK_CODES.INVALID_EVENT.meaning}: ${a.message}`,
      };
  }
  let reason = 'UNKNOWN';
  for (const a of chain(e)) {
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

/**
 * What a request that got no answer failed with: the error itself when the sink raised it,
 * INVALID_EVENT when undici refused to build the request (a header it cannot send), TIMEOUT when
 * the sink's own deadline aborted it, CONNECTION for everything else (refused, reset, TLS).
 */
export function requestFailure(e: unknown, timedOut: boolean, timeoutMs: number): HttpSinkError {
  if (e instanceof HttpSinkError) return e;
  const message = e instanceof Error ? e.message : String(e);
  for (const a of chain(e))
    if (typeof a.code === 'string' && INVALID_REQUEST_CODES.has(a.code))
      return new HttpSinkError('INVALID_EVENT', `${HTTP_SINK_CODES.INVALID_EVENT.meaning}: ${message}`, {
        cause: e,
      });
  // undici raises this while reading the receiver's answer (its headers past undici's 16 KiB), never
  // for the request: the answer is lost, not the event's fault — it may have been delivered, so it
  // is sent again (a duplicate the receiver's inbox drops), and it is not recorded failed.
  for (const a of chain(e))
    if (a.code === 'UND_ERR_HEADERS_OVERFLOW')
      return new HttpSinkError(
        'CONNECTION',
        "the receiver's answer could not be read: its headers are larger than 16 KiB (UND_ERR_HEADERS_OVERFLOW); the request may have been delivered and is sent again. Fix: trim the headers the receiver or a proxy in front of it adds (large cookies)",
        { cause: e },
      );
  if (timedOut)
    return new HttpSinkError('TIMEOUT', `no answer within ${timeoutMs} ms (--http-timeout-ms)`, { cause: e });
  const code = (e as ErrorLike | null)?.code;
  return new HttpSinkError('CONNECTION', `${typeof code === 'string' ? `${code}: ` : ''}${message}`, {
    cause: e,
  });
}
