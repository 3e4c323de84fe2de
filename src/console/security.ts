import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The console's security, without I/O:
 *  - headers on every console response: a CSP that allows only the console's own files (no
 *    inline script or style, no framing), nosniff, no referrer, no caching;
 *  - sessions: a random id in an HttpOnly, SameSite=Strict cookie. The operator token is never
 *    stored in the cookie, rendered or logged; a successful login creates a new session id
 *    (no fixation) that the server remembers as logged in until it expires or logs out;
 *  - CSRF: every form carries HMAC(process key, session id); a POST is accepted only with the
 *    token that belongs to the cookie it came with;
 *  - secrets compared in constant time (both sides hashed first, so lengths do not leak);
 *  - failed logins throttled.
 */

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

export const COOKIE = 'outbox_console_session';
/** Tokens shorter than this are refused at start (they could be guessed). */
export const MIN_TOKEN_LENGTH = 16;
const SESSION_TTL_MS = 8 * 3600_000;
const MAX_SESSIONS = 200;
const LOGIN_FAILURES_PER_MINUTE = 10;

export function sameSecret(a: string, b: string): boolean {
  const h = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(h(a), h(b));
}

export function newSessionId(): string {
  return randomBytes(32).toString('base64url');
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}

/** The session cookie; `secure` when the browser reached us over TLS (directly or via the ingress). */
export function sessionCookie(id: string, secure: boolean, maxAgeSeconds = SESSION_TTL_MS / 1000): string {
  return `${COOKIE}=${id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? '; Secure' : ''}`;
}

/** Sessions and CSRF tokens of one console (one process). */
export class Sessions {
  readonly #key = randomBytes(32);
  readonly #loggedIn = new Map<string, number>();
  #failures: number[] = [];
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  csrfToken(sessionId: string): string {
    return createHmac('sha256', this.#key).update(`csrf:${sessionId}`).digest('base64url');
  }

  validCsrf(sessionId: string | undefined, token: string | undefined): boolean {
    if (!sessionId || !token) return false;
    return sameSecret(this.csrfToken(sessionId), token);
  }

  isLoggedIn(sessionId: string | undefined): boolean {
    if (!sessionId) return false;
    const expires = this.#loggedIn.get(sessionId);
    if (expires === undefined) return false;
    if (expires <= this.#now()) {
      this.#loggedIn.delete(sessionId);
      return false;
    }
    return true;
  }

  /**
   * Checks a login attempt. 'ok' with a new session id, 'wrong', or 'throttled' (too many
   * failures in the last minute: refused without looking at the token).
   */
  login(
    token: string | undefined,
    configured: string,
  ): { result: 'ok'; sessionId: string } | { result: 'wrong' | 'throttled' } {
    const now = this.#now();
    this.#failures = this.#failures.filter((t) => t > now - 60_000);
    if (this.#failures.length >= LOGIN_FAILURES_PER_MINUTE) return { result: 'throttled' };
    if (!token || !sameSecret(token, configured)) {
      this.#failures.push(now);
      return { result: 'wrong' };
    }
    for (const [id, exp] of this.#loggedIn) if (exp <= now) this.#loggedIn.delete(id);
    // Oldest first (insertion order): a full table forgets the oldest session.
    while (this.#loggedIn.size >= MAX_SESSIONS) this.#loggedIn.delete(this.#loggedIn.keys().next().value!);
    const sessionId = newSessionId();
    this.#loggedIn.set(sessionId, now + SESSION_TTL_MS);
    return { result: 'ok', sessionId };
  }

  logout(sessionId: string | undefined): void {
    if (sessionId) this.#loggedIn.delete(sessionId);
  }
}
