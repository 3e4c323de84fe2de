import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { OpsInputError } from '../ops/input-error.ts';
import { html } from './html.ts';
import { Reply, type Route, readForm, resolve } from './router.ts';
import { SECURITY_HEADERS } from './security.ts';

const run = () => {};
const ROUTES: Route<null>[] = [
  { method: 'POST', path: '/console/login', run },
  { method: 'GET', path: '/console/login', run },
  { method: 'GET', path: /^\/console\/events\/([^/]+)$/, run },
  { method: 'GET', path: /^\/console\/jobs\/([0-9a-f]+)(\.json)?$/, run },
];

describe('console router', () => {
  it('matches exact paths and regexes by method, first match wins; HEAD is answered as GET', () => {
    expect(resolve(ROUTES, 'POST', '/console/login')).toEqual({ route: ROUTES[0], groups: [] });
    expect(resolve(ROUTES, 'GET', '/console/login')).toEqual({ route: ROUTES[1], groups: [] });
    expect(resolve(ROUTES, 'HEAD', '/console/login')).toEqual({ route: ROUTES[1], groups: [] });
    expect(resolve(ROUTES, 'GET', '/console/events/42')).toEqual({ route: ROUTES[2], groups: ['42'] });
    // An optional group that did not match is '' (falsy), never undefined.
    expect(resolve(ROUTES, 'GET', '/console/jobs/ab12')).toEqual({ route: ROUTES[3], groups: ['ab12', ''] });
    expect(resolve(ROUTES, 'GET', '/console/jobs/ab12.json')).toEqual({
      route: ROUTES[3],
      groups: ['ab12', '.json'],
    });
  });

  it('a read that misses is 404; a POST that misses is 405 Allow: GET, HEAD; another method is 405 with all', () => {
    expect(resolve(ROUTES, 'GET', '/console/nowhere')).toEqual({ status: 404 });
    expect(resolve(ROUTES, 'GET', '/console/events/1/2')).toEqual({ status: 404 });
    // A GET of a POST-only path is a miss, not a 405.
    expect(resolve([ROUTES[0]!], 'GET', '/console/login')).toEqual({ status: 404 });
    expect(resolve(ROUTES, 'POST', '/console/events/42')).toEqual({ status: 405, allow: 'GET, HEAD' });
    expect(resolve(ROUTES, 'PUT', '/console/login')).toEqual({ status: 405, allow: 'GET, HEAD, POST' });
    expect(resolve(ROUTES, 'DELETE', '/console/nowhere')).toEqual({ status: 405, allow: 'GET, HEAD, POST' });
    expect(resolve(ROUTES, undefined, '/console/login')).toEqual({ status: 405, allow: 'GET, HEAD, POST' });
  });

  it('reads a url-encoded form up to 64 KiB, and refuses anything else as bad input', async () => {
    const req = (type: string | undefined, body: string) =>
      Object.assign(Readable.from([Buffer.from(body)]), {
        headers: type ? { 'content-type': type } : {},
      }) as unknown as IncomingMessage;
    const f = await readForm(req('application/x-www-form-urlencoded; charset=utf-8', 'a=1&b=%3Cx%3E'));
    expect([...f]).toEqual([
      ['a', '1'],
      ['b', '<x>'],
    ]);
    await expect(readForm(req('application/json', '{}'))).rejects.toThrow(OpsInputError);
    await expect(readForm(req(undefined, 'a=1'))).rejects.toThrow('expected a form');
    await expect(
      readForm(req('application/x-www-form-urlencoded', `a=${'x'.repeat(64 * 1024)}`)),
    ).rejects.toThrow('form too large');
  });

  it('every answer carries the security headers and the cookies set when it is sent; HEAD has no body', () => {
    const answer = (method: string) => {
      const out: { status?: number; headers?: Record<string, unknown>; body?: unknown } = {};
      const res = {
        writeHead: (status: number, headers: Record<string, unknown>) =>
          Object.assign(out, { status, headers }),
        end: (body?: unknown) => Object.assign(out, { body }),
      } as unknown as ServerResponse;
      let cookies: string[] = [];
      const reply = new Reply({ method } as IncomingMessage, res, () => cookies);
      return { out, reply, setCookies: (c: string[]) => (cookies = c) };
    };
    const a = answer('GET');
    a.setCookies(['c=1']);
    a.reply.page(403, html`<p>${'<no>'}</p>`);
    expect(a.out).toEqual({
      status: 403,
      headers: { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8', 'set-cookie': ['c=1'] },
      body: '<p>&lt;no&gt;</p>',
    });
    const b = answer('HEAD');
    b.reply.redirect('/console/');
    expect(b.out).toEqual({
      status: 303,
      headers: { ...SECURITY_HEADERS, 'content-type': 'text/plain', location: '/console/' },
      body: undefined,
    });
    expect(Object.keys(b.out.headers!)).not.toContain('set-cookie');
  });
});
