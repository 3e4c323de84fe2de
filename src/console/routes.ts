import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type pg from 'pg';
import type { Logger } from '../observability/logger.ts';
import { countReplay } from '../ops/replay.ts';
import { type ApplyDeps, actionOf, applyAction, replayFilter } from './actions.ts';
import { type Auth, type Visitor, whoOf } from './auth.ts';
import { type PageData, withClient } from './page-data.ts';
import { loginPage, messagePage, previewPage, resultPage } from './pages/actions.ts';
import { eventPage } from './pages/event.ts';
import { eventsPage } from './pages/events.ts';
import { BASE, type PageContext } from './pages/layout.ts';
import { overviewPage } from './pages/overview.ts';
import { replayJobPage, replayPage } from './pages/replay.ts';
import { filterParams } from './params.ts';
import type { ReplayJobs } from './replay-jobs.ts';
import type { Reply, Route } from './router.ts';

/**
 * The console's route table: which path and method runs what, in the order router.ts tries them.
 * Each route reads its data (page-data.ts), or checks the visitor (auth.ts) and changes something
 * (actions.ts, replay-jobs.ts), then renders a page of pages/ through the request's Reply. The
 * POST routes are the only ones that change anything; every one of them but login and logout
 * goes through auth.ts' gate first. Everything a route needs comes in RouteDeps or the Exchange.
 */

/** One request as the routes see it; `form` is empty but for a POST. */
export interface Exchange {
  req: IncomingMessage;
  url: URL;
  visitor: Visitor;
  form: URLSearchParams;
  reply: Reply;
  ctx(): PageContext;
}

export interface RouteDeps {
  auth: Auth;
  data: PageData;
  jobs: ReplayJobs;
  pool: pg.Pool;
  /** Quoted name of the relay's own table (replay copies its rows). */
  table: string;
  assets: Assets;
  apply: ApplyDeps;
  log: Logger;
}

export type Assets = Record<string, { type: string; body: Buffer }>;

const ASSETS: Record<string, string> = {
  'console.css': 'text/css; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/** The console's one CSS, one JS and its icon, read once at start. */
export function readAssets(): Assets {
  return Object.fromEntries(
    Object.entries(ASSETS).map(([file, type]) => [
      file,
      { type, body: readFileSync(new URL(`./assets/${file}`, import.meta.url)) },
    ]),
  );
}

export function consoleRoutes(d: RouteDeps): Route<Exchange>[] {
  const refuse = (x: Exchange, status: number, why: string) =>
    x.reply.page(status, messagePage(x.ctx(), 'Not allowed', why));
  /** Actions: a token configured, the session's CSRF token, a logged-in session. */
  const gate = (x: Exchange): boolean => {
    const why = d.auth.refusal(x.visitor, x.form);
    if (why !== null) refuse(x, 403, why);
    return why === null;
  };
  const who = (x: Exchange) => whoOf(x.req, x.visitor);
  return [
    {
      method: 'POST',
      path: `${BASE}/login`,
      run: (x) => {
        const r = d.auth.login(x.visitor, x.form);
        switch (r.result) {
          case 'read-only':
            return refuse(x, 403, 'No operator token is configured: the console is read-only.');
          case 'stale':
            return x.reply.page(
              403,
              loginPage(x.ctx(), { error: 'The form is stale: reload and try again.' }),
            );
          case 'throttled':
            d.log.warn(who(x), 'console login throttled');
            return x.reply.page(429, loginPage(x.ctx(), { error: 'Too many failed logins: wait a minute.' }));
          case 'wrong':
            d.log.warn(who(x), 'console login failed');
            return x.reply.page(403, loginPage(x.ctx(), { error: 'Wrong token.' }));
          case 'ok':
            d.log.info(who(x), 'console login');
            return x.reply.redirect(`${BASE}/`);
        }
      },
    },
    {
      method: 'POST',
      path: `${BASE}/logout`,
      run: (x) =>
        d.auth.logout(x.visitor, x.form)
          ? x.reply.redirect(`${BASE}/`)
          : refuse(x, 403, 'CSRF check failed.'),
    },
    {
      method: 'POST',
      path: `${BASE}/actions/apply`,
      run: async (x) => {
        if (!gate(x)) return;
        const action = actionOf(x.form.get('action'));
        const via = who(x);
        const r = await withClient(d.pool, (db) => applyAction(d.apply, db, action, x.form, via));
        x.reply.page(200, resultPage(x.ctx(), { action, ...r }));
      },
    },
    {
      method: 'POST',
      path: `${BASE}/replay/start`,
      run: async (x) => {
        if (!gate(x)) return;
        if (d.jobs.busy()) return refuse(x, 409, 'A replay is still copying; wait until it has finished.');
        const filter = replayFilter(filterParams(x.form));
        const dry = await withClient(d.pool, (db) =>
          countReplay(db, d.table, filter, { includeReplays: false }),
        );
        const job = d.jobs.start(filter, dry.count, who(x));
        x.reply.redirect(`${BASE}/replay/jobs/${job.id}`);
      },
    },
    { method: 'GET', path: BASE, run: (x) => x.reply.redirect(`${BASE}/`) },
    {
      method: 'GET',
      path: `${BASE}/`,
      run: async (x) => x.reply.page(200, overviewPage(x.ctx(), await d.data.overview())),
    },
    { method: 'GET', path: `${BASE}/login`, run: (x) => x.reply.page(200, loginPage(x.ctx())) },
    {
      method: 'GET',
      path: /^\/console\/assets\/(.*)$/,
      run: (x, [name]) => {
        const a = d.assets[name!];
        return a ? x.reply.send(200, a.type, a.body) : x.reply.send(404, 'text/plain', 'not found\n');
      },
    },
    {
      method: 'GET',
      path: `${BASE}/events`,
      run: async (x) => x.reply.page(200, eventsPage(x.ctx(), await d.data.events(x.url.searchParams))),
    },
    {
      method: 'GET',
      path: /^\/console\/events\/([^/]+)$/,
      run: async (x, [id]) => x.reply.page(200, eventPage(x.ctx(), await d.data.event(id))),
    },
    {
      method: 'GET',
      path: `${BASE}/actions/preview`,
      run: async (x) => x.reply.page(200, previewPage(x.ctx(), await d.data.preview(x.url.searchParams))),
    },
    {
      method: 'GET',
      path: `${BASE}/replay`,
      run: async (x) => x.reply.page(200, replayPage(x.ctx(), await d.data.replay(x.url.searchParams))),
    },
    {
      method: 'GET',
      path: /^\/console\/replay\/jobs\/([0-9a-f]+)(\.json)?$/,
      run: async (x, [id, json]) => {
        const v = await d.jobs.get(id!);
        if (!v)
          return x.reply.page(
            404,
            messagePage(x.ctx(), 'Not found', 'No such replay (the console keeps the last 10).'),
          );
        return json
          ? x.reply.send(200, 'application/json', JSON.stringify(v))
          : x.reply.page(200, replayJobPage(x.ctx(), v));
      },
    },
  ];
}
