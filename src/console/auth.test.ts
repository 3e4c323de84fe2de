import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { Auth, whoOf } from './auth.ts';
import { COOKIE, Sessions } from './security.ts';

const TOKEN = 'operator-token-0123456789';

function request(headers: Record<string, string> = {}, encrypted = false): IncomingMessage {
  return { headers, socket: { remoteAddress: '10.0.0.7', encrypted } } as unknown as IncomingMessage;
}

const form = (fields: Record<string, string>) => new URLSearchParams(fields);

describe('console auth', () => {
  it('refuses a token shorter than 16 characters at start, and accepts none (read-only)', () => {
    expect(() => new Auth('short')).toThrow(/at least 16 characters/);
    expect(() => new Auth(null)).not.toThrow();
  });

  it('gives a visitor without a well-formed session a new id and its cookie, Secure behind TLS', () => {
    const auth = new Auth(TOKEN);
    const fresh = auth.visitor(request());
    expect(fresh.sid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fresh.setCookies).toEqual([
      expect.stringMatching(new RegExp(`^${COOKIE}=${fresh.sid}; .*Max-Age=28800$`)),
    ]);
    const forged = auth.visitor(request({ cookie: `${COOKIE}=not-an-id` }));
    expect(forged.sid).not.toBe('not-an-id');
    expect(auth.visitor(request({ 'x-forwarded-proto': 'https' })).setCookies[0]).toMatch(/; Secure$/);
    expect(auth.visitor(request({}, true)).secure).toBe(true);
    // A well-formed id is kept, and no cookie is set.
    const kept = auth.visitor(request({ cookie: `a=1; ${COOKIE}=${fresh.sid}` }));
    expect(kept).toEqual({ sid: fresh.sid, secure: false, setCookies: [] });
  });

  it('gates actions: a token configured, then the CSRF token, then a logged-in session', () => {
    const readOnly = new Auth(null);
    const v0 = readOnly.visitor(request());
    expect(readOnly.refusal(v0, form({ csrf: readOnly.seenBy(v0).csrf }))).toMatch(/read-only/);
    expect(readOnly.seenBy(v0)).toMatchObject({ actionsEnabled: false, loggedIn: false });

    const auth = new Auth(TOKEN);
    const v = auth.visitor(request());
    // Not logged in and no CSRF token: the CSRF check speaks first.
    expect(auth.refusal(v, form({}))).toMatch(/CSRF check failed/);
    expect(auth.refusal(v, form({ csrf: auth.seenBy(v).csrf }))).toBe(
      'Actions need the operator token: log in first.',
    );

    expect(auth.login(v, form({ csrf: auth.seenBy(v).csrf, token: TOKEN }))).toEqual({ result: 'ok' });
    expect(auth.seenBy(v)).toMatchObject({ actionsEnabled: true, loggedIn: true });
    expect(auth.refusal(v, form({ csrf: auth.seenBy(v).csrf }))).toBeNull();
    // The old session's form does not carry the new session's CSRF token.
    const other = auth.visitor(request());
    expect(auth.refusal(v, form({ csrf: auth.seenBy(other).csrf }))).toMatch(/CSRF check failed/);
  });

  it('login: read-only, stale form, wrong, throttled; ok is a new session (no fixation) and its cookie', () => {
    expect(new Auth(null).login(new Auth(null).visitor(request()), form({}))).toEqual({
      result: 'read-only',
    });
    let now = 1_000_000;
    const auth = new Auth(TOKEN, new Sessions(() => now));
    const v = auth.visitor(request());
    const before = v.sid;
    const csrf = auth.seenBy(v).csrf;
    expect(auth.login(v, form({ token: TOKEN }))).toEqual({ result: 'stale' });
    expect(auth.login(v, form({ csrf, token: 'wrong-token-wrong-token' }))).toEqual({ result: 'wrong' });
    expect(v.sid).toBe(before);
    const ok = auth.login(v, form({ csrf, token: TOKEN }));
    expect(ok).toEqual({ result: 'ok' });
    expect(v.sid).not.toBe(before);
    expect(v.setCookies).toEqual([expect.stringContaining(`${COOKIE}=${v.sid};`)]);
    expect(v.setCookies[0]).not.toContain(TOKEN);

    const w = auth.visitor(request());
    const wCsrf = auth.seenBy(w).csrf;
    for (let i = 0; i < 10; i++) auth.login(w, form({ csrf: wCsrf, token: 'guess' }));
    expect(auth.login(w, form({ csrf: wCsrf, token: TOKEN }))).toEqual({ result: 'throttled' });
    now += 60_001;
    expect(auth.login(w, form({ csrf: wCsrf, token: TOKEN }))).toEqual({ result: 'ok' });
  });

  it('logout needs the CSRF token; it ends the session and expires the cookie', () => {
    const auth = new Auth(TOKEN);
    const v = auth.visitor(request());
    auth.login(v, form({ csrf: auth.seenBy(v).csrf, token: TOKEN }));
    expect(auth.logout(v, form({ csrf: 'forged' }))).toBe(false);
    expect(auth.seenBy(v).loggedIn).toBe(true);
    expect(auth.logout(v, form({ csrf: auth.seenBy(v).csrf }))).toBe(true);
    expect(auth.seenBy(v).loggedIn).toBe(false);
    expect(v.setCookies).toEqual([expect.stringMatching(/Max-Age=0$/)]);
  });

  it('names who acted without revealing the session id', () => {
    const v = { sid: 'a'.repeat(43), secure: false, setCookies: [] };
    const who = whoOf(request(), v);
    expect(who).toEqual({
      via: 'console',
      remoteAddress: '10.0.0.7',
      session: expect.stringMatching(/^[0-9a-f]{12}$/),
    });
    expect(JSON.stringify(who)).not.toContain(v.sid);
  });
});
