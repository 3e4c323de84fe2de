import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * What a Standard Webhooks receiver does with a request, written from the specification with
 * node:crypto and not with the relay's signing code (sinks/http/webhook-signature.ts), so the
 * receivers of the tests and of the playground check the relay rather than agree with it:
 * HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>" with any of the receiver's secrets,
 * any `v1,` signature of the header matching, the timestamp within 5 minutes of now.
 */
export const WEBHOOK_TOLERANCE_S = 300;

/** The HMAC keys of whsec_ secrets. */
export function webhookKeys(secrets: readonly string[]): Buffer[] {
  return secrets.map((s) => Buffer.from(s.replace(/^whsec_/, ''), 'base64'));
}

export function verifyWebhook(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  body: Buffer,
  keys: readonly Buffer[],
  nowS = Date.now() / 1000,
): boolean {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sig = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof ts !== 'string' || typeof sig !== 'string') return false;
  if (!(Math.abs(nowS - Number(ts)) <= WEBHOOK_TOLERANCE_S)) return false;
  const given = sig
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3), 'base64'));
  return keys.some((key) => {
    const mac = createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest();
    return given.some((g) => g.length === mac.length && timingSafeEqual(g, mac));
  });
}
