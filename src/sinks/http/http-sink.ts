import { createSecretKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent } from 'undici';
import { type Config, redactWebhookUrl } from '../../config/load.ts';
import type { Classified } from '../../errors.ts';
import type { Logger } from '../../observability/logger.ts';
import { sleep } from '../../retry/backoff.ts';
import type { OutboundMessage } from '../../route/event.ts';
import { type LaneDone, type LaneFailure, sendInLanes } from '../key-lanes.ts';
import type { Sink } from '../sink.ts';
import { batchBody, batchId } from './batch-body.ts';
import {
  classifyHttpError,
  HTTP_SINK_CODES,
  HttpSinkError,
  parseRetryAfter,
  requestFailure,
  statusCode,
} from './http-errors.ts';
import { eventHeaders, headerField } from './request-headers.ts';
import { parseSecrets, sign } from './webhook-signature.ts';

export type HttpSinkConfig = Pick<
  Config,
  'httpUrl' | 'httpSecret' | 'httpBatchSize' | 'httpTimeoutMs' | 'httpMaxInFlight' | 'httpCaFile'
>;

/** Where a request goes: --http-url with the event's placeholders filled in. */
interface Target {
  url: string;
  origin: string;
  path: string;
  /** As errors show it: the origin and path, a token in them as *** (redactWebhookUrl). */
  shown: string;
}

/** One request: an event (--http-batch-size 1) or up to --http-batch-size events for one URL. */
interface Request {
  target: Target;
  messages: OutboundMessage[];
}

/** How much of a refusing receiver's body goes into the event's error. */
const ERROR_BODY_BYTES = 1024;
const EMPTY = Buffer.alloc(0);
const PLAIN_CONTENT_TYPE = /^[\x21-\x7e][\x20-\x7e]*$/;

/**
 * Webhooks: each event is a POST to --http-url (a template), signed as Standard Webhooks does it
 * (webhook-signature.ts), with the event's value as the body and its headers as HTTP headers
 * (request-headers.ts); with --http-batch-size > 1, up to that many events of one URL go as one
 * JSON array (batch-body.ts).
 *
 * Delivered = a 2xx answer. The receiver's status is classified by http-errors.ts: 408, 429, 5xx,
 * no answer within --http-timeout-ms and a failed connection are transient (the batch is sent
 * again, the slot waits: duplicates possible, receivers deduplicate by webhook-id); a 3xx
 * (redirects are not followed) and other 4xx fail the event for good.
 *
 * Ordering. HTTP gives no order between requests in flight: a request that fails may be followed
 * by a later one that succeeds. So at most one request per key and URL is in flight
 * (src/sinks/key-lanes.ts); with batches, one per URL. Other lanes share --http-max-in-flight,
 * over undici's keep-alive pool (that many connections per origin at most).
 */
export class HttpSink implements Sink {
  readonly name = 'http';
  readonly #c: HttpSinkConfig;
  readonly #log: Logger;
  readonly #keys: KeyObject[];
  #agent: Agent | null = null;
  #targets = new Map<string, Target>();
  #tail: Promise<unknown> = Promise.resolve();
  /**
   * Retry-After, by origin: no request goes there before this time (ms since epoch). The relay
   * waits that long before it sends a refused batch again (Classified.retryAfterMs), but it sends
   * at once the halves of a batch that another event failed for good: they wait here.
   */
  readonly #notBefore = new Map<string, number>();
  /** Aborts the Retry-After waits when the sink stops. */
  #stopping = new AbortController();

  constructor(c: HttpSinkConfig, log: Logger) {
    this.#c = c;
    this.#log = log.child({ component: 'http' });
    this.#keys = parseSecrets(c.httpSecret ?? '').map((k) => createSecretKey(k));
  }

