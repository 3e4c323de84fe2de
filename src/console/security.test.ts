import { describe, expect, it } from 'vitest';
import { COOKIE, parseCookies, SECURITY_HEADERS, Sessions, sameSecret, sessionCookie } from './security.ts';

describe('console security', () => {
  it('sends a CSP without inline script or style, no framing, nosniff, no referrer', () => {
    const csp = SECURITY_HEADERS['content-security-policy']!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(SECURITY_HEADERS['x-content-type-options']).toBe('nosniff');
    expect(SECURITY_HEADERS['referrer-policy']).toBe('no-referrer');
  });

  it('compares secrets of any length', () => {
    expect(sameSecret('abc', 'abc')).toBe(true);
    expect(sameSecret('abc', 'abd')).toBe(false);
    expect(sameSecret('abc', 'abcd')).toBe(false);
    expect(sameSecret('', 'x')).toBe(false);
  });

  it('the cookie is HttpOnly and SameSite=Strict, Secure behind TLS, and never holds the token', () => {
    const c = sessionCookie('sid123', false);
    expect(c).toBe(`${COOKIE}=sid123; Path=/console; HttpOnly; SameSite=Strict; Max-Age=28800`);
    expect(sessionCookie('sid', true)).toMatch(/; Secure$/);
    expect(parseCookies(`a=1; ${COOKIE}=xyz; b`)).toEqual({ a: '1', [COOKIE]: 'xyz' });
  });

  it('logs in with the token only, into a new session; CSRF tokens are bound to the session', () => {
    const s = new Sessions();
    const visitor = 'visitor-session-id';
    expect(s.isLoggedIn(visitor)).toBe(false);
    expect(s.login('wrong', 'the-right-token-1234')).toEqual({ result: 'wrong' });
    const ok = s.login('the-right-token-1234', 'the-right-token-1234');
    expect(ok.result).toBe('ok');
    const sid = (ok as { sessionId: string }).sessionId;
    expect(sid).not.toBe(visitor);
    expect(sid).not.toContain('the-right-token');
    expect(s.isLoggedIn(sid)).toBe(true);
    expect(s.isLoggedIn(visitor)).toBe(false);
    const csrf = s.csrfToken(sid);
    expect(s.validCsrf(sid, csrf)).toBe(true);
    expect(s.validCsrf(visitor, csrf)).toBe(false);
    expect(s.validCsrf(sid, undefined)).toBe(false);
    expect(s.validCsrf(undefined, csrf)).toBe(false);
    // Another console (process) has another key.
    expect(new Sessions().validCsrf(sid, csrf)).toBe(false);
    s.logout(sid);
    expect(s.isLoggedIn(sid)).toBe(false);
  });

  it('expires sessions after 8 hours and throttles failed logins', () => {
    let now = 1_000_000;
    const s = new Sessions(() => now);
    const ok = s.login('token-token-token!', 'token-token-token!') as { sessionId: string };
    now += 8 * 3600_000 - 1;
    expect(s.isLoggedIn(ok.sessionId)).toBe(true);
    now += 1;
    expect(s.isLoggedIn(ok.sessionId)).toBe(false);
    for (let i = 0; i < 10; i++) expect(s.login('guess', 'token-token-token!').result).toBe('wrong');
    // Even the right token is refused while throttled; a minute later it works again.
    expect(s.login('token-token-token!', 'token-token-token!').result).toBe('throttled');
    now += 60_001;
    expect(s.login('token-token-token!', 'token-token-token!').result).toBe('ok');
  });
});
