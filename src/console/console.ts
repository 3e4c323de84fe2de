import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type pg from 'pg';
import { operatorPresetOf } from '../compat/presets.ts';
import type { Config } from '../config/load.ts';
import { OPTIONS } from '../config/options.ts';
import { ErrorCode, errorMessage, RelayError } from '../errors.ts';
import type { EventFilter } from '../lifecycle/filter.ts';
import { RESOLVABLE, STATUSES, UNHEALTHY } from '../lifecycle/statuses.ts';
import { type RelayView, readSample } from '../observability/health.ts';
import type { Logger } from '../observability/logger.ts';
import { describeFilter, parseFilter } from '../ops/event-filter.ts';
import { resolveEvents, selectTargets, showEvent, topicOfEvents } from '../ops/events.ts';
import { OpsConflictError, OpsInputError } from '../ops/input-error.ts';
import { audit, type OpsContext } from '../ops/operator.ts';
import { reasonOf, remedyFor } from '../ops/remedies.ts';
import { countReplay } from '../ops/replay.ts';
import { REPLAYABLE_BY_DEFAULT } from '../ops/replay-command.ts';
import type { HealthSource } from '../ops/status-report.ts';
import { createPool } from '../store/pool.ts';
import { qualified } from '../store/sql-ident.ts';
import { readSlot, type SlotReading } from '../sweeper/slot-watch.ts';
import type { WalStatus } from '../sweeper/wal-budget.ts';
import { History } from './history.ts';
import type { SafeHtml } from './html.ts';
import { type Action, loginPage, messagePage, type Plan, previewPage, resultPage } from './pages/actions.ts';
import { eventPage } from './pages/event.ts';
import { eventsPage } from './pages/events.ts';
import { BASE, type PageContext } from './pages/layout.ts';
import { type OverviewData, overviewPage } from './pages/overview.ts';
import { replayJobPage, replayPage } from './pages/replay.ts';
import { filterOptions, filterParams, oneId } from './params.ts';
import { describeState } from './relay-state.ts';
import { ReplayJobs } from './replay-jobs.ts';
import {
  COOKIE,
  MIN_TOKEN_LENGTH,
  newSessionId,
  parseCookies,
  SECURITY_HEADERS,
  Sessions,
  sessionCookie,
} from './security.ts';

export interface ConsoleOptions {
  config: Config;
  /** The in-process relay (the object /readyz reads). */
  relay: RelayView;
  /** The health verdict of `outbox-relay status`, the one /readyz and the metrics show. */
  health: HealthSource;
  log: Logger;
  /** How often the console samples the slot and the metrics for its charts. */
  sampleEveryMs?: number;
  /** How far back the charts go. */
  historySpanMs?: number;
}

export interface ConsoleHandler {
  /** Serves a request whose path starts with /console. */
  handle(req: IncomingMessage, res: ServerResponse): Promise<void>;
  close(): Promise<void>;
}

const PAGE_SIZE = 50;
const PREVIEW_ROWS = 20;
const FOLLOWERS_SHOWN = 50;
const COUNTS_CACHE_MS = 15_000;
const MAX_BODY = 64 * 1024;
const ASSETS: Record<string, { file: string; type: string }> = {
  'console.css': { file: 'console.css', type: 'text/css; charset=utf-8' },
  'console.js': { file: 'console.js', type: 'text/javascript; charset=utf-8' },
  'favicon.svg': { file: 'favicon.svg', type: 'image/svg+xml' },
};

/**
 * The operator console (docs/console.md), served under /console by the relay's HTTP server.
 * Server-rendered pages; one CSS and one JS file. Its queries run on its own small pool (the
 * operator pool), never on the relay's connections, each bounded by a LIMIT or a page size,
 * with a statement timeout. Reads are open to whoever reaches the port; actions (resend,
 * discard, replay) need the operator token (--console-token-file) and go through the CLI's
 * functions and audit log (src/ops/).
 */