  async start(): Promise<void> {
    if (this.#agent) return;
    if (this.#stopping.signal.aborted) this.#stopping = new AbortController();
    this.#agent = new Agent({
      connections: this.#c.httpMaxInFlight,
      pipelining: 1,
      connect: {
        timeout: this.#c.httpTimeoutMs,
        ...(this.#c.httpCaFile ? { ca: readFileSync(this.#c.httpCaFile) } : {}),
      },
    });
    this.#log.info(
      {
        url: redactWebhookUrl(this.#c.httpUrl!),
        secrets: this.#keys.length,
        batchSize: this.#c.httpBatchSize,
        maxInFlight: this.#c.httpMaxInFlight,
      },
      'webhook sink ready',
    );
  }

  publish(batch: readonly OutboundMessage[]): Promise<void> {
    const run = this.#tail.then(() => this.#publish(batch));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #publish(batch: readonly OutboundMessage[]): Promise<void> {
    await this.start();
    const requests = this.#requests(batch);
    const single = this.#c.httpBatchSize === 1;
    const failures = await sendInLanes(
      requests,
      (r) => (single ? `${r.target.url}\u0000${r.messages[0]!.key}` : r.target.url),
      this.#c.httpMaxInFlight,
      (r, done) => void this.#send(r, done),
    );
    if (failures.length > 0) throw worstOf(failures, (e) => this.classify(e));
  }

  /** The batch cut into requests, in stream order: one per event, or per URL up to --http-batch-size. */
  #requests(batch: readonly OutboundMessage[]): Request[] {
    const n = this.#c.httpBatchSize;
    const out: Request[] = [];
    const open = new Map<string, Request>();
    for (const m of batch) {
      const target = this.#target(m);
      if (n === 1) {
        out.push({ target, messages: [m] });
        continue;
      }
      let r = open.get(target.url);
      if (!r || r.messages.length >= n) {
        r = { target, messages: [] };
        open.set(target.url, r);
        out.push(r);
      }
      r.messages.push(m);
    }
    return out;
  }

  #target(m: OutboundMessage): Target {
    const url = urlFor(this.#c.httpUrl!, m);
    let t = this.#targets.get(url);
    if (!t) {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        // A placeholder in the host made one from the row's values that no URL can have (a
        // space, a '%'): the event's, permanent — retrying it would stop the stream for good.
        throw new HttpSinkError(
          'INVALID_EVENT',
          `${HTTP_SINK_CODES.INVALID_EVENT.meaning}: the host of --http-url, ${JSON.stringify(hostOf(this.#c.httpUrl!))}, is ${JSON.stringify(hostOf(url))} for this event, not a valid host (a placeholder there takes the row's value, which must then be a host name's letters, digits, '-' and '.'). Fix the row's value and resend it, or move the placeholder into the path`,
        );
      }
      t = {
        url,
        origin: u.origin,
        path: `${u.pathname}${u.search}`,
        shown: redactWebhookUrl(`${u.origin}${u.pathname}`),
      };
      if (this.#targets.size >= 10_000) this.#targets = new Map();
      this.#targets.set(url, t);
    }
    return t;
  }

