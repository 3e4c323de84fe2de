/**
 * `check --sink http`: can the relay reach the receiver? The configuration check already made sure
 * the URL template is http(s) and the secrets are Standard Webhooks secrets (src/config/load.ts).
 * Here one unsigned OPTIONS request goes to the URL (placeholders filled with "check"): any HTTP
 * answer, whatever its status, means the host resolves, the port takes connections and TLS (with
 * --http-ca-file) verifies. No event is sent. Where the host itself is templated there is no one
 * address to try: the check says so and passes.
 */
import { readFileSync } from 'node:fs';
import { Agent } from 'undici';
import { type Config, redactWebhookUrl } from '../../config/load.ts';
import { ErrorCode, RelayError } from '../../errors.ts';
import { requestFailure } from './http-errors.ts';

export type WebhookProbe =
  | { reached: true; url: string; status: number }
  | { reached: false; url: string; why: string };

export async function probeWebhook(
  c: Pick<Config, 'httpUrl' | 'httpTimeoutMs' | 'httpCaFile'>,
): Promise<WebhookProbe | null> {
  const template = c.httpUrl!;
  const origin = /^https?:\/\/[^/]*/.exec(template)?.[0] ?? '';
  if (origin.includes('{')) return null;
  const u = new URL(template.replace(/\{[a-z_]+\}/g, 'check'));
  const shown = redactWebhookUrl(`${u.origin}${u.pathname}`);
  const agent = new Agent({
    connect: {
      timeout: c.httpTimeoutMs,
      ...(c.httpCaFile ? { ca: readFileSync(c.httpCaFile) } : {}),
    },
  });
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), c.httpTimeoutMs);
  try {
    const res = await agent.request({
      origin: u.origin,
      path: `${u.pathname}${u.search}`,
      method: 'OPTIONS',
      headers: { 'user-agent': 'pg-outbox-relay (check)' },
      signal: abort.signal,
    });
    await res.body.dump().catch(() => {});
    return { reached: true, url: shown, status: res.statusCode };
  } catch (e) {
    return {
      reached: false,
      url: shown,
      why: requestFailure(e, abort.signal.aborted, c.httpTimeoutMs).message,
    };
  } finally {
    clearTimeout(timer);
    await agent.close().catch(() => {});
  }
}

/** The probe as `check` reports it: passes when the receiver answered, else BROKER_UNAVAILABLE with the fix. */
export async function checkWebhook(
  c: Pick<Config, 'httpUrl' | 'httpTimeoutMs' | 'httpCaFile'>,
  log: { info(o: object, msg: string): void; warn(o: object, msg: string): void },
): Promise<void> {
  const p = await probeWebhook(c);
  if (p === null) {
    log.warn(
      { url: redactWebhookUrl(c.httpUrl!) },
      'the receiver host depends on the event (a placeholder in the host of --http-url): not probed',
    );
    return;
  }
  if (!p.reached)
    throw new RelayError(
      ErrorCode.BROKER_UNAVAILABLE,
      `check could not reach the webhook receiver ${p.url}: ${p.why}`,
      {
        fix: 'check --http-url (scheme, host, port), that the receiver is up and reachable from here, and for https with a private certificate authority --http-ca-file; then run check again.',
      },
    );
  log.info(
    { url: p.url, status: p.status },
    'webhook receiver answered (an unsigned OPTIONS request; no event sent)',
  );
}
