import type { IncomingMessage, ServerResponse } from 'node:http';
import { OpsInputError } from '../ops/input-error.ts';
import type { SafeHtml } from './html.ts';
import { SECURITY_HEADERS } from './security.ts';

/**
 * The console's HTTP plumbing on node:http: the route table's type and its matching, the form
 * body read with a size limit, and Reply, the one writer of every answer (the security headers
 * and the session cookie on each, no body for HEAD). Matching is a first-match walk over about
 * ten routes, each an exact path or one regex: not a framework, so that the console's security
 * (auth.ts' checks, the CSRF token on every POST, this body limit, the CSP) stays in a few files
 * a reviewer reads whole, with no middleware order, body parsers or error pages to audit.
 * What a miss answers: a read (GET, HEAD) → 404, the caller's page; a POST → 405 `Allow: GET,
 * HEAD` (every path can be read, if only as a 404 page); any other method → 405 with every
 * method of the table. src/http/server.ts has no table of its own to share (a switch over three
 * read-only paths).
 */

export type Method = 'GET' | 'POST';

export interface Route<R> {
  /** GET routes answer HEAD too (Reply sends no body). */
  method: Method;
  /** An exact path, or a regex whose groups are passed to `run`. */
  path: string | RegExp;
  run(r: R, groups: readonly string[]): Promise<void> | void;
}

export type Resolution<R> =
  | { route: Route<R>; groups: readonly string[] }
  | { status: 404 }
  | { status: 405; allow: string };

export function resolve<R>(
  routes: readonly Route<R>[],
  method: string | undefined,
  path: string,
): Resolution<R> {
  const m = method === 'HEAD' ? 'GET' : method;
  if (m !== 'GET' && m !== 'POST') {
    const known = (['GET', 'POST'] as const).filter((x) => routes.some((r) => r.method === x));
    return { status: 405, allow: known.flatMap((x) => (x === 'GET' ? ['GET', 'HEAD'] : [x])).join(', ') };
  }
  for (const route of routes) {
    if (route.method !== m) continue;
    if (typeof route.path === 'string') {
      if (route.path === path) return { route, groups: [] };
      continue;
    }
    const found = route.path.exec(path);
    if (found) return { route, groups: found.slice(1).map((g) => g ?? '') };
  }
  return m === 'GET' ? { status: 404 } : { status: 405, allow: 'GET, HEAD' };
}

const MAX_BODY = 64 * 1024;

/** A POST's url-encoded form, at most 64 KiB; anything else is bad input (a 400 page). */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = req.headers['content-type'] ?? '';
  if (!type.startsWith('application/x-www-form-urlencoded')) throw new OpsInputError('expected a form');
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new OpsInputError('form too large');
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** Writes one request's answer: SECURITY_HEADERS and the cookies `setCookies()` holds when it is sent. */
export class Reply {
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  readonly #setCookies: () => readonly string[];

  constructor(req: IncomingMessage, res: ServerResponse, setCookies: () => readonly string[]) {
    this.#req = req;
    this.#res = res;
    this.#setCookies = setCookies;
  }

  send(status: number, type: string, body: string | Buffer, headers: Record<string, string> = {}): void {
    const cookies = this.#setCookies();
    this.#res.writeHead(status, {
      ...SECURITY_HEADERS,
      'content-type': type,
      ...(cookies.length ? { 'set-cookie': [...cookies] } : {}),
      ...headers,
    });
    this.#res.end(this.#req.method === 'HEAD' ? undefined : body);
  }

  page(status: number, h: SafeHtml): void {
    this.send(status, 'text/html; charset=utf-8', h.text);
  }

  /** 303 to `to`. */
  redirect(to: string): void {
    this.send(303, 'text/plain', `see ${to}\n`, { location: to });
  }
}
