/**
 * Standard Webhooks signing (https://www.standardwebhooks.com, "Signature scheme"): each request
 * carries `webhook-id`, `webhook-timestamp` (unix seconds) and `webhook-signature`, a
 * space-separated list of `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret.
 * Receivers verify with any library of the standard (svix, standardwebhooks) and deduplicate by
 * `webhook-id`. Several secrets sign every request during a rotation: the receiver accepts the
 * request when any signature verifies with the secret it knows.
 */
import { createHmac, type KeyObject } from 'node:crypto';

/** The standard's secret format: `whsec_` and the base64 of 24 to 64 random bytes (the prefix is optional). */
const SECRET = /^(?:whsec_)?([A-Za-z0-9+/]+={0,2})$/;

/**
 * The keys of a secret list (--http-secret, WEBHOOK_SECRET, WEBHOOK_SECRET_FILE, --http-secret-file): secrets separated by
 * spaces, commas or new lines, newest first. Throws an error that names the bad entry by its
 * position, never by its text (a secret is never shown).
 */
export function parseSecrets(text: string): Buffer[] {
  const parts = text.split(/[\s,]+/).filter((s) => s !== '');
  if (parts.length === 0) throw new Error('no secret given');
  return parts.map((p, i) => {
    const m = SECRET.exec(p);
    const key = m ? Buffer.from(m[1]!, 'base64') : null;
    if (!key || key.length < 24 || key.length > 64)
      throw new Error(
        `secret ${i + 1} of ${parts.length} is not a Standard Webhooks secret: expected whsec_ followed by the base64 of 24 to 64 random bytes (make one: echo "whsec_$(openssl rand -base64 32)")`,
      );
    return key;
  });
}

/**
 * The `webhook-signature` value: one `v1,<base64>` per key, space-separated. Give KeyObjects
 * (createSecretKey) on a hot path: createHmac makes one of a Buffer at every call, which cost
 * ~20 µs of the ~25 µs per signature (measured here, Node 24).
 */
export function sign(
  keys: readonly (Buffer | KeyObject)[],
  id: string,
  timestamp: number,
  body: Buffer,
): string {
  const prefix = `${id}.${timestamp}.`;
  let out = '';
  for (const key of keys) {
    const mac = createHmac('sha256', key).update(prefix).update(body).digest('base64');
    out += out === '' ? `v1,${mac}` : ` v1,${mac}`;
  }
  return out;
}