  /** One POST; `done` once it is answered 2xx, or with why not. Never throws. */
  async #send(r: Request, done: LaneDone): Promise<void> {
    const timeoutMs = this.#c.httpTimeoutMs;
    const until = this.#notBefore.get(r.target.origin);
    if (until !== undefined) {
      if (until > Date.now()) await sleep(until - Date.now(), this.#stopping.signal);
      else this.#notBefore.delete(r.target.origin);
      if (this.#stopping.signal.aborted) {
        done(new HttpSinkError('CONNECTION', 'the sink stopped while waiting for Retry-After'));
        return;
      }
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      let body: Buffer;
      let headers: Record<string, string>;
      try {
        ({ body, headers } = this.#request(r));
      } catch (e) {
        // Rows are hostile input: whatever building this request threw is this event's, for good.
        throw e instanceof HttpSinkError
          ? e
          : new HttpSinkError('INVALID_EVENT', `the event cannot be sent: ${String(e)}`, { cause: e });
      }
      let res: Awaited<ReturnType<Agent['request']>>;
      try {
        res = await this.#agent!.request({
          origin: r.target.origin,
          path: r.target.path,
          method: 'POST',
          headers,
          body,
          signal: abort.signal,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
      } catch (e) {
        throw requestFailure(e, abort.signal.aborted, timeoutMs);
      }
      const code = statusCode(res.statusCode);
      if (code === null) {
        await res.body.dump().catch(() => {});
        done();
        return;
      }
      const text = await bodyHead(res.body).catch(() => '');
      const where = `POST ${r.target.shown}`;
      const retryAfterMs =
        code === 'RETRYABLE_STATUS'
          ? parseRetryAfter(header(res.headers['retry-after']), Date.now())
          : undefined;
      if (retryAfterMs !== undefined)
        this.#notBefore.set(
          r.target.origin,
          Math.max(this.#notBefore.get(r.target.origin) ?? 0, Date.now() + retryAfterMs),
        );
      const location = header(res.headers.location);
      throw new HttpSinkError(
        code,
        code === 'REDIRECT'
          ? `HTTP ${res.statusCode} from ${where}: redirects are not followed${location ? ` (Location: ${location.slice(0, 200)})` : ''}: point --http-url at the final address`
          : `HTTP ${res.statusCode} from ${where}${text ? `: ${text}` : ''}`,
        {
          status: res.statusCode,
          ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        },
      );
    } catch (e) {
      done(requestFailure(e, abort.signal.aborted, timeoutMs));
    } finally {
      clearTimeout(timer);
    }
  }

  /** The body and headers of a request, signed now (a re-send gets a fresh timestamp, as the standard asks). */
  #request(r: Request): { body: Buffer; headers: Record<string, string> } {
    const single = r.messages.length === 1 && this.#c.httpBatchSize === 1;
    const m = r.messages[0]!;
    const body = single ? (m.value ?? EMPTY) : batchBody(r.messages);
    const id = single ? m.event.eventId : batchId(r.messages);
    const timestamp = Math.floor(Date.now() / 1000);
    const headers: Record<string, string> = single ? eventHeaders(m) : {};
    if (!single && r.messages.every((x) => x.topic === m.topic)) {
      const [name, value] = headerField('outbox-topic', m.topic);
      headers[name] = value;
    }
    const contentType = single ? (m.headers['content-type'] ?? m.event.contentType) : 'application/json';
    headers['content-type'] = PLAIN_CONTENT_TYPE.test(contentType) ? contentType : 'application/octet-stream';
    headers['user-agent'] = 'pg-outbox-relay';
    headers['webhook-id'] = id;
    headers['webhook-timestamp'] = String(timestamp);
    headers['webhook-signature'] = sign(this.#keys, id, timestamp, body);
    return { body, headers };
  }

  classify(e: unknown): Classified {
    return classifyHttpError(e);
  }

  /** A destination is a URL. */
  destinationOf(m: OutboundMessage): string {
    return urlFor(this.#c.httpUrl!, m);
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#tail;
    const agent = this.#agent;
    this.#agent = null;
    await agent?.close().catch(() => {});
  }
}

/**
 * --http-url with {topic}, {aggregate_type} and {event_type} filled in, each percent-encoded (a
 * lone surrogate, on which encodeURIComponent throws, becomes U+FFFD first: rows are hostile).
 */
export function urlFor(template: string, m: Pick<OutboundMessage, 'topic' | 'event'>): string {
  if (!template.includes('{')) return template;
  const enc = (v: string) => encodeURIComponent(Buffer.from(v, 'utf8').toString('utf8'));
  return template
    .replaceAll('{topic}', enc(m.topic))
    .replaceAll('{aggregate_type}', enc(m.event.aggregateType))
    .replaceAll('{event_type}', enc(m.event.eventType));
}

/** The host part of a URL (template), without the path, query or any credentials: for errors and logs. */
function hostOf(url: string): string {
  const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(url)?.[1] ?? '';
  return authority.slice(authority.lastIndexOf('@') + 1);
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Up to ERROR_BODY_BYTES of a response body as one line of text (the rest is not read). */
async function bodyHead(body: AsyncIterable<Buffer>): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    chunks.push(c);
    n += c.length;
    if (n >= ERROR_BODY_BYTES) break;
  }
  return (
    Buffer.concat(chunks)
      .subarray(0, ERROR_BODY_BYTES)
      .toString('utf8')
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the receiver's text goes into one line of an error
      .replace(/[\x00-\x1f\x7f]+/g, ' ')
      .trim()
  );
}

/**
 * The error publish() rejects with: the first permanent failure (the relay then finds the events
 * it is about), else the first; a transient one waits for the longest Retry-After any receiver gave.
 */
function worstOf(failures: LaneFailure<Request>[], classify: (e: unknown) => Classified): unknown {
  const permanent = failures.find((f) => classify(f.error).class === 'permanent');
  if (permanent) return permanent.error;
  let wait: number | undefined;
  for (const f of failures) {
    const ms = (f.error as HttpSinkError).retryAfterMs;
    if (ms !== undefined) wait = Math.max(wait ?? 0, ms);
  }
  const first = failures[0]!.error as HttpSinkError;
  if (wait === undefined || first.retryAfterMs === wait) return first;
  return new HttpSinkError(first.code, first.message, {
    cause: first.cause,
    ...(first.status !== undefined ? { status: first.status } : {}),
    retryAfterMs: wait,
  });
}