export function startConsole(o: ConsoleOptions): ConsoleHandler {
  const c = o.config;
  const token = c.consoleToken ?? null;
  if (token !== null && token.length < MIN_TOKEN_LENGTH) {
    throw new RelayError(
      ErrorCode.CONFIG_INVALID,
      `--console-token-file / OUTBOX_CONSOLE_TOKEN_FILE: the operator token must be at least ${MIN_TOKEN_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`,
    );
  }
  const log = o.log.child({ component: 'console' });
  const table = qualified(c.schema, c.table);
  // The events of its pages and actions: the outbox table's, or with --compat debezium the side table's.
  const preset = operatorPresetOf(c);
  const events = preset.events;
  const topicOf = topicOfEvents(c);
  const pool = createPool({
    connectionString: c.databaseUrl,
    max: 2,
    application_name: 'outbox-relay console',
    statement_timeout: 10_000,
    idleTimeoutMillis: 30_000,
  });
  const sessions = new Sessions();
  const assets = Object.fromEntries(
    Object.entries(ASSETS).map(([name, a]) => [
      name,
      { type: a.type, body: readFileSync(new URL(`./assets/${a.file}`, import.meta.url)) },
    ]),
  );
  const opsContext = (db: pg.ClientBase): OpsContext => ({
    config: c,
    db,
    table,
    events,
    log: o.log,
    out: () => {},
  });
  const replayBatchSize = OPTIONS.find((x) => x.key === 'replayBatchSize')!.default as number;
  const jobs = new ReplayJobs({ pool, table, batchSize: replayBatchSize, log, opsContext });

  // --- the sampler: slot and metrics every sampleEveryMs, an hour kept in memory ---
  const every = o.sampleEveryMs ?? 5_000;
  const history = new History(o.historySpanMs ?? 3600_000, every);
  let lastRelayError: { at: number; text: string } | null = null;
  const sumOf = async (
    m: { get(): Promise<{ values: { value: number; metricName?: string }[] }> },
    suffix = '',
  ) =>
    (await m.get()).values
      .filter((v) => !suffix || v.metricName?.endsWith(suffix))
      .reduce((s, v) => s + v.value, 0);
  const sample = async () => {
    const s = await readSample(o.relay);
    if (s.state === 'waiting' && s.waitingReason) lastRelayError = { at: s.at, text: s.waitingReason };
    const slot = await readSlot(pool, c.slot).catch(() => null);
    const m = o.relay.metrics;
    history.add({
      at: s.at,
      retainedBytes: slot ? slot.retainedBytes : null,
      safeWalSizeBytes: slot?.safeWalSizeBytes ?? null,
      publishedTotal: await sumOf(m.eventsPublished),
      lagSum: await sumOf(m.endToEndLagSeconds, '_sum'),
      lagCount: await sumOf(m.endToEndLagSeconds, '_count'),
    });
  };
  let sampling: Promise<void> = sample().catch(() => {});
  const timer = setInterval(() => {
    sampling = sampling
      .then(sample)
      .catch((e) => log.debug({ err: errorMessage(e) }, 'console sample failed'));
  }, every);
  timer.unref();

  const withClient = async <T>(fn: (db: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      return await fn(client);
    } finally {
      client.release();
    }
  };

  let counts: { at: number; byStatus: Record<string, number> } | null = null;
  const countAll = async (): Promise<{ byStatus: Record<string, number>; error: string | null }> => {
    if (counts && Date.now() - counts.at < COUNTS_CACHE_MS) return { byStatus: counts.byStatus, error: null };
    try {
      const byStatus = await withClient((db) => events.count(db, { statuses: [...STATUSES] }));
      counts = { at: Date.now(), byStatus };
      return { byStatus, error: null };
    } catch (e) {
      return { byStatus: counts?.byStatus ?? {}, error: `cannot count the events: ${errorMessage(e)}` };
    }
  };

  // --- requests ---
  // Routed by hand on node:http (the pages below, one regex each for an event and a replay job),
  // not by a framework: the console's security — the token check, the CSRF token on every POST,
  // the form body read with a size limit, the CSP and other headers on every answer — is all here
  // in one function, where a reviewer sees it whole; a framework's middleware order, body parsers
  // and error pages would be a dependency tree to audit for about ten routes.
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://console.invalid');
    const path = url.pathname;
    const cookies = parseCookies(req.headers.cookie);
    let sid = cookies[COOKIE];
    const secure =
      req.headers['x-forwarded-proto'] === 'https' || !!(req.socket as Partial<TLSSocket>).encrypted;
    const setCookies: string[] = [];
    if (!sid || !/^[A-Za-z0-9_-]{43}$/.test(sid)) {
      // A visitor without a session gets an id (not logged in), so its forms carry a CSRF token.
      sid = newSessionId();
      setCookies.push(sessionCookie(sid, secure));
    }
    const ctx = (): PageContext => ({
      actionsEnabled: token !== null,
      loggedIn: token !== null && sessions.isLoggedIn(sid),
      csrf: sessions.csrfToken(sid!),
      slot: c.slot,
      table: events.table,
      cliFlags: preset.cliFlags,
    });
    const send = (
      status: number,
      type: string,
      body: string | Buffer,
      headers: Record<string, string> = {},
    ) => {
      res.writeHead(status, {
        ...SECURITY_HEADERS,
        'content-type': type,
        ...(setCookies.length ? { 'set-cookie': setCookies } : {}),
        ...headers,
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const page = (status: number, h: SafeHtml) => send(status, 'text/html; charset=utf-8', h.text);
    const redirect = (to: string) => send(303, 'text/plain', `see ${to}\n`, { location: to });
    const refuse = (status: number, why: string) => page(status, messagePage(ctx(), 'Not allowed', why));
    /** Actions: a token configured, a logged-in session, and the session's CSRF token. */
    const gate = (form: URLSearchParams): boolean => {
      if (token === null) {
        refuse(403, 'The console is read-only: no operator token is configured (--console-token-file).');
        return false;
      }
      if (!sessions.validCsrf(sid, form.get('csrf') ?? undefined)) {
        refuse(
          403,
          'The form is stale or did not come from this console (CSRF check failed). Reload the page and try again.',
        );
        return false;
      }
      if (!sessions.isLoggedIn(sid)) {
        refuse(403, 'Actions need the operator token: log in first.');
        return false;
      }
      return true;
    };
    const who = () => ({
      via: 'console',
      remoteAddress: req.socket.remoteAddress ?? null,
      // Ties the actions of one login together without revealing the session id.
      session: createHash('sha256').update(sid!).digest('hex').slice(0, 12),
    });

    try {
      // Replay copies rows of the relay's own table; a preset's table may be the application's.
      if (preset.noReplay !== null && path.startsWith(`${BASE}/replay`))
        return page(404, messagePage(ctx(), 'Not available', preset.noReplay));
      if (req.method === 'POST') {
        const form = await readForm(req);
        switch (path) {
          case `${BASE}/login`: {
            if (token === null)
              return refuse(403, 'No operator token is configured: the console is read-only.');
            if (!sessions.validCsrf(sid, form.get('csrf') ?? undefined))
              return page(403, loginPage(ctx(), { error: 'The form is stale: reload and try again.' }));
            const r = sessions.login(form.get('token') ?? undefined, token);
            if (r.result === 'throttled') {
              log.warn(who(), 'console login throttled');
              return page(429, loginPage(ctx(), { error: 'Too many failed logins: wait a minute.' }));
            }
            if (r.result !== 'ok') {
              log.warn(who(), 'console login failed');
              return page(403, loginPage(ctx(), { error: 'Wrong token.' }));
            }
            sid = r.sessionId;
            setCookies.splice(0, setCookies.length, sessionCookie(sid, secure));
            log.info(who(), 'console login');
            return redirect(`${BASE}/`);
          }
          case `${BASE}/logout`:
            if (!sessions.validCsrf(sid, form.get('csrf') ?? undefined))
              return refuse(403, 'CSRF check failed.');
            sessions.logout(sid);
            setCookies.splice(0, setCookies.length, sessionCookie(sid!, secure, 0));
            return redirect(`${BASE}/`);
          case `${BASE}/actions/apply`: {
            if (!gate(form)) return;
            const action = actionOf(form.get('action'));
            const r = await withClient((db) => apply(db, action, form, who()));
            return page(200, resultPage(ctx(), { action, ...r }));
          }
          case `${BASE}/replay/start`: {
            if (!gate(form)) return;
            if (jobs.busy()) return refuse(409, 'A replay is still copying; wait until it has finished.');
            const params = filterParams(form);
            const filter = replayFilter(params);
            const dry = await withClient((db) => countReplay(db, table, filter, { includeReplays: false }));
            const job = jobs.start(filter, dry.count, who());
            return redirect(`${BASE}/replay/jobs/${job.id}`);
          }
          default:
            return send(405, 'text/plain', 'method not allowed\n', { allow: 'GET, HEAD' });
        }
      }
      if (req.method !== 'GET' && req.method !== 'HEAD')
        return send(405, 'text/plain', 'method not allowed\n', { allow: 'GET, HEAD, POST' });

      if (path === BASE) return redirect(`${BASE}/`);
      if (path === `${BASE}/`) return page(200, overviewPage(ctx(), await overview()));
      if (path === `${BASE}/login`) return page(200, loginPage(ctx()));
      if (path.startsWith(`${BASE}/assets/`)) {
        const a = assets[path.slice(`${BASE}/assets/`.length)];
        return a ? send(200, a.type, a.body) : send(404, 'text/plain', 'not found\n');
      }
      if (path === `${BASE}/events`) return page(200, eventsPage(ctx(), await eventsList(url.searchParams)));
      const ev = /^\/console\/events\/([^/]+)$/.exec(path);
      if (ev) return page(200, eventPage(ctx(), await withClient((db) => event(db, oneId(ev[1])))));
      if (path === `${BASE}/actions/preview`) {
        const q = url.searchParams;
        return page(
          200,
          previewPage(ctx(), await withClient((db) => preview(db, actionOf(q.get('action')), q))),
        );
      }
      if (path === `${BASE}/replay`) return page(200, replayPage(ctx(), await replayForm(url.searchParams)));
      const job = /^\/console\/replay\/jobs\/([0-9a-f]+)(\.json)?$/.exec(path);
      if (job) {
        const v = await jobs.get(job[1]!);
        if (!v)
          return page(
            404,
            messagePage(ctx(), 'Not found', 'No such replay (the console keeps the last 10).'),
          );
        return job[2] ? send(200, 'application/json', JSON.stringify(v)) : page(200, replayJobPage(ctx(), v));
      }
      return page(404, messagePage(ctx(), 'Not found', `No page at ${path}.`));
    } catch (e) {
      // A resend/discard that lost a race (rolled back, nothing changed): look again, try again.
      if (e instanceof OpsConflictError) return page(409, messagePage(ctx(), 'Changed meanwhile', e.message));
      if (e instanceof OpsInputError) {
        const missing = /does not exist/.test(e.message);
        return page(missing ? 404 : 400, messagePage(ctx(), missing ? 'Not found' : 'Bad input', e.message));
      }
      throw e;
    }
  };

  // --- data of the pages ---
  async function overview() {
    const s = await readSample(o.relay);
    // One reading for the verdict and the slot card, and one that has every state change of the
    // relay before this sample in it: the page never shows two answers at once.
    const health = await o.health.settled();
    let slot: OverviewData['slot']['reading'] = null;
    let slotError: string | null = null;
    if (health.report) {
      const r = health.report.slot;
      slotError = r.error;
      slot = r.exists
        ? {
            active: r.active === true,
            activePid: r.activePid,
            walStatus: r.walStatus as WalStatus | null,
            invalidationReason: (r.invalidationReason ?? null) as SlotReading['invalidationReason'],
            safeWalSizeBytes: r.safeWalSizeBytes,
            retainedBytes: r.retainedWalBytes ?? 0,
            confirmedLagBytes: r.lagBytes ?? 0,
          }
        : null;
    } else {
      // The status could not be read (the verdict says why): the slot as the relay reads it.
      try {
        slot = await readSlot(pool, c.slot);
      } catch (e) {
        slotError = errorMessage(e);
      }
    }
    const unhealthy = await withClient((db) => events.list(db, { statuses: [...RESOLVABLE] }, 10));
    return {
      now: s.at,
      health,
      state: describeState(s),
      confirmedLsn: s.confirmedLsn,
      secondsSinceProgress: s.lastProgressAt === null ? null : (s.at - s.lastProgressAt) / 1000,
      slot: { reading: slot, error: slotError },
      secondsToExhaustion: history.secondsToExhaustion(),
      points: history.points(),
      spanMs: history.spanMs,
      counts: await countAll(),
      publishRate: history.publishRate(),
      lastRelayError,
      unhealthy,
    };
  }

  async function eventsList(q: URLSearchParams) {
    const params = filterParams(q);
    let filter: EventFilter;
    try {
      filter = parseFilter(filterOptions(params), { allowed: STATUSES, fallback: UNHEALTHY });
    } catch (e) {
      if (!(e instanceof OpsInputError)) throw e;
      return { params, error: e.message, rows: [], counts: {}, nextAfterId: null, limit: PAGE_SIZE };
    }
    params.status = [...filter.statuses];
    const { afterId: _page, ...whole } = filter;
    return withClient(async (db) => {
      const rows = await events.list(db, filter, PAGE_SIZE);
      return {
        params,
        error: null,
        rows,
        counts: await events.count(db, whole),
        nextAfterId: rows.length === PAGE_SIZE ? rows[rows.length - 1]!.id : null,
        limit: PAGE_SIZE,
      };
    });
  }

  async function event(db: pg.ClientBase, id: string) {
    const e = await showEvent(db, events, id);
    const same = { aggregateType: e.aggregate_type, aggregateId: e.aggregate_id };
    const followers = await events.list(
      db,
      { statuses: ['parked'], ...same, afterId: e.id },
      FOLLOWERS_SHOWN,
    );
    const heldBy =
      e.status === 'parked'
        ? ((await events.list(db, { statuses: [...RESOLVABLE], ...same }, 1))[0] ?? null)
        : null;
    let topic: string | null = null;
    try {
      topic = topicOf(e.aggregate_type, e.event_type);
    } catch {
      // No legal topic: the router's error (last_error) says why.
    }
    const remedy = e.last_error ? remedyFor(reasonOf(e.last_error), topic ?? '<topic>') : null;
    return { event: e, followers, followersLimit: FOLLOWERS_SHOWN, heldBy, topic, remedy };
  }

  async function preview(db: pg.ClientBase, action: Action, q: URLSearchParams): Promise<Plan> {
    if (q.get('scope') === 'filter') {
      const params = filterParams(q);
      const filter = parseFilter(filterOptions(params), { allowed: RESOLVABLE, fallback: RESOLVABLE });
      params.status = [...filter.statuses];
      const ids = await selectTargets(db, events, { filter }, RESOLVABLE);
      return {
        action,
        target: { filter: params, description: describeFilter(filter) },
        count: ids.length,
        throughId: ids[ids.length - 1] ?? null,
        first: await events.list(db, filter, PREVIEW_ROWS),
        followers: 0,
      };
    }
    const id = oneId(q.get('id'));
    // Validates like the CLI: the event exists and is failed or dead.
    await selectTargets(db, events, { ids: [id] }, RESOLVABLE);
    const e = await showEvent(db, events, id);
    const parked = await events.count(db, {
      statuses: ['parked'],
      aggregateType: e.aggregate_type,
      aggregateId: e.aggregate_id,
      afterId: e.id,
    });
    return { action, target: { id }, count: 1, throughId: id, first: [e], followers: parked.parked ?? 0 };
  }

  async function apply(
    db: pg.ClientBase,
    action: Action,
    form: URLSearchParams,
    via: Record<string, unknown>,
  ) {
    const expected = Number(form.get('expected') ?? 0);
    let ids: string[];
    let what: Record<string, unknown>;
    let backTo: string;
    if (form.get('scope') === 'filter') {
      const filter = parseFilter(filterOptions(filterParams(form)), {
        allowed: RESOLVABLE,
        fallback: RESOLVABLE,
      });
      const through = BigInt(oneId(form.get('through_id')));
      // Never more than the preview showed: rows that matched later are left for another look.
      ids = (await selectTargets(db, events, { filter }, RESOLVABLE)).filter((id) => BigInt(id) <= through);
      what = { filter: describeFilter(filter), throughId: through.toString() };
      backTo = `${BASE}/events`;
    } else {
      ids = [oneId(form.get('id'))];
      await selectTargets(db, events, { ids }, RESOLVABLE);
      what = { ids };
      backTo = `${BASE}/events/${ids[0]}`;
    }
    const resetAttempts = form.get('reset_attempts') === '1';
    // As in the CLI: guarded by status, all of these ids or none (a row published since the
    // selection just above rolls it back: an error page, nothing changed).
    const changed = await resolveEvents(db, events, action, ids, resetAttempts);
    // The CLI's audit line, plus who in the console did it.
    await audit(
      opsContext(db),
      action,
      { ...(action === 'resend' ? { ...what, resetAttempts } : what), ...via },
      changed,
    );
    counts = null;
    return { changed, expected, backTo };
  }

  function replayFilter(params: ReturnType<typeof filterParams>): EventFilter {
    if (!params.since) throw new OpsInputError('a replay needs since (e.g. 2h, or 2026-11-20T14:00Z)');
    return parseFilter(filterOptions(params), { allowed: STATUSES, fallback: REPLAYABLE_BY_DEFAULT });
  }

  async function replayForm(q: URLSearchParams) {
    const params = filterParams(q);
    const base = { params, jobs: jobs.list() };
    if (
      !params.since &&
      !params.until &&
      !params.aggregateType &&
      !params.aggregateId &&
      !params.eventType &&
      !params.status.length
    ) {
      params.status = [...REPLAYABLE_BY_DEFAULT];
      return { ...base, error: null, preview: null };
    }
    let filter: EventFilter;
    try {
      filter = replayFilter(params);
    } catch (e) {
      if (!(e instanceof OpsInputError)) throw e;
      return { ...base, error: e.message, preview: null };
    }
    params.status = [...filter.statuses];
    const r = await withClient((db) => countReplay(db, table, filter, { includeReplays: false }));
    return { ...base, error: null, preview: { ...r, description: describeFilter(filter) } };
  }

  return {
    handle,
    async close() {
      clearInterval(timer);
      await sampling;
      await pool.end().catch(() => {});
    },
  };
}

function actionOf(v: string | null): Action {
  if (v === 'resend' || v === 'discard') return v;
  throw new OpsInputError(`unknown action ${JSON.stringify(v)} (resend or discard)`);
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
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
