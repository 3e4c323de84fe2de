import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ErrorCode, RelayError } from '../errors.ts';
import { COOKIE, MIN_TOKEN_LENGTH, newSessionId, parseCookies, Sessions, sessionCookie } from './security.ts';

/**
 * Who is asking and what they may do, for every console request: the visitor's session (a new id
 * in a cookie when it has none, so its forms carry a CSRF token), the decisions of login and
 * logout, and the gate of every action — a token configured, the session's CSRF token, a
 * logged-in session, checked in that order, each refusal with the sentence the page shows. The
 * decisions are plain values (a refusal or null, an outcome), so the routes only render them and
 * a unit test can check each case; the primitives (sessions, CSRF HMAC, cookie, headers) are in
 * security.ts. The operator token is checked once here, at start, and never leaves this object.
 */

/** One request's session: the id it carries and the cookies its answer sets. */
export interface Visitor {
  sid: string;
  /** Reached over TLS (directly or behind an ingress that says so): the cookie is Secure. */
  secure: boolean;
  setCookies: string[];
}

export type LoginOutcome =
  | { result: 'read-only' }
  | { result: 'stale' }
  | { result: 'throttled' }
  | { result: 'wrong' }
  | { result: 'ok' };

export class Auth {
  readonly #token: string | null;
  readonly #sessions: Sessions;

  /** `token`: the operator token (--console-token-file), or null for a read-only console. */
  constructor(token: string | null, sessions = new Sessions()) {
    if (token !== null && token.length < MIN_TOKEN_LENGTH) {
      throw new RelayError(
        ErrorCode.CONFIG_INVALID,
        `--console-token-file / OUTBOX_CONSOLE_TOKEN_FILE: the operator token must be at least ${MIN_TOKEN_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`,
      );
    }
    this.#token = token;
    this.#sessions = sessions;
  }

  /** The request's session; a visitor without a (well-formed) one gets a new id, not logged in. */
  visitor(req: IncomingMessage): Visitor {
    let sid = parseCookies(req.headers.cookie)[COOKIE];
    const secure =
      req.headers['x-forwarded-proto'] === 'https' || !!(req.socket as Partial<TLSSocket>).encrypted;
    const setCookies: string[] = [];
    if (!sid || !/^[A-Za-z0-9_-]{43}$/.test(sid)) {
      sid = newSessionId();
      setCookies.push(sessionCookie(sid, secure));
    }
    return { sid, secure, setCookies };
  }

  /** What every page knows about the visitor (layout.ts' PageContext, less the relay's names). */
  seenBy(v: Visitor): { actionsEnabled: boolean; loggedIn: boolean; csrf: string } {
    return {
      actionsEnabled: this.#token !== null,
      loggedIn: this.#token !== null && this.#sessions.isLoggedIn(v.sid),
      csrf: this.#sessions.csrfToken(v.sid),
    };
  }

  /** Actions: null when allowed, else why not (a 403 page). */
  refusal(v: Visitor, form: URLSearchParams): string | null {
    if (this.#token === null)
      return 'The console is read-only: no operator token is configured (--console-token-file).';
    if (!this.#sessions.validCsrf(v.sid, form.get('csrf') ?? undefined))
      return 'The form is stale or did not come from this console (CSRF check failed). Reload the page and try again.';
    if (!this.#sessions.isLoggedIn(v.sid)) return 'Actions need the operator token: log in first.';
    return null;
  }

  /** A login form; on 'ok' the visitor holds the new session and its cookie (no fixation). */
  login(v: Visitor, form: URLSearchParams): LoginOutcome {
    if (this.#token === null) return { result: 'read-only' };
    if (!this.#sessions.validCsrf(v.sid, form.get('csrf') ?? undefined)) return { result: 'stale' };
    const r = this.#sessions.login(form.get('token') ?? undefined, this.#token);
    if (r.result !== 'ok') return { result: r.result };
    v.sid = r.sessionId;
    v.setCookies = [sessionCookie(v.sid, v.secure)];
    return { result: 'ok' };
  }

  /** A logout form: false when its CSRF token is wrong (nothing changed). */
  logout(v: Visitor, form: URLSearchParams): boolean {
    if (!this.#sessions.validCsrf(v.sid, form.get('csrf') ?? undefined)) return false;
    this.#sessions.logout(v.sid);
    v.setCookies = [sessionCookie(v.sid, v.secure, 0)];
    return true;
  }
}

/** Who did it, for the log and the audit line: ties one login's actions together without revealing the session id. */
export function whoOf(req: IncomingMessage, v: Visitor): Record<string, unknown> {
  return {
    via: 'console',
    remoteAddress: req.socket.remoteAddress ?? null,
    session: createHash('sha256').update(v.sid).digest('hex').slice(0, 12),
  };
}
